import { readFile } from "node:fs/promises";
import {
  type MediaInput,
  type MediaProcessor,
  type OutputFile,
  type PackagedOutput,
  type PackagedTrack,
  type PlannedRendition,
  type ProbedSource,
  type Rendition,
  StorageError,
} from "@vod/core";
import { Effect } from "effect";

const bytesOf = (text: string) => new TextEncoder().encode(text);

async function* once(bytes: Uint8Array) {
  yield bytes;
}

const even = (n: number) => Math.max(2, Math.round(n / 2) * 2);

/** The bytes of a stored input, read in place or from the store. */
const bytesOfInput = (input: MediaInput) =>
  "path" in input
    ? Effect.tryPromise({
        try: () => readFile(input.path),
        catch: (cause) => new StorageError({ message: `could not read ${input.path}`, cause }),
      })
    : Effect.flatMap(input.open(), (stream) =>
        Effect.tryPromise({
          try: async () => {
            const chunks: Uint8Array[] = [];
            for await (const chunk of stream) chunks.push(chunk);
            return Buffer.concat(chunks);
          },
          catch: (cause) => new StorageError({ message: "could not read a stored input", cause }),
        }),
      );

const trackBytes = (track: PackagedTrack) =>
  Effect.map(Effect.forEach([track.init, ...track.segments], bytesOfInput), (pieces) =>
    Buffer.concat(pieces),
  );

/**
 * A DASH manifest of the variants a master lists (`BANDWIDTH`, `RESOLUTION`, `name/playlist.m3u8`),
 * each as the fake packages it: an init segment and one 4 s segment; ContentProtection with the
 * key id for DRM, as the real packaging writes it.
 */
const dashOf = (master: string, keyId: string | undefined) => {
  const representations = [
    ...master.matchAll(/BANDWIDTH=(\d+),RESOLUTION=(\d+)x(\d+)\n([^/\n]+)\/playlist\.m3u8/g),
  ].map(
    ([, bandwidth, width, height, name]) =>
      `      <Representation id="${name}" bandwidth="${bandwidth}" width="${width}" height="${height}" codecs="avc1.64001f" mimeType="video/mp4">\n` +
      `        <SegmentTemplate timescale="1000" duration="4000" initialization="${name}/init.mp4" media="${name}/seg_$Number$.m4s" startNumber="1"/>\n` +
      "      </Representation>\n",
  );
  const kid = keyId?.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, "$1-$2-$3-$4-$5");
  return (
    '<?xml version="1.0" encoding="UTF-8"?>\n' +
    '<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" xmlns:cenc="urn:mpeg:cenc:2013" profiles="urn:mpeg:dash:profile:isoff-live:2011" type="static" mediaPresentationDuration="PT4S" minBufferTime="PT2S">\n' +
    '  <Period id="0">\n    <AdaptationSet id="0" contentType="video">\n' +
    (kid
      ? `      <ContentProtection value="cenc" schemeIdUri="urn:mpeg:dash:mp4protection:2011" cenc:default_KID="${kid}"/>\n`
      : "") +
    representations.join("") +
    "    </AdaptationSet>\n  </Period>\n</MPD>\n"
  );
};

/**
 * A media processor that never looks at the source: every upload probes as a 4 s 640x360 H.264
 * video, planned as the ladder's rungs at or below 360p (360p and 240p with the default ladder),
 * each packaged into a tiny HLS set (a media playlist, an init segment, one segment), with the
 * poster, the DASH manifest and the master (listing the variants of `options.master` too). Suites that need a ready
 * asset without ffmpeg's seconds use it. A DRM asset's media playlists name its key id in the
 * ClearKey line, as the real packaging does. `remux` joins the tracks' stored bytes (video, then
 * audio) into the file it emits: what it reads is what is served.
 */
export const fakeMediaProcessor = (): MediaProcessor => {
  const source: ProbedSource = {
    source_width: 640,
    source_height: 360,
    source_fps: 30,
    source_codec: "h264",
    source_duration_ms: 4_000,
    source_bitrate_kbps: 800,
    has_video: true,
    has_audio: true,
  };
  const plan = (ladder: ReadonlyArray<Rendition>): ReadonlyArray<PlannedRendition> => {
    const fitting = [...ladder].filter((r) => r.height <= 360).sort((a, b) => b.height - a.height);
    const rungs: ReadonlyArray<Rendition> =
      fitting.length > 0
        ? fitting
        : [{ name: "360p", height: 360, videoBitrateKbps: 800, audioBitrateKbps: 96 }];
    return rungs.map((rendition) => ({
      rendition,
      width: even((rendition.height * 16) / 9),
      height: rendition.height,
    }));
  };
  return {
    probe: () => Effect.succeed(source),
    plan: (_source, ladder) => plan(ladder),
    package: (_input, _source, ladder, emit, options) =>
      Effect.gen(function* () {
        const planned = plan(ladder);
        const shared = options?.shared ?? true;
        const key = options?.encryption
          ? `#EXT-X-KEY:METHOD=SAMPLE-AES-CTR,KEYFORMAT="org.w3.clearkey",KEYFORMATVERSIONS="1",URI="data:text/plain;base64,${Buffer.from(options.encryption.keyId, "hex").toString("base64")}"\n`
          : "";
        const variant = ({ rendition, width, height }: PlannedRendition) =>
          `#EXT-X-STREAM-INF:BANDWIDTH=${rendition.videoBitrateKbps * 1000},RESOLUTION=${width}x${height}\n${rendition.name}/playlist.m3u8\n`;
        const listed = (options?.master ?? "#EXTM3U\n")
          .split(/(?=#EXT-X-STREAM-INF:)/)
          .filter((part) => !planned.some((p) => part.includes(`\n${p.rendition.name}/playlist.m3u8`)));
        const files: Array<Omit<OutputFile, "body"> & { readonly bytes: Uint8Array }> = [
          ...planned.flatMap(({ rendition }) => [
            { path: `${rendition.name}/init.mp4`, contentType: "video/mp4", bytes: bytesOf("init-segment") },
            {
              path: `${rendition.name}/seg_1.m4s`,
              contentType: "video/iso.segment",
              bytes: bytesOf("x".repeat(1_000)),
            },
            {
              path: `${rendition.name}/playlist.m3u8`,
              contentType: "application/vnd.apple.mpegurl",
              bytes: bytesOf(
                `#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:4\n${key}#EXT-X-MAP:URI="init.mp4"\n#EXTINF:4.0,\nseg_1.m4s\n#EXT-X-ENDLIST\n`,
              ),
            },
          ]),
          ...(shared ? [{ path: "poster.jpg", contentType: "image/jpeg", bytes: bytesOf("poster") }] : []),
          {
            path: "manifest.mpd",
            contentType: "application/dash+xml",
            bytes: bytesOf(dashOf([...listed, ...planned.map(variant)].join(""), options?.encryption?.keyId)),
          },
          {
            path: "master.m3u8",
            contentType: "application/vnd.apple.mpegurl",
            bytes: bytesOf([...listed, ...planned.map(variant)].join("")),
          },
        ];
        for (const file of files)
          yield* emit({ path: file.path, contentType: file.contentType, body: once(file.bytes) });
        const output: PackagedOutput = {
          files: files.map((f) => ({ path: f.path, contentType: f.contentType, size: f.bytes.byteLength })),
          master: "master.m3u8",
          manifest: "manifest.mpd",
          poster: shared ? "poster.jpg" : undefined,
          renditions: planned.map((p) => p.rendition),
        };
        return output;
      }),
    remux: (tracks, file, emit) =>
      Effect.gen(function* () {
        const pieces = [
          ...(tracks.video ? [yield* trackBytes(tracks.video)] : []),
          ...(tracks.audio ? [yield* trackBytes(tracks.audio)] : []),
        ];
        const bytes = new Uint8Array(Buffer.concat(pieces));
        yield* emit({ path: file.path, contentType: file.contentType, body: once(bytes) });
        return { size: bytes.byteLength };
      }),
  };
};

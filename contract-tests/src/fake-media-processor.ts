import type { MediaProcessor, OutputFile, PackagedOutput, ProbedSource, Rendition } from "@vod/core";
import { Effect } from "effect";

const bytesOf = (text: string) => new TextEncoder().encode(text);

async function* once(bytes: Uint8Array) {
  yield bytes;
}

/**
 * A media processor that never looks at the source: every upload probes as a 4 s 640x360 H.264
 * video and packages into a tiny HLS set (master, one media playlist, an init segment, one
 * segment, a poster). Suites that need a ready asset without ffmpeg's seconds use it. A DRM
 * asset's media playlist names its key id in the ClearKey line, as the real packaging does.
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
  return {
    probe: () => Effect.succeed(source),
    package: (_input, _source, ladder, emit, options) =>
      Effect.gen(function* () {
        const rung: Rendition = ladder.find((r) => r.height <= 360) ??
          ladder[ladder.length - 1] ?? {
            name: "360p",
            height: 360,
            videoBitrateKbps: 800,
            audioBitrateKbps: 96,
          };
        const key = options?.encryption
          ? `#EXT-X-KEY:METHOD=SAMPLE-AES-CTR,KEYFORMAT="org.w3.clearkey",KEYFORMATVERSIONS="1",URI="data:text/plain;base64,${Buffer.from(options.encryption.keyId, "hex").toString("base64")}"\n`
          : "";
        const files: Array<Omit<OutputFile, "body"> & { readonly bytes: Uint8Array }> = [
          { path: `${rung.name}/init.mp4`, contentType: "video/mp4", bytes: bytesOf("init-segment") },
          {
            path: `${rung.name}/seg_1.m4s`,
            contentType: "video/iso.segment",
            bytes: bytesOf("x".repeat(1_000)),
          },
          {
            path: `${rung.name}/playlist.m3u8`,
            contentType: "application/vnd.apple.mpegurl",
            bytes: bytesOf(
              `#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:4\n${key}#EXT-X-MAP:URI="init.mp4"\n#EXTINF:4.0,\nseg_1.m4s\n#EXT-X-ENDLIST\n`,
            ),
          },
          { path: "poster.jpg", contentType: "image/jpeg", bytes: bytesOf("poster") },
          {
            path: "master.m3u8",
            contentType: "application/vnd.apple.mpegurl",
            bytes: bytesOf(
              `#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=${rung.videoBitrateKbps * 1000},RESOLUTION=640x360\n${rung.name}/playlist.m3u8\n`,
            ),
          },
        ];
        for (const file of files)
          yield* emit({ path: file.path, contentType: file.contentType, body: once(file.bytes) });
        const output: PackagedOutput = {
          files: files.map((f) => ({ path: f.path, contentType: f.contentType, size: f.bytes.byteLength })),
          master: "master.m3u8",
          poster: "poster.jpg",
          renditions: [rung],
        };
        return output;
      }),
  };
};

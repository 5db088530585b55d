import type { ProbedSource } from "@vod/core";
import { Effect, Either } from "effect";
import { describeRun, type MediaRejectedError, rejected, runTool } from "./process.js";

interface ProbeStream {
  readonly codec_type?: string;
  readonly codec_name?: string;
  readonly width?: number;
  readonly height?: number;
  readonly sample_aspect_ratio?: string;
  readonly avg_frame_rate?: string;
  readonly r_frame_rate?: string;
  readonly duration?: string;
  readonly bit_rate?: string;
  readonly disposition?: { readonly attached_pic?: number };
  readonly tags?: { readonly rotate?: string };
  readonly side_data_list?: ReadonlyArray<{ readonly rotation?: number }>;
}

interface ProbeFormat {
  readonly format_name?: string;
  readonly duration?: string;
  readonly bit_rate?: string;
  readonly size?: string;
}

export interface ProbeJson {
  readonly streams?: ReadonlyArray<ProbeStream>;
  readonly format?: ProbeFormat;
}

// Playlists and lists of other files: ffmpeg would follow their references, which an uploaded
// source must never make it do.
const refusedFormats = new Set(["hls", "dash", "concat"]);

const positive = (n: number): number | null => (Number.isFinite(n) && n > 0 ? n : null);

const rate = (fraction: string | undefined): number | null => {
  if (fraction === undefined) return null;
  const [num, den = "1"] = fraction.split("/");
  return positive(Number(num) / Number(den));
};

const sampleAspect = (sar: string | undefined): number => {
  const [num, den] = (sar ?? "").split(":").map(Number);
  return num !== undefined && den !== undefined && num > 0 && den > 0 ? num / den : 1;
};

const rotation = (stream: ProbeStream): number => {
  const fromSideData = stream.side_data_list?.find((d) => typeof d.rotation === "number")?.rotation;
  return fromSideData ?? Number(stream.tags?.rotate ?? 0);
};

const round3 = (n: number): number => Math.round(n * 1000) / 1000;

/** Cover art and thumbnails show up as video streams; they are not the video. */
const isVideo = (s: ProbeStream) => s.codec_type === "video" && s.disposition?.attached_pic !== 1;

/**
 * Reads ffprobe's JSON into the source facts. `decodable` is the set of codecs this ffmpeg can
 * decode; a video stream outside it is `unsupported_codec`.
 */
export const readProbe = (
  json: ProbeJson,
  decodable: ReadonlySet<string>,
): Either.Either<ProbedSource, MediaRejectedError> => {
  const streams = json.streams ?? [];
  const format = json.format ?? {};
  if (format.format_name?.split(",").some((name) => refusedFormats.has(name))) {
    return Either.left(rejected("invalid_media", `A ${format.format_name} playlist is not a media file`));
  }
  const video = streams.find(isVideo);
  if (video === undefined) return Either.left(rejected("invalid_media", "The file has no video stream"));
  const codec = video.codec_name;
  if (codec === undefined || codec === "" || codec === "none" || codec === "unknown") {
    return Either.left(rejected("unsupported_codec", "The video stream's codec is not recognised"));
  }
  if (!decodable.has(codec)) {
    return Either.left(rejected("unsupported_codec", `No decoder for the video codec ${codec}`));
  }
  const codedWidth = positive(video.width ?? 0);
  const codedHeight = positive(video.height ?? 0);
  if (codedWidth === null || codedHeight === null) {
    return Either.left(rejected("invalid_media", "The video stream has no picture size"));
  }
  // Display size: non-square pixels stretched to square, then a quarter turn swaps the sides.
  const displayWidth = Math.round(codedWidth * sampleAspect(video.sample_aspect_ratio));
  const quarterTurn = Math.abs(Math.round(rotation(video))) % 180 === 90;
  const durationS = positive(Number(format.duration)) ?? positive(Number(video.duration));
  const bitrate =
    positive(Number(format.bit_rate)) ??
    (durationS === null ? null : positive((Number(format.size) * 8) / durationS));
  const fps = rate(video.avg_frame_rate) ?? rate(video.r_frame_rate);
  return Either.right({
    source_width: quarterTurn ? codedHeight : displayWidth,
    source_height: quarterTurn ? displayWidth : codedHeight,
    source_fps: fps === null ? null : round3(fps),
    source_codec: codec,
    source_duration_ms: durationS === null ? null : Math.round(durationS * 1000),
    source_bitrate_kbps: bitrate === null ? null : Math.round(bitrate / 1000),
    has_video: true,
    has_audio: streams.some((s) => s.codec_type === "audio"),
  });
};

/** The codecs of `ffmpeg -codecs` whose decoding flag is set. */
export const readDecodableCodecs = (listing: string): ReadonlySet<string> => {
  const codecs = new Set<string>();
  for (const line of listing.split("\n")) {
    const match = /^ D[.E][VASDT.][.I][.L][.S]\s+(\S+)/.exec(line);
    if (match?.[1] !== undefined) codecs.add(match[1]);
  }
  return codecs;
};

export interface ProbeTools {
  readonly ffmpeg: string;
  readonly ffprobe: string;
  readonly timeoutMs: number;
  readonly decodable: Effect.Effect<ReadonlySet<string>, MediaRejectedError>;
}

/** `file:` keeps a path from being read as another protocol or as an option. */
export const fileUrl = (path: string): string => `file:${path}`;

const decoderMissing = /decoder[^\n]*not found|no decoder/i;

/**
 * ffprobe, and one decoded frame: a source is valid only when ffmpeg can actually decode its video,
 * which is what `invalid_media` means ("not a decodable video").
 */
export const probeFile = (tools: ProbeTools, path: string): Effect.Effect<ProbedSource, MediaRejectedError> =>
  Effect.gen(function* () {
    // Both tools read the file at once (they are on the critical path of every job); their
    // verdicts are still taken in order: unreadable, then unsupported, then undecodable.
    const [probed, decoded] = yield* Effect.all(
      [
        runTool(
          "ffprobe",
          tools.ffprobe,
          [
            "-hide_banner",
            "-v",
            "error",
            "-protocol_whitelist",
            "file",
            "-print_format",
            "json",
            "-show_format",
            "-show_streams",
            "-i",
            fileUrl(path),
          ],
          { captureStdout: true, timeoutMs: tools.timeoutMs },
        ),
        runTool(
          "ffmpeg",
          tools.ffmpeg,
          [
            "-hide_banner",
            "-nostdin",
            "-v",
            "error",
            "-protocol_whitelist",
            "file",
            "-i",
            fileUrl(path),
            "-map",
            "0:V:0",
            "-frames:v",
            "1",
            "-f",
            "null",
            "-",
          ],
          { timeoutMs: tools.timeoutMs },
        ),
      ],
      { concurrency: 2 },
    );
    if (probed.signal !== null) return yield* rejected("processing_error", describeRun("ffprobe", probed));
    if (probed.exitCode !== 0) {
      return yield* rejected(
        "invalid_media",
        `Not a readable media file (${describeRun("ffprobe", probed)})`,
      );
    }
    const json = yield* Effect.try({
      try: () => JSON.parse(probed.stdout) as ProbeJson,
      catch: (cause) => rejected("processing_error", "ffprobe printed something other than JSON", cause),
    });
    const source = yield* readProbe(json, yield* tools.decodable);
    if (decoded.signal !== null) return yield* rejected("processing_error", describeRun("ffmpeg", decoded));
    if (decoded.exitCode !== 0) {
      const message = `The video cannot be decoded (${describeRun("ffmpeg", decoded)})`;
      return yield* rejected(
        decoderMissing.test(decoded.stderr) ? "unsupported_codec" : "invalid_media",
        message,
      );
    }
    return source;
  });

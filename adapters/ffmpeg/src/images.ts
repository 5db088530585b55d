import { createWriteStream } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import type {
  Box,
  FitMode,
  ImageMaker,
  ImageSource,
  NotFound,
  OpenBytes,
  StillFormat,
  StorageError,
} from "@vod/core";
import { Effect } from "effect";
import { scratchSpace } from "./media-processor.js";
import { fileUrl } from "./probe.js";
import { describeRun, type MediaRejectedError, rejected, runTool } from "./process.js";
import { resolveTools, type ToolConfig } from "./tools.js";

export interface FfmpegImageConfig extends ToolConfig {
  /** Where each image job makes its scratch directory; default the OS temp directory. */
  readonly scratchDir?: string;
  /** Limit on one ffmpeg run; default 60 s. */
  readonly timeoutMs?: number;
  /** Segments fetched at once for one image; default 6. */
  readonly fetchConcurrency?: number;
}

type Failure = MediaRejectedError | NotFound | StorageError;

/** An input as ffmpeg opens it: the protocols it may use, and whether its timestamps are the asset's. */
interface Input {
  readonly protocols: string;
  readonly url: string;
  readonly absolute: boolean;
}

/** `-i` with the input's options before it; never a protocol the input does not need. */
const inputArgs = (input: Input, options: ReadonlyArray<string> = []) => [
  "-protocol_whitelist",
  input.protocols,
  ...options,
  "-i",
  input.url,
];

/** The seek to `atSeconds`: absolute for segments (their own timestamps), from the start for a whole file. */
const seek = (input: Input, atSeconds: number) => [
  ...(input.absolute ? ["-seek_timestamp", "1"] : []),
  "-ss",
  atSeconds.toFixed(3),
];

/** The encoder and muxer of each still format: quality that a page shows without visible loss. */
const STILL: Record<StillFormat, ReadonlyArray<string>> = {
  jpg: ["-c:v", "mjpeg", "-q:v", "3", "-pix_fmt", "yuvj420p", "-f", "image2"],
  png: ["-c:v", "png", "-f", "image2"],
  webp: ["-c:v", "libwebp", "-quality", "80", "-f", "image2"],
};

/** The filter that puts the picture into `box` as `fit` says (`preserve`: the box has its shape). */
export const fitFilter = ({ width, height }: Box, fit: FitMode): string => {
  switch (fit) {
    case "preserve":
      return `scale=${width}:${height},setsar=1`;
    case "crop":
      return `scale=${width}:${height}:force_original_aspect_ratio=increase,crop=${width}:${height},setsar=1`;
    case "pad":
      return `scale=${width}:${height}:force_original_aspect_ratio=decrease,pad=${width}:${height}:(ow-iw)/2:(oh-ih)/2:black,setsar=1`;
  }
};

const BASE_ARGS = ["-hide_banner", "-nostdin", "-v", "error", "-y"];

/** Writes one stored object into `path`. */
const fetchTo = (open: OpenBytes, path: string): Effect.Effect<void, Failure> =>
  Effect.flatMap(open(), (body) =>
    Effect.tryPromise({
      try: (signal) => pipeline(body, createWriteStream(path), { signal }),
      catch: (cause) => rejected("processing_error", "Could not copy stored media to scratch space", cause),
    }),
  );

/**
 * The ImageMaker port on ffmpeg. A stretch of a rendition is fetched segment by segment into
 * scratch space and read by ffmpeg's `concat:` protocol as the one fragmented MP4 it is (the
 * segments' own timestamps are the asset's, so seeks are to absolute times: `-seek_timestamp`).
 */
export const ffmpegImageMaker = (config: FfmpegImageConfig = {}): ImageMaker => {
  const tools = resolveTools(config);
  const scratch = scratchSpace(config.scratchDir ?? tmpdir());
  const timeoutMs = config.timeoutMs ?? 60_000;
  const fetchConcurrency = config.fetchConcurrency ?? 6;

  /** ffmpeg's input arguments for `source`, fetched into `dir` where it must be. */
  const input = (source: ImageSource, dir: string): Effect.Effect<Input, Failure> => {
    switch (source.kind) {
      case "path":
        return Effect.succeed({ protocols: "file", url: fileUrl(source.path), absolute: false });
      case "url":
        return Effect.succeed({ protocols: "http,https,tcp,tls", url: source.url, absolute: false });
      case "bytes": {
        const path = join(dir, "source");
        return Effect.as(fetchTo(source.open, path), {
          protocols: "file",
          url: fileUrl(path),
          absolute: false,
        });
      }
      case "segments": {
        // Local files are read in place; the others fetched into scratch space first.
        const files = [source.init, ...source.segments].map((media, i) =>
          "path" in media
            ? { path: media.path, open: undefined }
            : { path: join(dir, `${i}.mp4`), open: media.open },
        );
        return Effect.as(
          Effect.forEach(files, (f) => (f.open ? fetchTo(f.open, f.path) : Effect.void), {
            concurrency: fetchConcurrency,
            discard: true,
          }),
          { protocols: "file,concat", url: `concat:${files.map((f) => f.path).join("|")}`, absolute: true },
        );
      }
    }
  };

  /** Runs ffmpeg; the file it wrote, or undefined when it wrote none (a seek past the last frame). */
  const ffmpeg = (
    args: ReadonlyArray<string>,
    out: string,
  ): Effect.Effect<Uint8Array | undefined, MediaRejectedError> =>
    Effect.flatMap(runTool("ffmpeg", tools.ffmpeg, [...BASE_ARGS, ...args, out], { timeoutMs }), (run) =>
      run.exitCode !== 0
        ? Effect.fail(rejected("processing_error", describeRun("ffmpeg", run)))
        : Effect.promise(() =>
            stat(out).then(
              (s) => (s.size > 0 ? readFile(out).then((b) => new Uint8Array(b)) : undefined),
              () => undefined,
            ),
          ),
    );

  const made = (bytes: Uint8Array | undefined, what: string) =>
    bytes === undefined
      ? Effect.fail(rejected("invalid_media", `ffmpeg made no ${what}`))
      : Effect.succeed(bytes);

  return {
    frame: (source, { atSeconds, box, fit, format }) =>
      scratch((dir) =>
        Effect.gen(function* () {
          const from = yield* input(source, dir);
          const out = join(dir, `frame.${format}`);
          const encode = ["-map", "0:V:0", "-an", "-vf", fitFilter(box, fit), ...STILL[format]];
          const first = yield* ffmpeg(
            [...inputArgs(from, seek(from, atSeconds)), ...encode, "-frames:v", "1"],
            out,
          );
          if (first !== undefined) return first;
          // A time between the last frame and the end: the last frame, each written over the one before.
          const last = yield* ffmpeg([...inputArgs(from), ...encode, "-update", "1"], out);
          return yield* made(last, "frame");
        }),
      ),

    animated: (source, { startSeconds, endSeconds, box, fps, format }) =>
      scratch((dir) =>
        Effect.gen(function* () {
          const from = yield* input(source, dir);
          const out = join(dir, `animated.${format}`);
          const scale = `fps=${fps},scale=${box.width}:${box.height}:flags=lanczos,setsar=1`;
          const encode =
            format === "gif"
              ? [
                  "-vf",
                  `${scale},split[a][b];[a]palettegen=stats_mode=diff[p];[b][p]paletteuse`,
                  "-loop",
                  "0",
                  "-f",
                  "gif",
                ]
              : [
                  "-vf",
                  scale,
                  "-c:v",
                  "libwebp_anim",
                  "-quality",
                  "70",
                  "-pix_fmt",
                  "yuv420p",
                  "-loop",
                  "0",
                  "-f",
                  "webp",
                ];
          // Counted in frames, not cut by time: a span shorter than the source's own frame
          // interval still holds one. The input is read a second past the span, no further (the
          // GIF palette is made when the input ends).
          const span = endSeconds - startSeconds;
          const frames = Math.max(1, Math.round(span * fps));
          const clip = (at: number) =>
            ffmpeg(
              [
                ...inputArgs(from, [...seek(from, at), "-t", (span + 1).toFixed(3)]),
                ...["-map", "0:V:0", "-an", "-frames:v", String(frames), ...encode],
              ],
              out,
            );
          // A span after the last frame (the container's duration runs past it): the same length
          // a second earlier, rather than nothing.
          const bytes = (yield* clip(startSeconds)) ?? (yield* clip(Math.max(0, startSeconds - 1)));
          return yield* made(bytes, "animation");
        }),
      ),

    sprite: (source, { count, intervalSeconds, tile, columns, format }) =>
      scratch((dir) =>
        Effect.gen(function* () {
          const from = yield* input(source, dir);
          const out = join(dir, `storyboard.${format}`);
          const rows = Math.ceil(count / columns);
          // Keyframes only: a tile is a seek-bar preview, and decoding nothing else makes a
          // storyboard of a long video a small fraction of its duration.
          const bytes = yield* ffmpeg(
            [
              ...inputArgs(from, ["-skip_frame", "nokey"]),
              ...["-map", "0:V:0", "-an"],
              "-vf",
              `fps=1/${intervalSeconds},select='lt(n\\,${count})',scale=${tile.width}:${tile.height},setsar=1,tile=${columns}x${rows}`,
              ...["-frames:v", "1", ...STILL[format]],
            ],
            out,
          );
          return yield* made(bytes, "storyboard");
        }),
      ),
  };
};

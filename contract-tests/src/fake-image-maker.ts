import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { Box, ImageMaker, ImageSource, NotFound, StorageError } from "@vod/core";
import { Effect } from "effect";

const run = promisify(execFile);

/** Reads every byte of what the maker was given, as a real one would: the store's path is exercised. */
const readSource = (source: ImageSource): Effect.Effect<number, NotFound | StorageError> => {
  const drain = (open: () => Effect.Effect<AsyncIterable<Uint8Array>, NotFound | StorageError>) =>
    Effect.flatMap(open(), (body) =>
      Effect.promise(async () => {
        let size = 0;
        for await (const chunk of body) size += chunk.byteLength;
        return size;
      }),
    );
  switch (source.kind) {
    case "segments":
      return Effect.map(
        Effect.forEach([source.init, ...source.segments], (media) =>
          "path" in media
            ? Effect.promise(() => readFile(media.path).then((b) => b.byteLength))
            : drain(media.open),
        ),
        (sizes) => sizes.reduce((a, b) => a + b, 0),
      );
    case "bytes":
      return drain(source.open);
    case "path":
      return Effect.promise(() => readFile(source.path).then((b) => b.byteLength));
    case "url":
      return Effect.promise(() => fetch(source.url).then(async (r) => (await r.arrayBuffer()).byteLength));
  }
};

/**
 * A flat grey picture of the asked size and format, made by ffmpeg from its own test source (the
 * fake media processor's segments hold no video to decode).
 */
const grey = (
  box: Box,
  output: ReadonlyArray<string>,
  ext: string,
  frames?: { fps: number; seconds: number },
) =>
  Effect.promise(async () => {
    const dir = await mkdtemp(join(tmpdir(), "vod-fake-image-"));
    try {
      const out = join(dir, `image.${ext}`);
      const input = `color=c=gray:s=${box.width}x${box.height}${frames ? `:r=${frames.fps}:d=${frames.seconds}` : ""}`;
      await run("ffmpeg", [
        ...["-v", "error", "-y", "-f", "lavfi", "-i", input],
        ...(frames ? [] : ["-frames:v", "1"]),
        ...output,
        out,
      ]);
      return new Uint8Array(await readFile(out));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

const STILL = {
  jpg: ["-c:v", "mjpeg", "-pix_fmt", "yuvj420p", "-f", "image2"],
  png: ["-c:v", "png", "-f", "image2"],
  webp: ["-c:v", "libwebp", "-f", "image2"],
} as const;

/**
 * An image maker for hosts whose renditions come from `fakeMediaProcessor`: it reads whatever
 * it is given (segments, the origin, a signed URL) and answers a grey image of exactly the size,
 * length and format asked. `made` counts its calls, for suites that check what was cached.
 */
export const fakeImageMaker = (): ImageMaker & { readonly made: () => number } => {
  let made = 0;
  const count = <A, E>(self: Effect.Effect<A, E>) => Effect.tap(self, () => Effect.sync(() => made++));
  return {
    made: () => made,
    frame: (source, { box, format }) =>
      count(Effect.zipRight(readSource(source), grey(box, STILL[format], format))),
    animated: (source, { startSeconds, endSeconds, box, fps, format }) =>
      count(
        Effect.zipRight(
          readSource(source),
          grey(
            box,
            format === "gif"
              ? ["-f", "gif", "-loop", "0"]
              : ["-c:v", "libwebp_anim", "-pix_fmt", "yuv420p", "-loop", "0", "-f", "webp"],
            format,
            { fps, seconds: endSeconds - startSeconds },
          ),
        ),
      ),
    sprite: (source, { count: tiles, tile, columns, format }) =>
      count(
        Effect.zipRight(
          readSource(source),
          grey(
            { width: tile.width * columns, height: tile.height * Math.ceil(tiles / columns) },
            STILL[format],
            format,
          ),
        ),
      ),
  };
};

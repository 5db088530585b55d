import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ffmpegImageMaker } from "@vod/adapter-ffmpeg";
import type { ImageSource, OpenBytes } from "@vod/core";
import { Effect } from "effect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeSources, packageInto, run, system } from "./fixtures.js";

const open =
  (path: string): OpenBytes =>
  () =>
    Effect.succeed(createReadStream(path));

/** The decoded picture's checksum: equal checksums are the same frame, pixel for pixel. */
const pictureMd5 = async (bytes: Uint8Array, dir: string, name: string) => {
  const file = join(dir, name);
  await writeFile(file, bytes);
  const { stdout } = await run(system.ffmpeg, ["-v", "error", "-i", file, "-f", "md5", "-"], {
    encoding: "utf8",
  });
  return stdout.trim();
};

const dimensions = async (bytes: Uint8Array, dir: string, name: string) => {
  const file = join(dir, name);
  await writeFile(file, bytes);
  const { stdout } = await run(
    system.ffprobe,
    [
      "-v",
      "error",
      "-select_streams",
      "v:0",
      "-show_entries",
      "stream=codec_name,width,height",
      "-of",
      "json",
      file,
    ],
    { encoding: "utf8" },
  );
  return JSON.parse(stdout).streams[0] as { codec_name: string; width: number; height: number };
};

describe("ffmpegImageMaker on packaged renditions", () => {
  let dir: string;
  let rendition: { init: string; segments: string[]; joined: string };
  const maker = ffmpegImageMaker();

  beforeAll(async () => {
    const sources = await makeSources();
    dir = sources.dir;
    const source = join(dir, "long.mp4");
    await run(system.ffmpeg, [
      ...["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25", "-t", "14"],
      ...["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", source],
    ]);
    const { outDir } = await packageInto(dir, { path: source }, {}, undefined, {
      ladder: [{ name: "360p", height: 360, videoBitrateKbps: 800, audioBitrateKbps: 96 }],
    });
    const playlist = await readFile(join(outDir, "360p/playlist.m3u8"), "utf8");
    const segments = playlist
      .split("\n")
      .filter((l) => l.endsWith(".m4s"))
      .map((l) => join(outDir, "360p", l));
    expect(segments).toHaveLength(3);
    const init = join(outDir, "360p/init.mp4");
    const joined = join(dir, "rendition.mp4");
    await writeFile(joined, Buffer.concat(await Promise.all([init, ...segments].map((f) => readFile(f)))));
    rendition = { init, segments, joined };
  }, 120_000);
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const box = { width: 640, height: 360 };
  const frameOf = (source: ImageSource, atSeconds: number, format: "png" | "jpg" | "webp" = "png") =>
    Effect.runPromise(maker.frame(source, { atSeconds, box, fit: "preserve", format }));

  it("finds the very frame at a time in the one segment holding it, as in the whole rendition", async () => {
    // The init segment fetched, the media segment read in place: both kinds of stored media.
    const third: ImageSource = {
      kind: "segments",
      init: { open: open(rendition.init) },
      segments: [{ path: rendition.segments[2] as string }],
    };
    const fromSegment = await pictureMd5(await frameOf(third, 12.5), dir, "seg-12.5.png");
    const reference = join(dir, "reference-12.5.png");
    await run(system.ffmpeg, [
      "-v",
      "error",
      "-y",
      "-ss",
      "12.5",
      "-i",
      rendition.joined,
      "-frames:v",
      "1",
      reference,
    ]);
    expect(fromSegment).toBe(await pictureMd5(await readFile(reference), dir, "reference-copy.png"));
    // The whole file, read in place or copied: the same frame.
    expect(
      await pictureMd5(await frameOf({ kind: "path", path: rendition.joined }, 12.5), dir, "path.png"),
    ).toBe(fromSegment);
    expect(
      await pictureMd5(
        await frameOf({ kind: "bytes", open: open(rendition.joined) }, 12.5),
        dir,
        "bytes.png",
      ),
    ).toBe(fromSegment);
    // One frame (1/25 s) later is another picture.
    expect(await pictureMd5(await frameOf(third, 12.54), dir, "seg-12.54.png")).not.toBe(fromSegment);
  }, 60_000);

  it("answers the last frame for a time between it and the end, rather than nothing", async () => {
    const last: ImageSource = {
      kind: "segments",
      init: { open: open(rendition.init) },
      segments: [{ open: open(rendition.segments[2] as string) }],
    };
    const bytes = await frameOf(last, 13.999, "jpg");
    expect(await dimensions(bytes, dir, "last.jpg")).toEqual({
      codec_name: "mjpeg",
      width: 640,
      height: 360,
    });
    const clip = await Effect.runPromise(
      maker.animated(last, {
        startSeconds: 13.97,
        endSeconds: 14,
        box: { width: 320, height: 180 },
        fps: 30,
        format: "gif",
      }),
    );
    expect(await dimensions(clip, dir, "last.gif")).toEqual({ codec_name: "gif", width: 320, height: 180 });
  }, 60_000);

  it("fits a frame into a box: crop fills it, pad bands it", async () => {
    const whole: ImageSource = { kind: "path", path: rendition.joined };
    for (const fit of ["crop", "pad"] as const) {
      const bytes = await Effect.runPromise(
        maker.frame(whole, { atSeconds: 3, box: { width: 120, height: 120 }, fit, format: "webp" }),
      );
      expect(await dimensions(bytes, dir, `${fit}.webp`)).toEqual({
        codec_name: "webp",
        width: 120,
        height: 120,
      });
    }
  }, 60_000);

  it("lays a sprite out as asked: tiles across, rows down, from keyframes of every segment", async () => {
    const all: ImageSource = {
      kind: "segments",
      init: { path: rendition.init },
      segments: rendition.segments.map((path) => ({ path })),
    };
    const sprite = await Effect.runPromise(
      maker.sprite(all, {
        count: 7,
        intervalSeconds: 2,
        tile: { width: 64, height: 36 },
        columns: 5,
        format: "jpg",
      }),
    );
    expect(await dimensions(sprite, dir, "sprite.jpg")).toEqual({
      codec_name: "mjpeg",
      width: 320,
      height: 72,
    });
    // The tiles at 0 s, 2 s and 12 s are three different pictures.
    const tiles = await Promise.all(
      [0, 1, 6].map(async (i) => {
        const x = (i % 5) * 64;
        const y = Math.floor(i / 5) * 36;
        const out = join(dir, `tile-${i}.png`);
        await run(system.ffmpeg, [
          "-v",
          "error",
          "-y",
          "-i",
          join(dir, "sprite.jpg"),
          "-vf",
          `crop=64:36:${x}:${y}`,
          out,
        ]);
        return createHash("md5")
          .update(await readFile(out))
          .digest("hex");
      }),
    );
    expect(new Set(tiles).size).toBe(3);
  }, 60_000);
});

import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { defaultLadder, ffmpegMediaProcessor } from "@vod/adapter-ffmpeg";
import type { OutputFile, ProbedSource, SourceRange } from "@vod/core";
import { Effect } from "effect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { run, system } from "./fixtures.js";

let root: string;
let source: string;
const FPS = 25;
const SECONDS = 15;
const ranges: ReadonlyArray<SourceRange> = [
  { startMs: 0, endMs: 6000 },
  { startMs: 6000, endMs: 12000 },
  { startMs: 12000, endMs: null },
];
const ladder = defaultLadder.filter((r) => r.name === "240p");

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "vod-ffmpeg-chunks-"));
  source = join(root, "source.mp4");
  await run(system.ffmpeg, [
    ...["-hide_banner", "-v", "error", "-y"],
    ...["-f", "lavfi", "-i", `testsrc=size=320x240:rate=${FPS}`, "-f", "lavfi", "-i", "sine=frequency=440"],
    ...["-t", String(SECONDS), "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"],
    ...["-c:a", "aac", source],
  ]);
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Writes each emitted file under `dir`. */
const writeInto = (dir: string) => (file: OutputFile) =>
  Effect.promise(async () => {
    const bytes: Uint8Array[] = [];
    for await (const b of file.body) bytes.push(b);
    await mkdir(dirname(join(dir, file.path)), { recursive: true });
    await writeFile(join(dir, file.path), Buffer.concat(bytes));
  });

/** Each video frame's presentation time and whether it is a keyframe. */
const frames = async (path: string) => {
  const { stdout } = await run(system.ffprobe, [
    ...["-v", "error", "-select_streams", "v:0", "-show_entries", "frame=pts_time,key_frame"],
    ...["-of", "json", path],
  ]);
  return (JSON.parse(stdout) as { frames: Array<{ pts_time: string; key_frame: number }> }).frames.map(
    (f) => ({ t: Number(f.pts_time), key: f.key_frame === 1 }),
  );
};

describe("chunked encoding", () => {
  const processor = () => ffmpegMediaProcessor({ x264Preset: "ultrafast" });
  let probed: ProbedSource;
  const chunkDir = () => join(root, "chunks");

  it("encodes each range into a video-only MP4 per rendition, keyframes every 2 s from its start", async () => {
    const media = processor();
    probed = await Effect.runPromise(media.probe({ path: source }));
    for (const [index, range] of ranges.entries())
      await Effect.runPromise(
        media.encodeChunk!({ path: source }, probed, ladder, range, (file) =>
          writeInto(join(chunkDir(), String(index)))(file),
        ),
      );
    const counts: number[] = [];
    for (const index of ranges.keys()) {
      const path = join(chunkDir(), String(index), "240p.mp4");
      const { stdout } = await run(system.ffprobe, [
        ...["-v", "error", "-show_entries", "stream=codec_type,width,height", "-of", "json", path],
      ]);
      expect(JSON.parse(stdout).streams).toEqual([{ codec_type: "video", width: 320, height: 240 }]);
      const list = await frames(path);
      counts.push(list.length);
      expect(list.filter((f) => f.key).map((f) => Math.round(f.t - list[0]!.t))).toEqual(
        index < 2 ? [0, 2, 4] : [0, 2],
      );
    }
    // Every frame of the source in exactly one chunk.
    expect(counts).toEqual([6 * FPS, 6 * FPS, 3 * FPS]);
  }, 60_000);

  it("joins the chunks and packages them with the source's audio as package would", async () => {
    const media = processor();
    const out = join(root, "out");
    const output = await Effect.runPromise(
      media.packageChunks!(
        { path: source },
        probed,
        ladder,
        {
          count: ranges.length,
          chunk: (name, index) => ({ path: join(chunkDir(), String(index), `${name}.mp4`) }),
        },
        writeInto(out),
      ),
    );
    expect(output.renditions.map((r) => r.name)).toEqual(["240p"]);
    const master = await readFile(join(out, "master.m3u8"), "utf8");
    expect(master).toContain("240p/playlist.m3u8");
    expect(master).toContain("TYPE=AUDIO");
    const playlist = await readFile(join(out, "240p", "playlist.m3u8"), "utf8");
    // Segments of 6 s, the chunks' own boundaries, and the 3 s left.
    expect([...playlist.matchAll(/#EXTINF:([\d.]+)/g)].map((m) => Number(m[1]))).toEqual([6, 6, 3]);
    const list = await frames(join(out, "240p", "playlist.m3u8"));
    expect(list).toHaveLength(SECONDS * FPS);
    // Presentation times rise by one frame all the way through the joins.
    const steps = list.slice(1).map((f, i) => Math.round((f.t - list[i]!.t) * FPS * 1000) / 1000);
    expect(new Set(steps)).toEqual(new Set([1]));
    const { stdout } = await run(system.ffprobe, [
      ...["-v", "error", "-show_entries", "stream=codec_type", "-of", "json"],
      join(out, "master.m3u8"),
    ]);
    expect(
      (JSON.parse(stdout) as { streams: Array<{ codec_type: string }> }).streams
        .map((s) => s.codec_type)
        .sort(),
    ).toEqual(["audio", "video"]);
  }, 60_000);
});

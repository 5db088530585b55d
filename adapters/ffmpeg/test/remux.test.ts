import { createReadStream } from "node:fs";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ffmpegMediaProcessor } from "@vod/adapter-ffmpeg";
import type { OutputFile, PackagedTrack } from "@vod/core";
import { Effect, Either } from "effect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeSources, packageInto, run, type Sources, system } from "./fixtures.js";

let sources: Sources;
let root: string;
let packaged: string;

beforeAll(async () => {
  sources = await makeSources();
  root = await mkdtemp(join(tmpdir(), "vod-ffmpeg-remux-"));
  packaged = (await packageInto(root, { path: sources.withAudio })).outDir;
}, 120_000);

afterAll(async () => {
  await rm(sources.dir, { recursive: true, force: true });
  await rm(root, { recursive: true, force: true });
});

/** A packaged track as its media playlist lists it: local files, or (`streamed`) bytes to fetch. */
const trackOf = async (dir: string, streamed = false): Promise<PackagedTrack> => {
  const playlist = await readFile(join(packaged, dir, "playlist.m3u8"), "utf8");
  const init = /#EXT-X-MAP:URI="([^"]+)"/.exec(playlist)?.[1] as string;
  const segments = playlist.split("\n").filter((line) => line.trim() !== "" && !line.startsWith("#"));
  const input = (name: string) => {
    const path = join(packaged, dir, name);
    return streamed ? { open: () => Effect.succeed(createReadStream(path)) } : { path };
  };
  return { init: input(init), segments: segments.map(input) };
};

/** Runs `remux` with a fresh scratch directory, keeping what it emits in memory. */
const remux = async (tracks: { video?: PackagedTrack; audio?: PackagedTrack }, path: string) => {
  const scratchDir = await mkdtemp(join(root, "scratch-"));
  const processor = ffmpegMediaProcessor({ scratchDir });
  const emitted: Array<{ path: string; contentType: string; bytes: Buffer }> = [];
  const emit = (file: OutputFile) =>
    Effect.promise(async () => {
      const chunks: Uint8Array[] = [];
      for await (const chunk of file.body) chunks.push(chunk);
      emitted.push({ path: file.path, contentType: file.contentType, bytes: Buffer.concat(chunks) });
    });
  const contentType = path.endsWith(".m4a") ? "audio/mp4" : "video/mp4";
  const make = processor.remux;
  if (make === undefined) throw new Error("the ffmpeg processor has no remux");
  const result = await Effect.runPromise(Effect.either(make(tracks, { path, contentType }, emit)));
  return { result, emitted, scratchDir };
};

const probe = async (bytes: Buffer, name: string) => {
  const path = join(root, name);
  await writeFile(path, bytes);
  const { stdout } = await run(system.ffprobe, [
    ...["-v", "error", "-show_entries", "stream=codec_type,height:format=duration,format_name"],
    ...["-of", "json", path],
  ]);
  const parsed = JSON.parse(stdout) as {
    streams: Array<{ codec_type: string; height?: number }>;
    format: { duration: string; format_name: string };
  };
  return {
    streams: parsed.streams,
    duration: Number(parsed.format.duration),
    format: parsed.format.format_name,
  };
};

describe("remux", () => {
  it("makes one MP4 of a rendition's video and the audio, index first, with the source's duration", async () => {
    const { result, emitted, scratchDir } = await remux(
      { video: await trackOf("240p", true), audio: await trackOf("audio") },
      "low.mp4",
    );
    expect(Either.isRight(result)).toBe(true);
    expect(emitted.map((f) => [f.path, f.contentType])).toEqual([["low.mp4", "video/mp4"]]);
    const file = emitted[0]?.bytes as Buffer;
    expect(Either.isRight(result) && result.right.size).toBe(file.length);
    const probed = await probe(file, "low.mp4");
    expect(probed.streams.map((s) => [s.codec_type, s.height])).toEqual([
      ["video", 240],
      ["audio", undefined],
    ]);
    expect(Math.abs(probed.duration - 4)).toBeLessThanOrEqual(0.1);
    expect(file.indexOf("moov")).toBeLessThan(file.indexOf("mdat"));
    expect(await readdir(scratchDir)).toEqual([]);
  }, 60_000);

  it("makes an M4A of the audio alone", async () => {
    const { result, emitted } = await remux({ audio: await trackOf("audio", true) }, "audio.m4a");
    expect(Either.isRight(result)).toBe(true);
    const probed = await probe(emitted[0]?.bytes as Buffer, "audio.m4a");
    expect(probed.streams.map((s) => s.codec_type)).toEqual(["audio"]);
    expect(Math.abs(probed.duration - 4)).toBeLessThanOrEqual(0.1);
  }, 60_000);

  it("rejects segments that are no media (processing_error), and no track at all, leaving no scratch file", async () => {
    const garbage = join(root, "garbage.m4s");
    await writeFile(garbage, Buffer.alloc(4096, 7));
    const broken = await remux(
      { video: { init: { path: garbage }, segments: [{ path: garbage }] } },
      "high.mp4",
    );
    expect(Either.isLeft(broken.result) && broken.result.left).toMatchObject({
      _tag: "MediaRejected",
      code: "processing_error",
    });
    expect(broken.emitted).toEqual([]);
    expect(await readdir(broken.scratchDir)).toEqual([]);
    const none = await remux({}, "high.mp4");
    expect(Either.isLeft(none.result) && none.result.left).toMatchObject({ code: "processing_error" });
  }, 60_000);
});

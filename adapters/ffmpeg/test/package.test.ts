import { spawn } from "node:child_process";
import { once } from "node:events";
import { createReadStream } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaultLadder, type FfmpegConfig, ffmpegMediaProcessor, resolveTools } from "@vod/adapter-ffmpeg";
import { type MediaInput, StorageError } from "@vod/core";
import { Effect, Either, Fiber } from "effect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeSources, packageInto as packageIn, run, type Sources, system } from "./fixtures.js";

let sources: Sources;
let root: string;

beforeAll(async () => {
  sources = await makeSources();
  root = await mkdtemp(join(tmpdir(), "vod-ffmpeg-package-"));
});

afterAll(async () => {
  await rm(sources.dir, { recursive: true, force: true });
  await rm(root, { recursive: true, force: true });
});

const packageInto = (input: MediaInput, config?: FfmpegConfig) => packageIn(root, input, config);

const ffprobeJson = async (path: string, entries: string) =>
  JSON.parse(
    (await run(system.ffprobe, ["-v", "error", "-show_entries", entries, "-of", "json", path])).stdout,
  );

const text = (dir: string, path: string) => readFile(join(dir, path), "utf8");

describe("package", () => {
  it("makes an fMP4 HLS ladder at and below 360p and a poster, master last", async () => {
    // The default preset: x264's faster ones drop the High-profile tools the master's CODECS reveal.
    const { output, emitted, outDir, scratchDir } = await packageInto(
      { open: () => Effect.succeed(createReadStream(sources.withAudio)) },
      { x264Preset: "veryfast" },
    );

    expect(output.renditions.map((r) => r.name)).toEqual(["360p", "240p"]);
    expect(output).toMatchObject({ master: "master.m3u8", poster: "poster.jpg" });
    const paths = emitted.map((f) => f.path);
    expect(new Set(paths).size).toBe(paths.length);
    expect(paths.at(-1)).toBe("master.m3u8");
    expect([...paths].sort()).toEqual(output.files.map((f) => f.path).sort());
    expect(paths.some((p) => /^(1080p|720p|480p)\//.test(p))).toBe(false);
    for (const file of output.files) expect((await stat(join(outDir, file.path))).size).toBe(file.size);

    const types = Object.fromEntries(emitted.map((f) => [f.path, f.contentType]));
    expect(types).toMatchObject({
      "master.m3u8": "application/vnd.apple.mpegurl",
      "360p/playlist.m3u8": "application/vnd.apple.mpegurl",
      "360p/init.mp4": "video/mp4",
      "360p/1.m4s": "video/mp4",
      "audio/init.mp4": "audio/mp4",
      "audio/1.m4s": "audio/mp4",
      "poster.jpg": "image/jpeg",
    });

    const master = await text(outDir, "master.m3u8");
    const variants = master.split("\n").filter((line) => line.startsWith("#EXT-X-STREAM-INF:"));
    expect(variants).toHaveLength(2);
    for (const [i, resolution] of ["640x360", "426x240"].entries()) {
      expect(variants[i]).toMatch(/BANDWIDTH=\d+/);
      expect(variants[i]).toContain(`RESOLUTION=${resolution}`);
      expect(variants[i]).toMatch(/CODECS="avc1\.64[0-9a-f]{4},mp4a\.40\.2"/);
    }
    expect(master).toContain("360p/playlist.m3u8");
    expect(master).toContain("240p/playlist.m3u8");
    expect(master).toMatch(/#EXT-X-MEDIA:TYPE=AUDIO,URI="audio\/playlist\.m3u8".*DEFAULT=YES/);

    for (const dir of ["360p", "240p", "audio"]) {
      const playlist = await text(outDir, `${dir}/playlist.m3u8`);
      expect(playlist).toContain('#EXT-X-MAP:URI="init.mp4"');
      expect(playlist).toContain("#EXT-X-ENDLIST");
      const durations = [...playlist.matchAll(/#EXTINF:([\d.]+),/g)].map((m) => Number(m[1]));
      expect(durations.length).toBeGreaterThan(0);
      for (const d of durations) expect(d).toBeLessThan(6.5);
      expect(durations.reduce((a, b) => a + b, 0)).toBeCloseTo(4, 0);
      for (const segment of playlist.split("\n").filter((line) => line.endsWith(".m4s"))) {
        expect(paths).toContain(`${dir}/${segment}`);
      }
      expect(paths).toContain(`${dir}/init.mp4`);
    }

    // ffprobe, as a client independent of the packager, plays the master's streams.
    const played = await ffprobeJson(join(outDir, "master.m3u8"), "stream=codec_name,width,height");
    const codecs = played.streams.map((s: { codec_name: string; width?: number; height?: number }) =>
      s.width === undefined ? s.codec_name : `${s.codec_name} ${s.width}x${s.height}`,
    );
    expect(codecs).toEqual(expect.arrayContaining(["h264 640x360", "h264 426x240", "aac"]));

    const poster = await readFile(join(outDir, "poster.jpg"));
    expect([...poster.subarray(0, 3)]).toEqual([0xff, 0xd8, 0xff]);
    const posterStreams = await ffprobeJson(join(outDir, "poster.jpg"), "stream=codec_name,width,height");
    expect(posterStreams.streams[0]).toMatchObject({ codec_name: "mjpeg", width: 640, height: 360 });

    expect(await readdir(scratchDir)).toEqual([]);
  });

  it("adds renditions made by a later run to the master and the DASH manifest, without the audio and poster again", async () => {
    const input = { path: sources.withAudio };
    const [r360, r240] = [
      defaultLadder.find((r) => r.name === "360p")!,
      defaultLadder.find((r) => r.name === "240p")!,
    ];
    const first = await packageIn(root, input, {}, undefined, { ladder: [r360] });
    const firstMaster = await text(first.outDir, "master.m3u8");
    expect(firstMaster.match(/#EXT-X-STREAM-INF:/g)).toHaveLength(1);
    expect(first.emitted.map((f) => f.path)).toEqual(
      expect.arrayContaining(["poster.jpg", "audio/init.mp4"]),
    );

    const later = await packageIn(
      root,
      input,
      {},
      { shared: false, master: firstMaster, manifest: await text(first.outDir, "manifest.mpd") },
      {
        ladder: [r240],
        outDir: first.outDir,
      },
    );
    const paths = later.emitted.map((f) => f.path);
    expect(paths.at(-1)).toBe("master.m3u8");
    expect(later.output.poster).toBeUndefined();
    expect(paths.filter((p) => p.startsWith("audio/") || p === "poster.jpg")).toEqual([]);
    expect(paths.filter((p) => !p.startsWith("240p/") && p !== "master.m3u8")).toEqual(["manifest.mpd"]);
    expect(paths.at(-2)).toBe("manifest.mpd");

    const master = await text(first.outDir, "master.m3u8");
    const variants = master.split("\n").filter((line) => line.startsWith("#EXT-X-STREAM-INF:"));
    expect(variants).toHaveLength(2);
    expect(variants[0]).toContain("RESOLUTION=640x360");
    expect(variants[1]).toContain("RESOLUTION=426x240");
    for (const v of variants) expect(v).toMatch(/CODECS="avc1\.[0-9a-f]{6},mp4a\.40\.2".*AUDIO="audio"/);
    expect(master.match(/#EXT-X-MEDIA:TYPE=AUDIO,URI="audio\/playlist\.m3u8"/g)).toHaveLength(1);
    const played = await ffprobeJson(join(first.outDir, "master.m3u8"), "stream=codec_name,width,height");
    const codecs = played.streams.map((s: { codec_name: string; width?: number; height?: number }) =>
      s.width === undefined ? s.codec_name : `${s.codec_name} ${s.width}x${s.height}`,
    );
    expect(codecs).toEqual(expect.arrayContaining(["h264 640x360", "h264 426x240", "aac"]));

    // The DASH manifest lists both runs' renditions (ids by name, highest first) and the audio once.
    const mpd = await text(first.outDir, "manifest.mpd");
    expect([...mpd.matchAll(/<Representation id="([^"]+)"/g)].map((m) => m[1])).toEqual([
      "360p",
      "240p",
      "audio",
    ]);
    expect(mpd).toContain('maxWidth="640" maxHeight="360"');
    const dash = await ffprobeJson(join(first.outDir, "manifest.mpd"), "stream=codec_name,width,height");
    const dashCodecs = dash.streams.map((s: { codec_name: string; width?: number; height?: number }) =>
      s.width === undefined ? s.codec_name : `${s.codec_name} ${s.width}x${s.height}`,
    );
    expect(dashCodecs).toEqual(expect.arrayContaining(["h264 640x360", "h264 426x240", "aac"]));
  });

  it("gives a source shorter than every rung one rendition at its own height, without audio", async () => {
    const { output, emitted, outDir, scratchDir } = await packageInto({ path: sources.small });
    expect(output.renditions.map((r) => [r.name, r.height])).toEqual([["180p", 180]]);
    const master = await text(outDir, "master.m3u8");
    expect(master).toContain("RESOLUTION=320x180");
    expect(master).not.toContain("AUDIO");
    expect(master).toMatch(/CODECS="avc1\.[0-9a-f]{6}"/);
    expect(emitted.some((f) => f.path.startsWith("audio/"))).toBe(false);
    expect(emitted.at(-1)?.path).toBe("master.m3u8");
    expect(await readdir(scratchDir)).toEqual([]);
  });

  it("works with the ffmpeg and ffprobe shipped by npm packages", async () => {
    const npm = resolveTools({ searchPath: "" });
    expect(npm.source).toMatchObject({ ffmpeg: "npm", ffprobe: "npm" });
    const { output, outDir } = await packageInto(
      { path: sources.withAudio },
      { ffmpegPath: npm.ffmpeg, ffprobePath: npm.ffprobe },
    );
    expect(output.renditions.map((r) => r.name)).toEqual(["360p", "240p"]);
    const played = await ffprobeJson(join(outDir, "master.m3u8"), "stream=codec_name");
    expect(played.streams.map((s: { codec_name: string }) => s.codec_name)).toContain("h264");
  });

  it("never reads past maxDurationMs of the source", async () => {
    const { outDir } = await packageInto({ path: sources.small }, { maxDurationMs: 1000 });
    const playlist = await text(outDir, "180p/playlist.m3u8");
    const durations = [...playlist.matchAll(/#EXTINF:([\d.]+),/g)].map((m) => Number(m[1]));
    expect(durations.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 1);
  });

  it("removes the scratch directory and passes the error on when the store fails", async () => {
    const scratchDir = await mkdtemp(join(root, "scratch-"));
    const processor = ffmpegMediaProcessor({ x264Preset: "ultrafast", scratchDir });
    const input = { path: sources.small };
    const source = await Effect.runPromise(processor.probe(input));
    const result = await Effect.runPromise(
      Effect.either(
        processor.package(input, source, defaultLadder, () =>
          Effect.fail(new StorageError({ message: "disk full" })),
        ),
      ),
    );
    expect(Either.isLeft(result) && result.left._tag).toBe("StorageError");
    expect(await readdir(scratchDir)).toEqual([]);
  });

  it("removes scratch directories of workers that died, and only theirs", async () => {
    const scratchDir = await mkdtemp(join(root, "scratch-"));
    // A pid that was alive a moment ago and is gone now, as a SIGKILLed worker's is.
    const gone = spawn(process.execPath, ["-e", ""]);
    await once(gone, "exit");
    const living = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60_000)"]);
    try {
      const leftovers = {
        dead: `vod-ffmpeg-p${gone.pid}-aB3dE9`,
        living: `vod-ffmpeg-p${living.pid}-Zz0Yy1`,
        own: `vod-ffmpeg-p${process.pid}-q1W2e3`,
        unrelated: "vod-ffmpeg-notascratch",
      };
      for (const name of Object.values(leftovers)) {
        await mkdir(join(scratchDir, name, "work"), { recursive: true });
        await writeFile(join(scratchDir, name, "work", "0.m4s"), "segment");
      }
      const processor = ffmpegMediaProcessor({ scratchDir });
      await Effect.runPromise(processor.probe({ path: sources.small }));
      expect((await readdir(scratchDir)).sort()).toEqual(
        [leftovers.living, leftovers.own, leftovers.unrelated].sort(),
      );
    } finally {
      living.kill("SIGKILL");
    }
  });
});

/** Child processes of this process whose command line contains `marker`. */
const children = async (marker: string): Promise<number[]> => {
  const found: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const cmdline = await readFile(`/proc/${entry}/cmdline`, "utf8");
      if (ppid === process.pid && cmdline.includes(marker)) found.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
};

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe.skipIf(process.platform !== "linux")("interruption", () => {
  it("fails with processing_error and kills the packager when it hangs past its limit", async () => {
    const scratchDir = await mkdtemp(join(root, "scratch-"));
    // A packager that never finishes, as Shaka did when it deadlocked.
    const hung = join(root, "hung-packager.sh");
    await writeFile(hung, "#!/bin/sh\nexec sleep 300\n", { mode: 0o755 });
    const processor = ffmpegMediaProcessor({
      x264Preset: "ultrafast",
      scratchDir,
      packagerPath: hung,
      packagerTimeoutMs: 1_000,
    });
    const input = { path: sources.small };
    const source = await Effect.runPromise(processor.probe(input));
    const result = await Effect.runPromise(
      Effect.either(processor.package(input, source, defaultLadder, () => Effect.void)),
    );
    expect(Either.isLeft(result) && result.left).toMatchObject({
      _tag: "MediaRejected",
      code: "processing_error",
      message: expect.stringContaining("packager ran longer than 1000 ms"),
    });
    expect(await children("sleep 300")).toEqual([]);
    expect(await readdir(scratchDir)).toEqual([]);
  });

  it("kills ffmpeg and removes the scratch directory when the job is interrupted", async () => {
    const scratchDir = await mkdtemp(join(root, "scratch-"));
    // A slow preset keeps ffmpeg busy long enough to be caught running.
    const processor = ffmpegMediaProcessor({ x264Preset: "veryslow", scratchDir });
    const input = { path: sources.withAudio };
    const source = await Effect.runPromise(processor.probe(input));
    const emitted: string[] = [];
    const fiber = Effect.runFork(
      processor.package(input, source, defaultLadder, (file) => Effect.sync(() => emitted.push(file.path))),
    );
    let pids: number[] = [];
    for (let i = 0; i < 500 && pids.length === 0; i++) {
      pids = await children("-filter_complex");
      if (pids.length === 0) await new Promise((r) => setTimeout(r, 10));
    }
    expect(pids).toHaveLength(1);
    await Effect.runPromise(Fiber.interrupt(fiber));
    expect(alive(pids[0]!)).toBe(false);
    expect(await children("-filter_complex")).toEqual([]);
    expect(emitted).toEqual([]);
    expect(await readdir(scratchDir)).toEqual([]);
  });
});

#!/usr/bin/env node
// Where the host's processing time goes, step by step, beside the plain ffmpeg baseline of
// upload-and-processing.mjs: the adapter's probe, its transcode (one ffmpeg to MP4 per rung),
// Shaka Packager and the poster, the whole package() with its emits into the filesystem store,
// and the plain one-command HLS ffmpeg. Runs the built adapters (dist) directly, without a host.
//
//   node bench/processing-breakdown.mjs [--video-seconds 30] [--rounds 2]
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs, promisify } from "node:util";
import { Effect } from "effect";
import { cpuSeconds, fromRepo, median, table } from "./lib.mjs";
import { makeVideo, plainFfmpegArgs, VIDEO } from "./processing.mjs";

const { ffmpegMediaProcessor, planRenditions, resolveTools } = await fromRepo("adapters/ffmpeg");
const { filesystemObjectStore } = await fromRepo("adapters/filesystem");
const { defaultLadder } = await fromRepo("core");
// The adapter's own argument builders, from its build: the same commands the host runs.
const { transcodeArgs, packagerArgs } = await fromRepo("adapters/ffmpeg", "dist/media-processor.js");

const { values: args } = parseArgs({
  options: { "video-seconds": { type: "string", default: "30" }, rounds: { type: "string", default: "2" } },
});
const videoSeconds = Number(args["video-seconds"]);
const rounds = Number(args.rounds);
const execFileP = promisify(execFile);
const tools = resolveTools();
const now = () => process.hrtime.bigint();
const seconds = (start) => Number(process.hrtime.bigint() - start) / 1e9;
/** Wall seconds of `run`, and the CPU seconds of the processes it started (the tools). */
const timed = async (run) => {
  const cpu = (await cpuSeconds()).children;
  const start = now();
  await run();
  return { wall: seconds(start), cpu: (await cpuSeconds()).children - cpu };
};

const scratch = await mkdtemp(join(tmpdir(), "vod-bench-processing-"));
try {
  const source = join(scratch, "source.mp4");
  await makeVideo(tools.ffmpeg, source, videoSeconds);
  const processor = ffmpegMediaProcessor({ ffmpegPath: tools.ffmpeg, ffprobePath: tools.ffprobe });
  const planned = planRenditions(defaultLadder, VIDEO);
  const steps = {
    "plain ffmpeg → HLS fMP4 (the baseline)": [],
    "adapter probe (ffprobe, ffmpeg -codecs, 1 frame)": [],
    "adapter transcode (ffmpeg → one MP4 per rung + audio)": [],
    "adapter packager (Shaka: fMP4 segments, HLS, DASH)": [],
    "adapter poster (ffmpeg, 1 frame → jpg)": [],
    "adapter package() whole, emitting into the filesystem store": [],
    "  of which: emits (store.put with fsync, after the tools)": [],
  };
  const record = (name, value) => {
    const entry = typeof value === "number" ? { wall: value, cpu: Number.NaN } : value;
    steps[name].push(entry);
    console.error(
      `[${new Date().toISOString().slice(11, 19)}] ${name}: ${entry.wall.toFixed(2)} s, tools' CPU ${entry.cpu.toFixed(2)} s`,
    );
  };
  for (let round = 0; round < rounds; round++) {
    const dir = join(scratch, `round-${round}`);
    const [plainOut, work, out, temp] = ["plain", "work", "out", "tmp"].map((d) => join(dir, d));
    for (const d of [plainOut, work, out, temp]) await mkdir(d, { recursive: true });
    record(
      "plain ffmpeg → HLS fMP4 (the baseline)",
      await timed(() => execFileP(tools.ffmpeg, plainFfmpegArgs(source, plainOut, planned))),
    );
    let probed;
    record(
      "adapter probe (ffprobe, ffmpeg -codecs, 1 frame)",
      await timed(async () => {
        probed = await Effect.runPromise(processor.probe({ path: source }));
      }),
    );
    const transcode = transcodeArgs({
      source,
      work,
      planned,
      audioBitrateKbps: planned[0].rendition.audioBitrateKbps,
      fps: probed.source_fps,
      preset: "veryfast",
      crf: 23,
      maxDurationMs: undefined,
    });
    record(
      "adapter transcode (ffmpeg → one MP4 per rung + audio)",
      await timed(() => execFileP(tools.ffmpeg, transcode)),
    );
    record(
      "adapter packager (Shaka: fMP4 segments, HLS, DASH)",
      await timed(() => execFileP(tools.packager, packagerArgs(planned, true, temp), { cwd: out })),
    );
    record(
      "adapter poster (ffmpeg, 1 frame → jpg)",
      await timed(() =>
        execFileP(tools.ffmpeg, [
          ...["-hide_banner", "-nostdin", "-v", "error", "-y", "-ss", "3", "-i", source],
          ...["-map", "0:V:0", "-frames:v", "1", "-vf", `scale=${VIDEO.width}:${VIDEO.height},setsar=1`],
          ...["-q:v", "3", "-f", "image2", "-update", "1", join(dir, "poster.jpg")],
        ]),
      ),
    );
    const store = filesystemObjectStore({ root: join(dir, "store") });
    let firstEmit;
    let emitted = 0;
    const whole = await timed(() =>
      Effect.runPromise(
        processor.package({ path: source }, probed, defaultLadder, (file) => {
          firstEmit ??= now();
          emitted++;
          return store.put(`renditions/${file.path}`, file.body, file.contentType);
        }),
      ),
    );
    record("adapter package() whole, emitting into the filesystem store", whole);
    record("  of which: emits (store.put with fsync, after the tools)", seconds(firstEmit));
    if (round === 0) console.error(`  (${emitted} files emitted)`);
    await rm(dir, { recursive: true, force: true });
  }
  const plain = steps["plain ffmpeg → HLS fMP4 (the baseline)"];
  const baseline = median(plain.map((e) => e.wall));
  const baselineCpu = median(plain.map((e) => e.cpu));
  console.log(
    `\n${new Date().toISOString()}  ${videoSeconds} s ${VIDEO.width}x${VIDEO.height} ${VIDEO.fps} fps source ` +
      `(${(await stat(source)).size} bytes), rungs ${planned.map((p) => p.rendition.name).join("/")}, ${rounds} round(s)\n`,
  );
  console.log(
    table(
      ["step", "seconds (rounds)", "ratio to plain ffmpeg", "tools' CPU s", "CPU ratio"],
      Object.entries(steps).map(([name, entries]) => {
        const wall = median(entries.map((e) => e.wall));
        const cpu = median(entries.map((e) => e.cpu));
        return [
          name,
          `${wall.toFixed(2)} (${entries.map((e) => e.wall.toFixed(2)).join(", ")})`,
          (wall / baseline).toFixed(2),
          Number.isNaN(cpu) ? "—" : cpu.toFixed(2),
          Number.isNaN(cpu) ? "—" : (cpu / baselineCpu).toFixed(2),
        ];
      }),
    ),
  );
  console.log();
} finally {
  await rm(scratch, { recursive: true, force: true });
}

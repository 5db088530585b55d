#!/usr/bin/env node
// Issue 26: the encoder settings, chosen by measurement. On a 1080p source (testsrc2 with film
// grain added, harder to compress than testsrc2 alone), with the adapter's own ffmpeg commands
// (transcodeArgs, packagerArgs from its build):
// - x264 presets: the first rendition's run (360p + audio) and the whole ladder's, wall seconds,
//   with the size and SSIM (against the source scaled to the rung) of the 360p and 1080p outputs;
// - keyframe interval (GOP) 1, 2 and 4 s at the chosen preset: the 360p run, size, SSIM;
// - segment length 2, 4 and 6 s: Shaka Packager's time on the 360p output, the first segment's
//   bytes (what a player fetches before its first frame) and the segments' count.
//
//   node bench/encoder-settings.mjs [--video-seconds 20] [--presets ultrafast,superfast,veryfast,faster]
import { execFile } from "node:child_process";
import { mkdir, readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs, promisify } from "node:util";
import { benchScratch, cpuSeconds, fmt, fromRepo, loadAverage, table } from "./lib.mjs";

const { values: args } = parseArgs({
  options: {
    "video-seconds": { type: "string", default: "20" },
    presets: { type: "string", default: "ultrafast,superfast,veryfast,faster" },
    chosen: { type: "string", default: "veryfast" },
  },
});
const videoSeconds = Number(args["video-seconds"]);
const presets = args.presets.split(",");
const log = (message) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${message}\n`);

const { planRenditions, resolveTools, defaultLadder } = await fromRepo("adapters/ffmpeg");
const { transcodeArgs, packagerArgs } = await fromRepo("adapters/ffmpeg", "dist/media-processor.js");
const tools = resolveTools();
const run = promisify(execFile);
const { dir, cleanup } = await benchScratch({ dirPrefix: "vod-bench-enc-", log });

const SOURCE = { width: 1920, height: 1080 };
const planned = planRenditions(defaultLadder, SOURCE);
const p360 = planned.find((p) => p.height === 360);
const p1080 = planned.find((p) => p.height === 1080);

/** Wall seconds of the tool's run, and its CPU seconds (steadier than wall on a shared machine). */
const timed = async (command, argv, options) => {
  const cpu = (await cpuSeconds()).children;
  const start = performance.now();
  await run(command, argv, { maxBuffer: 64 * 1024 * 1024, ...options });
  return { wall: (performance.now() - start) / 1000, cpu: (await cpuSeconds()).children - cpu };
};
const both = (t) => `${fmt(t.wall)} / ${fmt(t.cpu)}`;

const ssim = async (file, source, { width, height }) => {
  const { stderr } = await run(tools.ffmpeg, [
    ...["-hide_banner", "-nostdin", "-i", file, "-i", source],
    ...["-lavfi", `[1:v]scale=${width}:${height},setsar=1[ref];[0:v][ref]ssim`, "-f", "null", "-"],
  ]);
  return Number(/All:([\d.]+)/.exec(stderr)?.[1]);
};

let runs = 0;
/** The adapter's transcode of `rungs` at `preset`; `gopSeconds` rewrites its keyframe spacing. */
const transcode = async (source, rungs, preset, gopSeconds = 2) => {
  runs += 1;
  const work = join(dir, `work-${runs}`);
  await mkdir(work);
  let argv = transcodeArgs({
    source,
    work,
    planned: rungs,
    audioBitrateKbps: 128,
    fps: 30,
    preset,
    crf: 23,
    maxDurationMs: undefined,
  });
  if (gopSeconds !== 2)
    argv = argv.map((a, i) =>
      argv[i - 1] === "-g"
        ? String(30 * gopSeconds * 2)
        : a.replace("n_forced*2)", `n_forced*${gopSeconds})`),
    );
  const seconds = await timed(tools.ffmpeg, argv);
  return { seconds, work };
};

const size = async (path) => (await stat(path)).size;

try {
  const source = join(dir, "source.mp4");
  log(`making a ${videoSeconds} s 1080p source: testsrc2 with temporal grain, and a tone`);
  await run(tools.ffmpeg, [
    ...["-v", "error", "-y", "-f", "lavfi"],
    ...["-i", `testsrc2=size=1920x1080:rate=30:duration=${videoSeconds}`],
    ...["-f", "lavfi", "-i", `sine=frequency=440:duration=${videoSeconds}`],
    ...["-vf", "noise=alls=12:allf=t+u", "-c:v", "libx264", "-preset", "ultrafast", "-crf", "12"],
    ...["-pix_fmt", "yuv420p", "-c:a", "aac", "-movflags", "+faststart", source],
  ]);

  console.log(
    `encoder settings: ${videoSeconds} s 1920x1080 30 fps (testsrc2 + grain), x264 CRF 23 under each rung's cap; load average ${loadAverage()}\n`,
  );
  const presetRows = [];
  for (const preset of presets) {
    log(`preset ${preset}: the first rendition (360p + audio)`);
    const first = await transcode(source, [p360], preset);
    log(`preset ${preset}: the whole ladder (${planned.map((p) => p.rendition.name).join(", ")} + audio)`);
    const ladder = await transcode(source, planned, preset);
    const f360 = join(ladder.work, "360p.mp4");
    const f1080 = join(ladder.work, "1080p.mp4");
    presetRows.push([
      preset,
      both(first.seconds),
      both(ladder.seconds),
      fmt((await size(f360)) / 1024, 0),
      fmt(await ssim(f360, source, p360), 4),
      fmt((await size(f1080)) / 1024, 0),
      fmt(await ssim(f1080, source, p1080), 4),
    ]);
    await rm(ladder.work, { recursive: true, force: true });
    if (preset !== args.chosen) await rm(first.work, { recursive: true, force: true });
  }

  console.log(
    table(
      [
        "preset",
        "first rendition, wall / CPU (s)",
        "whole ladder, wall / CPU (s)",
        "360p KiB",
        "360p SSIM",
        "1080p KiB",
        "1080p SSIM",
      ],
      presetRows,
    ),
  );
  const gopRows = [];
  let chosenWork;
  for (const gop of [1, 2, 4]) {
    log(`GOP ${gop} s at ${args.chosen}: the first rendition`);
    const made = await transcode(source, [p360], args.chosen, gop);
    const f = join(made.work, "360p.mp4");
    gopRows.push([
      `${gop} s`,
      both(made.seconds),
      fmt((await size(f)) / 1024, 0),
      fmt(await ssim(f, source, p360), 4),
    ]);
    if (gop === 2) chosenWork = made.work;
  }

  console.log(`\nkeyframe interval at ${args.chosen}, the first rendition (360p + audio):\n`);
  console.log(table(["GOP", "run, wall / CPU (s)", "360p KiB", "360p SSIM"], gopRows));
  const segmentRows = [];
  for (const segment of [2, 4, 6]) {
    const out = join(dir, `pack-${segment}`);
    const temp = join(dir, `pack-tmp-${segment}`);
    await mkdir(out);
    await mkdir(temp);
    const argv = packagerArgs([p360], true, temp).map((a, i, all) =>
      all[i - 1] === "--segment_duration" ? String(segment) : a.replace("../work/", `${chosenWork}/`),
    );
    const seconds = await timed(tools.packager, argv, { cwd: out });
    const segments = (await readdir(join(out, "360p"))).filter((f) => f.endsWith(".m4s"));
    segmentRows.push([
      `${segment} s`,
      both(seconds),
      String(segments.length),
      fmt(((await size(join(out, "360p", "1.m4s"))) + (await size(join(out, "audio", "1.m4s")))) / 1024, 0),
    ]);
  }

  console.log(`\nsegment length, Shaka Packager on the 360p rendition and its audio:\n`);
  console.log(
    table(
      ["segment", "packager, wall / CPU (s)", "segments", "first segment, video + audio (KiB)"],
      segmentRows,
    ),
  );
} finally {
  await cleanup();
}

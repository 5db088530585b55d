#!/usr/bin/env node
// Issue 26: how soon an upload is playable, and how soon every rendition is made, against one
// plain ffmpeg making the same ladder (processing.mjs's baseline command), side by side in one
// run: the baseline, the host on the embedded default (PGlite), and the host on the server set
// (a Postgres server). Each host gets the same source over HTTP; timed from the complete's answer
// to the first read of the asset as `ready` (playable: a new session's master lists a rendition of
// at least 360p), and to the first read with no rendition `pending`.
//
//   node bench/time-to-playable.mjs                  # 60 s 1080p source, 1 round: ~5-8 min
//   options: --video-seconds N (60), --height N (1080), --rounds N (1), --poll-ms N (100),
//            --sets embedded,server, --database-url (a local Postgres server, for the server set)
import { execFile } from "node:child_process";
import { mkdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  benchArgs,
  benchScratch,
  callJson,
  cli,
  cpuSeconds,
  describeBuild,
  expectStatus,
  fmt,
  fromRepo,
  loadAverage,
  median,
  sleep,
  startVodHost,
  table,
} from "./lib.mjs";
import { makeVideo, plainFfmpegArgs } from "./processing.mjs";

const args = benchArgs({
  "video-seconds": { type: "string", default: "60" },
  height: { type: "string", default: "1080" },
  rounds: { type: "string", default: "1" },
  "poll-ms": { type: "string", default: "100" },
  sets: { type: "string", default: "embedded,server" },
});
const videoSeconds = Number(args["video-seconds"]);
const height = Number(args.height);
const width = Math.round((height * 16) / 9 / 2) * 2;
const rounds = Number(args.rounds);
const pollMs = Number(args["poll-ms"]);
const sets = args.sets.split(",").filter(Boolean);
const databaseUrl = args["database-url"];
const log = (message) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${message}\n`);

const { planRenditions, resolveTools } = await fromRepo("adapters/ffmpeg");
const { defaultLadder } = await fromRepo("core");
const tools = resolveTools();
const run = promisify(execFile);

const schema = `vod_bench_ttp_${process.pid}_${Date.now().toString(36)}`;
const { dir, track, cleanup } = await benchScratch({
  dirPrefix: "vod-bench-ttp-",
  log,
  server: sets.includes("server") && { databaseUrl, schema },
});

const seconds = (from) => (performance.now() - from) / 1000;

/** One plain ffmpeg making the ladder (HLS fMP4, as the platform's output): its wall seconds. */
const baseline = async (source, round) => {
  const out = join(dir, `plain-${round}`);
  const planned = planRenditions(defaultLadder, { width, height });
  await mkdir(out);
  const cpu = (await cpuSeconds()).children;
  const start = performance.now();
  await run(tools.ffmpeg, plainFfmpegArgs(source, out, planned), { maxBuffer: 16 * 1024 * 1024 });
  const wall = seconds(start);
  await rm(out, { recursive: true, force: true });
  return { wall, cpu: (await cpuSeconds()).children - cpu };
};

/** Starts the host of `set` once; its processing runs in `vod serve` itself (one worker). */
const hosts = {};
const hostFor = async (set) => {
  if (hosts[set]) return hosts[set];
  hosts[set] = await startVodHost({
    cli,
    dataDir: join(dir, set),
    env: {
      VOD_WORKER_CONCURRENCY: "1",
      VOD_FFMPEG_PATH: tools.ffmpeg,
      VOD_FFPROBE_PATH: tools.ffprobe,
      VOD_RATE_LIMIT_API_PER_MINUTE: "100000000",
      ...(set === "server" ? { VOD_DATABASE_URL: databaseUrl, VOD_DATABASE_SCHEMA: schema } : {}),
    },
    track,
  });
  return hosts[set];
};

/** The heights of the variants a new session's master lists. */
const listedHeights = async (vod, assetId) => {
  const session = await callJson(vod.base, "/v1/playback/sessions", {
    body: { asset_id: assetId },
    headers: vod.auth,
  });
  expectStatus("playback session", session, 201);
  const master = await (await fetch(session.body.urls.manifest)).text();
  return [...master.matchAll(/RESOLUTION=\d+x(\d+)/g)].map((m) => Number(m[1]));
};

/** Uploads the source to the host of `set`, then times ready and every rendition from the complete. */
const viaHost = async (set, source, size) => {
  const vod = await hostFor(set);
  const upload = await vod.begin(size, `ttp ${set}`);
  await vod.putParts(source, upload);
  const completed = await vod.complete(upload);
  const pid = vod.host.child.pid;
  const cpu = (await cpuSeconds(pid)).children;
  const start = performance.now();
  let ready;
  let listed;
  for (;;) {
    const asset = await vod.asset(upload.assetId);
    if (asset.status === "failed") throw new Error(`${set}: asset failed with ${asset.failure_code}`);
    if (asset.status === "ready" && ready === undefined) {
      ready = seconds(start);
      listed = await listedHeights(vod, upload.assetId);
      if (!listed.some((h) => h >= 360)) throw new Error(`${set}: ready, but its master lists ${listed}`);
      log(
        `${set}: ready after ${fmt(ready)} s (${fmt((asset.ready_at - completed.upload.completed_at) / 1000)} s by the host's clock), master lists ${listed.join(", ")}p`,
      );
    }
    if (asset.status === "ready" && asset.renditions.every((r) => r.status !== "pending")) {
      const all = seconds(start);
      const failed = asset.renditions.filter((r) => r.status !== "ready").map((r) => r.name);
      if (failed.length > 0) throw new Error(`${set}: renditions failed: ${failed.join(", ")}`);
      log(`${set}: every rendition after ${fmt(all)} s: ${asset.renditions.map((r) => r.name).join(", ")}`);
      // The tools' CPU (ffprobe, ffmpeg, the packager: the host's children that have exited).
      return { ready, all, first: listed, cpu: (await cpuSeconds(pid)).children - cpu };
    }
    await sleep(pollMs);
  }
};

try {
  const source = join(dir, "source.mp4");
  log(`making a ${videoSeconds} s ${width}x${height} test source (testsrc2 + sine)`);
  await makeVideo(tools.ffmpeg, source, videoSeconds, { width, height, fps: 30 });
  const size = (await stat(source)).size;
  for (const set of sets) await hostFor(set);

  const results = { plain: [], ...Object.fromEntries(sets.map((s) => [s, []])) };
  const ratios = Object.fromEntries(sets.map((s) => [s, { ready: [], all: [] }]));
  for (let round = 0; round < rounds; round++) {
    // Each round starts at another contestant, so drift on a shared machine falls on each in turn.
    const order = ["plain", ...sets];
    const turned = order.map((_, i) => order[(i + round) % order.length]);
    const got = {};
    for (const who of turned) {
      log(`round ${round + 1}: ${who}`);
      got[who] = who === "plain" ? await baseline(source, round) : await viaHost(who, source, size);
      if (who === "plain") log(`plain ffmpeg: ${fmt(got.plain.wall)} s, CPU ${fmt(got.plain.cpu)} s`);
      results[who].push(got[who]);
    }
    for (const set of sets) {
      ratios[set].ready.push(got[set].ready / got.plain.wall);
      ratios[set].all.push(got[set].all / got.plain.wall);
    }
  }

  const planned = planRenditions(defaultLadder, { width, height });
  const rows = [
    [
      "plain ffmpeg, the whole ladder (baseline)",
      fmt(median(results.plain.map((r) => r.wall))),
      "",
      fmt(median(results.plain.map((r) => r.wall))),
      "",
      fmt(median(results.plain.map((r) => r.cpu))),
    ],
    ...sets.map((set) => [
      `vod host, ${set === "server" ? "server set (Postgres)" : "embedded default (PGlite)"}`,
      fmt(median(results[set].map((r) => r.ready))),
      fmt(median(ratios[set].ready)),
      fmt(median(results[set].map((r) => r.all))),
      fmt(median(ratios[set].all)),
      fmt(median(results[set].map((r) => r.cpu))),
    ]),
  ];
  console.log(
    `time to playable: ${videoSeconds} s ${width}x${height} source, ladder ${planned.map((p) => p.rendition.name).join(", ")} + audio; ` +
      `${rounds} round(s); load average ${loadAverage()} ${describeBuild()}\n`,
  );
  console.log(
    table(
      ["", "ready (s)", "ready / plain", "no rendition pending (s)", "all / plain", "tools' CPU (s)"],
      rows,
    ),
  );
  console.log(
    `\ntargets: ready / plain <= 0.25: ${sets.map((s) => `${s} ${median(ratios[s].ready) <= 0.25 ? "pass" : "FAIL"}`).join(", ")}; ` +
      `all / plain <= 1.1: ${sets.map((s) => `${s} ${median(ratios[s].all) <= 1.1 ? "pass" : "FAIL"}`).join(", ")}`,
  );
  console.log(
    `first rendition listed at ready: ${sets.map((s) => `${s} ${results[s][0].first.join(", ")}p`).join("; ")}`,
  );
} finally {
  await cleanup();
}

#!/usr/bin/env node
// Issue 27: images made on request, side by side in one run on the embedded default (PGlite,
// filesystem objects), from one testsrc2 source uploaded and processed by the host:
// - a cold thumbnail (a time not asked before: fetch its segment, decode, encode, store, serve)
//   against one plain `ffmpeg -ss T -i rendition -frames:v 1` on the same rendition (its init and
//   segments joined into one local file), and against the same command on the rendition's HLS
//   playlist over HTTP; goal: host / plain <= 1.5;
// - a cached thumbnail's throughput against the same stored bytes served as a static playback
//   file (`/v1/play/{token}/images/...jpg`, the segment route); goal: >= 0.8;
// - the storyboard (sprite sheet) of the source, cold, against the source's duration.
//
//   node bench/images.mjs                       # 600 s 640x360 source: ~5-10 min on a loaded 2-vCPU VM
//   options: --video-seconds N (600), --height N (360), --rounds N (9), --seconds N (5, per throughput run),
//            --connections N (16)
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  autocannonRps,
  benchArgs,
  benchScratch,
  callJson,
  cli,
  describeBuild,
  expectStatus,
  fmt,
  fromRepo,
  loadAverage,
  median,
  sleep,
  startVodHost,
  table,
  verdict,
} from "./lib.mjs";
import { makeVideo } from "./processing.mjs";

const args = benchArgs({
  "video-seconds": { type: "string", default: "600" },
  height: { type: "string", default: "360" },
  rounds: { type: "string", default: "9" },
  seconds: { type: "string", default: "5" },
  connections: { type: "string", default: "16" },
});
const videoSeconds = Number(args["video-seconds"]);
const height = Number(args.height);
const width = Math.round((height * 16) / 9 / 2) * 2;
const rounds = Number(args.rounds);
const throughputSeconds = Number(args.seconds);
const connections = Number(args.connections);
const log = (message) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${message}\n`);

const { resolveTools } = await fromRepo("adapters/ffmpeg");
const tools = resolveTools();
const run = promisify(execFile);
const { dir, track, cleanup } = await benchScratch({ dirPrefix: "vod-bench-images-", log });
const elapsed = (from) => (performance.now() - from) / 1000;

try {
  const source = join(dir, "source.mp4");
  log(`making a ${videoSeconds} s ${width}x${height} testsrc2 source`);
  await makeVideo(tools.ffmpeg, source, videoSeconds, { width, height, fps: 25 });
  const size = (await stat(source)).size;

  const vod = await startVodHost({
    cli,
    dataDir: join(dir, "host"),
    env: {
      VOD_WORKER_CONCURRENCY: "1",
      VOD_FFMPEG_PATH: tools.ffmpeg,
      VOD_FFPROBE_PATH: tools.ffprobe,
      VOD_RATE_LIMIT_API_PER_MINUTE: "100000000",
    },
    track,
  });
  const upload = await vod.begin(size, "images bench");
  await vod.putParts(source, upload);
  await vod.complete(upload);
  const processing = performance.now();
  let asset;
  for (;;) {
    asset = await vod.asset(upload.assetId);
    if (asset.status === "failed") throw new Error(`asset failed: ${asset.failure_code}`);
    if (asset.status === "ready" && asset.renditions.every((r) => r.status !== "pending")) break;
    await sleep(500);
  }
  log(`processed in ${fmt(elapsed(processing))} s: ${asset.renditions.map((r) => r.name).join(", ")}`);

  const session = await callJson(vod.base, "/v1/playback/sessions", {
    body: { asset_id: upload.assetId, ttl_seconds: 86_400 },
    headers: vod.auth,
  });
  expectStatus("playback session", session, 201);
  const files = session.body.urls.manifest.replace(/master\.m3u8$/, "");

  // The rendition thumbnails at the source's size are made from: its files joined into one MP4.
  const top = asset.renditions.filter((r) => r.status === "ready").sort((a, b) => b.height - a.height)[0];
  const playlistUrl = `${files}${top.name}/playlist.m3u8`;
  const playlist = await (await fetch(playlistUrl)).text();
  const init = /#EXT-X-MAP:URI="([^"]+)"/.exec(playlist)?.[1];
  const segments = playlist.split("\n").filter((l) => l.trim() !== "" && !l.startsWith("#"));
  const parts = [];
  for (const uri of [init, ...segments])
    parts.push(Buffer.from(await (await fetch(`${files}${top.name}/${uri}`)).arrayBuffer()));
  const rendition = join(dir, "rendition.mp4");
  await writeFile(rendition, Buffer.concat(parts));
  log(`${top.name}: ${segments.length} segments, ${fmt(Buffer.concat(parts).length / 1e6)} MB joined`);

  // Cold thumbnails at distinct times, each against the plain commands at the same time.
  const times = Array.from({ length: rounds }, (_, i) =>
    Number((((i + 0.5) * videoSeconds) / rounds + 0.37).toFixed(3)),
  );
  const host = [];
  const plainFile = [];
  const plainHls = [];
  for (const [i, t] of times.entries()) {
    const plain = async (input, out) => {
      const start = performance.now();
      await run(tools.ffmpeg, ["-v", "error", "-y", "-ss", String(t), "-i", input, "-frames:v", "1", out]);
      return elapsed(start);
    };
    // Alternated, so that neither side always runs right after the other.
    const viaHost = async () => {
      const start = performance.now();
      const res = await fetch(`${files}thumbnail.jpg?time=${t}`);
      const body = Buffer.from(await res.arrayBuffer());
      if (res.status !== 200) throw new Error(`thumbnail at ${t}: ${res.status} ${body.toString()}`);
      return elapsed(start);
    };
    if (i % 2 === 0) {
      host.push(await viaHost());
      plainFile.push(await plain(rendition, join(dir, `plain-${i}.jpg`)));
    } else {
      plainFile.push(await plain(rendition, join(dir, `plain-${i}.jpg`)));
      host.push(await viaHost());
    }
    plainHls.push(await plain(playlistUrl, join(dir, `plain-hls-${i}.jpg`)));
  }

  // Cached: the first time's thumbnail again and again, against its stored bytes as a static file.
  const cachedUrl = `${files}thumbnail.jpg?time=${times[0]}`;
  const staticUrl = `${files}images/thumbnail-${Math.round(times[0] * 1000)}-${top.width}x${top.height}-preserve.jpg`;
  const digest = async (url) => {
    const res = await fetch(url);
    if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
    return createHash("sha256")
      .update(Buffer.from(await res.arrayBuffer()))
      .digest("hex");
  };
  if ((await digest(cachedUrl)) !== (await digest(staticUrl)))
    throw new Error("the cached thumbnail and the static file differ");
  // Alternated, three runs each, medians: the VM's load moves between runs.
  const cachedRuns = [];
  const staticRuns = [];
  for (let i = 0; i < 3; i++) {
    const order = i % 2 === 0 ? [cachedUrl, staticUrl] : [staticUrl, cachedUrl];
    for (const url of order)
      (url === cachedUrl ? cachedRuns : staticRuns).push(
        await autocannonRps(url, { connections, seconds: throughputSeconds }),
      );
  }
  const cachedRps = median(cachedRuns);
  const staticRps = median(staticRuns);

  // The storyboard of the whole source, cold.
  const storyboardStart = performance.now();
  const sprite = await fetch(`${files}storyboard.jpg`);
  await sprite.arrayBuffer();
  if (sprite.status !== 200) throw new Error(`storyboard: ${sprite.status}`);
  const storyboard = elapsed(storyboardStart);
  const cues = (await (await fetch(`${files}storyboard.vtt`)).text()).split("-->").length - 1;

  const coldRatio = median(host) / median(plainFile);
  const throughputRatio = cachedRps / staticRps;
  console.log(describeBuild());
  console.log(
    `source: ${videoSeconds} s ${width}x${height} testsrc2; thumbnails of ${top.name} (${top.width}x${top.height}); ` +
      `${rounds} cold times; ${connections} connections x ${throughputSeconds} s per throughput run, 3 runs each; load ${loadAverage()}`,
  );
  console.log(
    table(
      ["measure", "host", "baseline", "ratio", "goal", "verdict"],
      [
        [
          "cold thumbnail, median s (baseline: ffmpeg -ss T -i joined rendition.mp4)",
          fmt(median(host), 3),
          fmt(median(plainFile), 3),
          fmt(coldRatio),
          "<= 1.5",
          verdict(coldRatio <= 1.5),
        ],
        [
          "cold thumbnail, median s (baseline: ffmpeg -ss T -i rendition's HLS playlist over HTTP)",
          fmt(median(host), 3),
          fmt(median(plainHls), 3),
          fmt(median(host) / median(plainHls)),
          "",
          "",
        ],
        [
          "cached thumbnail, req/s (baseline: the same bytes as a static playback file)",
          fmt(cachedRps, 0),
          fmt(staticRps, 0),
          fmt(throughputRatio),
          ">= 0.8",
          verdict(throughputRatio >= 0.8),
        ],
        [
          `storyboard (${cues} tiles), cold s (baseline: the source's duration)`,
          fmt(storyboard, 2),
          String(videoSeconds),
          fmt(storyboard / videoSeconds, 4),
          "",
          "",
        ],
      ],
    ),
  );
  console.log(`cold thumbnails, host s: ${host.map((s) => fmt(s, 3)).join(" ")}`);
  console.log(`plain ffmpeg on the joined file, s: ${plainFile.map((s) => fmt(s, 3)).join(" ")}`);
  console.log(
    `cached req/s: ${cachedRuns.map((r) => fmt(r, 0)).join(" ")}; static: ${staticRuns.map((r) => fmt(r, 0)).join(" ")}`,
  );
} finally {
  await cleanup();
}

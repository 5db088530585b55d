#!/usr/bin/env node
// Issue 27: static MP4 renditions on the embedded default (PGlite, filesystem objects), from one
// testsrc2 source uploaded and processed by the host, side by side in one run:
// - PATCH `mp4_support: standard` on the ready asset until high.mp4, low.mp4 and audio.m4a are
//   all ready (the job: read the playlists, join each track's segments, remux, store, save),
//   against the plain commands a user would run for the same three files on the same packaged
//   tracks already joined on local disk (`ffmpeg -i video -i audio -c copy -movflags +faststart`,
//   three runs one after the other), and against the source's duration;
// - each file's size against its rendition's segments (a remux adds only the index).
// No goal is set for these (DECISIONS sets none); the table is for the record.
//
//   node bench/static-renditions.mjs               # 120 s 1280x720 source: ~3-6 min on a loaded 2-vCPU VM
//   options: --video-seconds N (120), --height N (720), --rounds N (3)
import { execFile } from "node:child_process";
import { stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import {
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
} from "./lib.mjs";
import { makeVideo } from "./processing.mjs";

const args = benchArgs({
  "video-seconds": { type: "string", default: "120" },
  height: { type: "string", default: "720" },
  rounds: { type: "string", default: "3" },
});
const videoSeconds = Number(args["video-seconds"]);
const height = Number(args.height);
const width = Math.round((height * 16) / 9 / 2) * 2;
const rounds = Number(args.rounds);
const log = (message) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${message}\n`);

const { resolveTools } = await fromRepo("adapters/ffmpeg");
const tools = resolveTools();
const run = promisify(execFile);
const { dir, track, cleanup } = await benchScratch({ dirPrefix: "vod-bench-static-", log });
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
  const settled = async (id, done) => {
    for (;;) {
      const asset = await vod.asset(id);
      if (asset.status === "failed") throw new Error(`asset failed: ${asset.failure_code}`);
      if (done(asset)) return asset;
      await sleep(100);
    }
  };
  const laddered = (a) => a.status === "ready" && a.renditions.every((r) => r.status !== "pending");
  const made = (a) =>
    a.static_renditions.length > 0 && a.static_renditions.every((r) => r.status !== "preparing");

  const hostRuns = [];
  let asset;
  for (let round = 0; round < rounds; round++) {
    const upload = await vod.begin(size, `static bench ${round}`);
    await vod.putParts(source, upload);
    await vod.complete(upload);
    await settled(upload.assetId, laddered);
    const start = performance.now();
    const patched = await callJson(vod.base, `/v1/assets/${upload.assetId}`, {
      method: "PATCH",
      body: { mp4_support: "standard" },
      headers: vod.auth,
    });
    expectStatus("PATCH mp4_support", patched, 200);
    asset = await settled(upload.assetId, made);
    hostRuns.push(elapsed(start));
    if (asset.static_renditions.some((r) => r.status !== "ready"))
      throw new Error(`static renditions: ${JSON.stringify(asset.static_renditions)}`);
    log(`round ${round + 1}: ready in ${fmt(hostRuns[round])} s`);
  }

  const session = await callJson(vod.base, "/v1/playback/sessions", {
    body: { asset_id: asset.id, ttl_seconds: 86_400 },
    headers: vod.auth,
  });
  expectStatus("playback session", session, 201);
  const files = session.body.urls.manifest.replace(/master\.m3u8$/, "");

  /** A packaged track's init and segments, fetched and joined into one local fMP4. */
  const joined = async (name) => {
    const playlist = await (await fetch(`${files}${name}/playlist.m3u8`)).text();
    const init = /#EXT-X-MAP:URI="([^"]+)"/.exec(playlist)?.[1];
    const segments = playlist.split("\n").filter((l) => l.trim() !== "" && !l.startsWith("#"));
    const parts = [];
    for (const uri of [init, ...segments])
      parts.push(Buffer.from(await (await fetch(`${files}${name}/${uri}`)).arrayBuffer()));
    const path = join(dir, `${name}.mp4`);
    await writeFile(path, Buffer.concat(parts));
    return { path, bytes: Buffer.concat(parts).length };
  };
  const ready = asset.renditions.filter((r) => r.status === "ready").sort((a, b) => a.height - b.height);
  const low = ready[0];
  const high = ready.filter((r) => r.height <= 1080).pop();
  const tracks = { high: await joined(high.name), low: await joined(low.name), audio: await joined("audio") };

  const plainRuns = [];
  for (let round = 0; round < rounds; round++) {
    const start = performance.now();
    const remux = (inputs, out, format) =>
      run(tools.ffmpeg, [
        ...["-v", "error", "-y"],
        ...inputs.flatMap((i) => ["-i", i]),
        ...inputs.flatMap((_, i) => ["-map", `${i}:${i === inputs.length - 1 ? "a" : "v"}:0`]),
        ...["-c", "copy", "-movflags", "+faststart", "-f", format, out],
      ]);
    await remux([tracks.high.path, tracks.audio.path], join(dir, "plain-high.mp4"), "mp4");
    await remux([tracks.low.path, tracks.audio.path], join(dir, "plain-low.mp4"), "mp4");
    await run(tools.ffmpeg, [
      ...["-v", "error", "-y", "-i", tracks.audio.path, "-map", "0:a:0"],
      ...["-c", "copy", "-movflags", "+faststart", "-f", "ipod", join(dir, "plain-audio.m4a")],
    ]);
    plainRuns.push(elapsed(start));
  }

  const sizeOf = (name) => asset.static_renditions.find((r) => r.name === name)?.size_bytes ?? 0;
  const hostMedian = median(hostRuns);
  const plainMedian = median(plainRuns);
  console.log(describeBuild());
  console.log(
    `source: ${videoSeconds} s ${width}x${height} testsrc2 (${fmt(size / 1e6, 1)} MB); high.mp4 of ${high.name}, ` +
      `low.mp4 of ${low.name}; ${rounds} rounds each; load ${loadAverage()}`,
  );
  console.log(
    table(
      ["measure", "host", "baseline", "ratio"],
      [
        [
          "PATCH standard → all three ready, median s (baseline: three plain ffmpeg -c copy on local joined tracks)",
          fmt(hostMedian, 2),
          fmt(plainMedian, 2),
          fmt(hostMedian / plainMedian),
        ],
        [
          "PATCH standard → all three ready, median s (baseline: the source's duration)",
          fmt(hostMedian, 2),
          fmt(videoSeconds, 0),
          fmt(hostMedian / videoSeconds, 3),
        ],
        [
          "high.mp4 bytes (baseline: its video and audio tracks' segments)",
          String(sizeOf("high.mp4")),
          String(tracks.high.bytes + tracks.audio.bytes),
          fmt(sizeOf("high.mp4") / (tracks.high.bytes + tracks.audio.bytes), 3),
        ],
        [
          "low.mp4 bytes (baseline: its video and audio tracks' segments)",
          String(sizeOf("low.mp4")),
          String(tracks.low.bytes + tracks.audio.bytes),
          fmt(sizeOf("low.mp4") / (tracks.low.bytes + tracks.audio.bytes), 3),
        ],
        [
          "audio.m4a bytes (baseline: the audio track's segments)",
          String(sizeOf("audio.m4a")),
          String(tracks.audio.bytes),
          fmt(sizeOf("audio.m4a") / tracks.audio.bytes, 3),
        ],
      ],
    ),
  );
} finally {
  await cleanup();
}

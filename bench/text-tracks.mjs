#!/usr/bin/env node
// Issue 27, text tracks and DASH, on the embedded default (PGlite, filesystem objects), one
// testsrc2 source uploaded and processed by the host, side by side in one run:
// - the master playlist's throughput for an asset with 2 text tracks (delivery reads the asset's
//   tracks and adds the subtitle group) against the same asset's master with none (the stored
//   bytes as they are), and the DASH manifest's likewise; no goal: what the composition costs;
// - adding a track of 2 MiB of WebVTT, and of a 2 MiB SRT, median of `--rounds` (read, converted,
//   segmented, stored, recorded), against the same body with its first timing line broken
//   (refused at line 3 before anything is stored): what reading and storing add to the request.
//
//   node bench/text-tracks.mjs              # ~1-2 min on a loaded 2-vCPU VM
//   options: --video-seconds N (60), --rounds N (5), --seconds N (5, per throughput run),
//            --connections N (16)
import { join } from "node:path";
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
} from "./lib.mjs";
import { makeVideo } from "./processing.mjs";

const args = benchArgs({
  "video-seconds": { type: "string", default: "60" },
  rounds: { type: "string", default: "5" },
  seconds: { type: "string", default: "5" },
  connections: { type: "string", default: "16" },
});
const videoSeconds = Number(args["video-seconds"]);
const rounds = Number(args.rounds);
const throughputSeconds = Number(args.seconds);
const connections = Number(args.connections);
const log = (message) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${message}\n`);

const { resolveTools } = await fromRepo("adapters/ffmpeg");
const tools = resolveTools();
const { dir, track, cleanup } = await benchScratch({ dirPrefix: "vod-bench-tracks-", log });
const elapsed = (from) => (performance.now() - from) / 1000;

/** About `bytes` of cues, one every 2 s, each cue's text padded to fill. */
const captions = (bytes, srt) => {
  const stamp = (s) => {
    const t = new Date(s * 1000).toISOString().slice(11, 23);
    return srt ? t.replace(".", ",") : t;
  };
  const cues = [];
  let size = 0;
  for (let i = 0; size < bytes - 200; i++) {
    const text = `cue ${i} ${"lorem ipsum dolor sit amet ".repeat(8)}`;
    const cue = `${srt ? `${i + 1}\n` : ""}${stamp(i * 2)} --> ${stamp(i * 2 + 1.5)}\n${text}\n\n`;
    if (size + cue.length > bytes - 10) break;
    cues.push(cue);
    size += cue.length;
  }
  return `${srt ? "" : "WEBVTT\n\n"}${cues.join("")}`;
};

try {
  const source = join(dir, "source.mp4");
  log(`making a ${videoSeconds} s 640x360 testsrc2 source`);
  await makeVideo(tools.ffmpeg, source, videoSeconds, { width: 640, height: 360, fps: 25 });
  const { size } = await import("node:fs/promises").then((fs) => fs.stat(source));
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
  const ready = async (title) => {
    const upload = await vod.begin(size, title);
    await vod.putParts(source, upload);
    await vod.complete(upload);
    for (;;) {
      const asset = await vod.asset(upload.assetId);
      if (asset.status === "failed") throw new Error(`asset failed: ${asset.failure_code}`);
      if (asset.status === "ready" && asset.renditions.every((r) => r.status !== "pending")) return asset;
      await sleep(500);
    }
  };
  log("processing two assets");
  const plain = await ready("no tracks");
  const captioned = await ready("two tracks");
  const addTrack = (assetId, body) =>
    callJson(vod.base, `/v1/assets/${assetId}/tracks`, { body, headers: vod.auth });
  for (const [language_code, content] of [
    ["en", captions(64 * 1024, false)],
    ["fr", captions(64 * 1024, true)],
  ])
    expectStatus("add track", await addTrack(captioned.id, { type: "text", language_code, content }), 201);

  const urlsOf = async (assetId) => {
    const session = await callJson(vod.base, "/v1/playback/sessions", {
      body: { asset_id: assetId, ttl_seconds: 86_400 },
      headers: vod.auth,
    });
    expectStatus("playback session", session, 201);
    return session.body.urls;
  };
  const [bare, withTracks] = [await urlsOf(plain.id), await urlsOf(captioned.id)];
  if (!(await (await fetch(withTracks.manifest)).text()).includes("TYPE=SUBTITLES"))
    throw new Error("the captioned asset's master lists no subtitles");

  // Alternated, three runs each, medians: the VM's load moves between runs.
  const throughput = async (a, b) => {
    const runs = { a: [], b: [] };
    for (let i = 0; i < 3; i++)
      for (const which of i % 2 === 0 ? ["a", "b"] : ["b", "a"])
        runs[which].push(
          await autocannonRps(which === "a" ? a : b, { connections, seconds: throughputSeconds }),
        );
    return { a: median(runs.a), b: median(runs.b) };
  };
  log("manifest throughput");
  const master = await throughput(withTracks.manifest, bare.manifest);
  const dash = await throughput(withTracks.dash, bare.dash);

  log("adding 2 MiB tracks");
  const MiB2 = 2 * 1024 * 1024;
  const vtt = captions(MiB2, false);
  const srt = captions(MiB2, true);
  const broken = vtt.replace(" --> ", " -> ");
  const timed = async (content, status) => {
    const times = [];
    for (let i = 0; i < rounds; i++) {
      const asset = await callJson(vod.base, "/v1/assets", { body: { title: `t${i}` }, headers: vod.auth });
      const start = performance.now();
      expectStatus(
        "track",
        await addTrack(asset.body.asset.id, { type: "text", language_code: "en", content }),
        status,
      );
      times.push(elapsed(start));
    }
    log(`${status}: ${times.map((t) => fmt(t, 3)).join(" ")}`);
    return median(times);
  };
  const srtSeconds = await timed(srt, 201);
  const vttSeconds = await timed(vtt, 201);
  const brokenSeconds = await timed(broken, 400);

  console.log(describeBuild());
  console.log(
    `source: ${videoSeconds} s 640x360 testsrc2, 2 renditions; tracks of 64 KiB on the captioned asset; ` +
      `${connections} connections x ${throughputSeconds} s per throughput run, 3 runs each; ${rounds} adds of each; load ${loadAverage()}`,
  );
  console.log(
    table(
      ["measure", "with tracks", "baseline", "ratio"],
      [
        [
          "master.m3u8, req/s (baseline: an asset without tracks, served as stored)",
          fmt(master.a, 0),
          fmt(master.b, 0),
          fmt(master.a / master.b),
        ],
        ["manifest.mpd, req/s (baseline: likewise)", fmt(dash.a, 0), fmt(dash.b, 0), fmt(dash.a / dash.b)],
        [
          `POST a 2 MiB WebVTT track, median s (baseline: the same body refused at line 3)`,
          fmt(vttSeconds, 3),
          fmt(brokenSeconds, 3),
          fmt(vttSeconds / brokenSeconds),
        ],
        [
          `POST a 2 MiB SRT track, median s (baseline: likewise)`,
          fmt(srtSeconds, 3),
          fmt(brokenSeconds, 3),
          fmt(srtSeconds / brokenSeconds),
        ],
      ],
    ),
  );
} finally {
  await cleanup();
}

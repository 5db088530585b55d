#!/usr/bin/env node
// Issue 26: one long video spread over many workers. A source of --video-seconds (5 minutes) is
// uploaded to a `vod serve` of the server set (Postgres; the host runs no jobs) and processed by
// `vod worker` processes each pinned to one core with taskset: one worker on core 0 making it in
// one job (chunking off, for reference), one worker on core 0 taking its chunk jobs, then two
// workers on cores 0 and 1 sharing them. Each timed from the complete's answer to the first read
// of the asset with no rendition pending; also when it read `ready`.
//
//   node bench/chunked-workers.mjs               # 300 s 720p source: ~10-15 min on 2 cores
//   options: --video-seconds N (300), --height N (720), --chunk-seconds N (30), --poll-ms N (250),
//            --database-url (a local Postgres server)
import { mkdir, stat } from "node:fs/promises";
import { cpus } from "node:os";
import { join } from "node:path";
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
  sleep,
  spawnNode,
  startVodHost,
  table,
} from "./lib.mjs";
import { makeVideo } from "./processing.mjs";

const args = benchArgs({
  "video-seconds": { type: "string", default: "300" },
  height: { type: "string", default: "720" },
  "chunk-seconds": { type: "string", default: "30" },
  "poll-ms": { type: "string", default: "250" },
});
const videoSeconds = Number(args["video-seconds"]);
const height = Number(args.height);
const width = Math.round((height * 16) / 9 / 2) * 2;
const chunkSeconds = Number(args["chunk-seconds"]);
const pollMs = Number(args["poll-ms"]);
const databaseUrl = args["database-url"];
const log = (message) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${message}\n`);
if (cpus().length < 2) throw new Error("two cores are needed to pin two workers apart");

const { resolveTools } = await fromRepo("adapters/ffmpeg");
const tools = resolveTools();

const schema = `vod_bench_chunks_${process.pid}_${Date.now().toString(36)}`;
const { dir, track, cleanup } = await benchScratch({
  dirPrefix: "vod-bench-chunks-",
  log,
  server: { databaseUrl, schema },
});
const dataDir = join(dir, "data");
await mkdir(dataDir);
// Every process of the set: one database, one data directory (the filesystem object store).
const common = {
  VOD_DATA_DIR: dataDir,
  VOD_DATABASE_URL: databaseUrl,
  VOD_DATABASE_SCHEMA: schema,
  VOD_FFMPEG_PATH: tools.ffmpeg,
  VOD_FFPROBE_PATH: tools.ffprobe,
  VOD_PROCESSING_CHUNK_SECONDS: String(chunkSeconds),
};

const seconds = (from) => (performance.now() - from) / 1000;

/** `vod worker` on `core`, started; chunking off when `whole`. */
const startWorker = async (core, whole) => {
  const worker = track(
    spawnNode(
      [cli, "worker"],
      {
        ...common,
        VOD_LOG_LEVEL: "info",
        VOD_WORKER_CONCURRENCY: "1",
        ...(whole ? { VOD_PROCESSING_MIN_CHUNKS: "1000000" } : {}),
      },
      ["taskset", "-c", String(core)],
    ),
  );
  await worker.waitFor(/"msg":"worker started"/);
  return worker;
};

/** Uploads the source, lets `cores` workers process it, and times ready and every rendition. */
const contest = async (vod, source, size, label, cores, whole) => {
  log(`${label}: starting ${cores.length} worker(s) on core(s) ${cores.join(", ")}`);
  const workers = await Promise.all(cores.map((core) => startWorker(core, whole)));
  const upload = await vod.begin(size, label);
  await vod.putParts(source, upload);
  await vod.complete(upload);
  const start = performance.now();
  let ready;
  for (;;) {
    const asset = await vod.asset(upload.assetId);
    if (asset.status === "failed") throw new Error(`${label}: asset failed with ${asset.failure_code}`);
    if (asset.status === "ready" && ready === undefined) {
      ready = seconds(start);
      log(`${label}: ready after ${fmt(ready)} s`);
    }
    if (asset.status === "ready" && asset.renditions.every((r) => r.status !== "pending")) {
      const all = seconds(start);
      const failed = asset.renditions.filter((r) => r.status !== "ready").map((r) => r.name);
      if (failed.length > 0) throw new Error(`${label}: renditions failed: ${failed.join(", ")}`);
      log(`${label}: every rendition after ${fmt(all)} s`);
      // Chunk runs per worker, from their logs: how the work was shared.
      const chunks = workers.map(
        (w) =>
          w
            .output()
            .split("\n")
            .filter((line) => line.includes('"msg":"chunk encoded"') && line.includes(upload.assetId)).length,
      );
      await Promise.all(workers.map((w) => w.stop()));
      return { ready, all, chunks };
    }
    await sleep(pollMs);
  }
};

try {
  const source = join(dir, "source.mp4");
  log(`making a ${videoSeconds} s ${width}x${height} test source (testsrc2 + sine)`);
  await makeVideo(tools.ffmpeg, source, videoSeconds, { width, height, fps: 30 });
  const size = (await stat(source)).size;
  // The API host runs no jobs: only the pinned workers encode.
  const vod = await startVodHost({
    cli,
    dataDir,
    env: { ...common, VOD_WORKER_CONCURRENCY: "0", VOD_RATE_LIMIT_API_PER_MINUTE: "100000000" },
    track,
  });
  // The run outlasts an access token (15 minutes): the asset calls carry an API key instead.
  const key = await callJson(vod.base, "/v1/api-keys", {
    body: { name: "bench", scopes: ["write"] },
    headers: vod.auth,
  });
  expectStatus("create API key", key, 201);
  delete vod.auth.authorization;
  vod.auth["x-api-key"] = key.body.key;

  const whole = await contest(vod, source, size, "one worker, one job", [0], true);
  const one = await contest(vod, source, size, "one worker, chunked", [0], false);
  const two = await contest(vod, source, size, "two workers, chunked", [0, 1], false);

  const row = (label, r) => [
    label,
    fmt(r.ready),
    fmt(r.all),
    fmt(r.all / one.all),
    r.chunks.some((n) => n > 0) ? r.chunks.join(" + ") : "-",
  ];
  console.log(
    `chunked workers: ${videoSeconds} s ${width}x${height} source, chunks of ${chunkSeconds} s, ` +
      `each worker pinned to one core (taskset); load average ${loadAverage()} ${describeBuild()}\n`,
  );
  console.log(
    table(
      ["", "ready (s)", "no rendition pending (s)", "/ one worker chunked", "chunks per worker"],
      [
        row("one worker, one job (chunking off, reference)", whole),
        row("one worker, chunked", one),
        row("two workers, chunked", two),
      ],
    ),
  );
  console.log(`\ntwo workers / one worker: ${fmt(two.all / one.all)} (issue 26 asks <= 0.60)`);
} finally {
  await cleanup();
}

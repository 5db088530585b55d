#!/usr/bin/env node
// `vod upload` (the CLI on @vod/client) against the same parts sent by curl, and a killed upload
// resumed. `vod serve` on the embedded default, a real MP4 of --size-mib made by ffmpeg (x264 at a
// constant bitrate padded with filler data, so the size is bitrate x duration).
//
// 1. Throughput, --rounds rounds after one untimed warm-up of each, the two clients alternating:
//    `vod upload FILE --parallel N` against one `curl --parallel --parallel-max N` run PUTting the
//    same parts (the file split beforehand). Both are timed over the same steps, start the upload
//    session, send the parts, complete: the CLI's own figure ("uploaded … in S s") and, for curl,
//    the bench's clock around POST /v1/uploads, the curl run and the completion. Target: vod / curl
//    >= 0.9. The whole command, process start to exit (node's start, the asset's creation and the
//    state file included), is shown beside it.
// 2. Resume: `vod upload FILE --wait` SIGKILLed once --kill-at of the file has gone through a relay
//    that counts every byte sent to the host (VOD_MEDIA_URL names the relay, so the part URLs do),
//    then run again: bytes sent in all over the file's size (target <= 1.15), ready, and whether
//    ffprobe reads the playback URL printed.
//
//   node bench/cli-upload.mjs               # 200 MiB, 5 rounds, --parallel 4
//   options: --size-mib N, --rounds N, --parallel N, --kill-at F
import { execFile, spawn } from "node:child_process";
import { createReadStream } from "node:fs";
import { open, stat } from "node:fs/promises";
import { connect, createServer } from "node:net";
import { join } from "node:path";
import { parseArgs, promisify } from "node:util";
import {
  benchScratch,
  callJson,
  cli,
  describeBuild,
  expectStatus,
  fmt,
  loadAverage,
  MiB,
  median,
  pageCacheLeveller,
  partsOf,
  sleep,
  spread,
  startVodHost,
  table,
  verdict,
} from "./lib.mjs";

const { values: args } = parseArgs({
  options: {
    "size-mib": { type: "string", default: "200" },
    rounds: { type: "string", default: "5" },
    parallel: { type: "string", default: "4" },
    "kill-at": { type: "string", default: "0.4" },
  },
});
const sizeMiB = Number(args["size-mib"]);
const rounds = Number(args.rounds);
const parallel = Number(args.parallel);
const killAt = Number(args["kill-at"]);
const log = (message) => process.stderr.write(`[cli-upload] ${message}\n`);
const run = promisify(execFile);

/** A TCP relay counting the bytes clients send through it, to the port given later by `to`. */
const countingRelay = async () => {
  let sent = 0;
  let target;
  const server = createServer((socket) => {
    const upstream = connect(target, "127.0.0.1");
    socket.on("data", (chunk) => {
      sent += chunk.length;
    });
    socket.pipe(upstream).pipe(socket);
    socket.on("error", () => upstream.destroy());
    upstream.on("error", () => socket.destroy());
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: server.address().port,
    to: (port) => {
      target = port;
    },
    sent: () => sent,
    close: () => {
      server.close();
    },
  };
};

/** `vod <args>` to its exit: code, signal, stdout, stderr, seconds. */
const vod = (argv, env, { onSpawn } = {}) =>
  new Promise((resolve) => {
    const started = performance.now();
    const child = spawn(process.execPath, [cli, ...argv], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    onSpawn?.(child);
    child.once("close", (code, signal) =>
      resolve({ code, signal, stdout, stderr, seconds: (performance.now() - started) / 1000 }),
    );
  });

const { dir: scratch, track, cleanup } = await benchScratch({ dirPrefix: "vod-bench-cli-upload-", log });
try {
  log(`load average ${loadAverage()}; ${describeBuild()}`);
  const file = join(scratch, "source.mp4");
  const seconds = 20;
  const bitrate = `${Math.round((sizeMiB * MiB * 8) / seconds / 1e6)}M`;
  log(`making a ${sizeMiB} MiB MP4 (${seconds} s at ${bitrate}bit/s)`);
  await run("ffmpeg", [
    ...["-v", "error", "-y", "-f", "lavfi", "-i", `testsrc2=size=640x360:rate=30:duration=${seconds}`],
    ...["-f", "lavfi", "-i", `sine=frequency=440:duration=${seconds}`],
    ...["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"],
    ...["-b:v", bitrate, "-minrate", bitrate, "-maxrate", bitrate, "-bufsize", bitrate],
    ...["-x264-params", "nal-hrd=cbr", "-c:a", "aac", "-movflags", "+faststart", file],
  ]);
  const size = (await stat(file)).size;

  // --- 1. throughput ---------------------------------------------------------------------------
  const host = await startVodHost({
    cli,
    dataDir: join(scratch, "throughput"),
    // No processing: the rounds measure uploads, not the transcodes of the rounds before.
    env: { VOD_WORKER_CONCURRENCY: "0", VOD_RATE_LIMIT_API_PER_MINUTE: "100000000" },
    parallel,
    track,
  });
  const key = await callJson(host.base, "/v1/api-keys", {
    body: { name: "bench", scopes: ["write"] },
    headers: host.auth,
  });
  expectStatus("api key", key, 201);
  const cliEnv = { VOD_API_URL: host.base, VOD_API_KEY: key.body.key, VOD_STATE_DIR: join(scratch, "state") };

  // The parts as files for curl, split once, untimed: curl cannot send a range of one file.
  const probe = await host.begin(size, "part size");
  const parts = partsOf(size, probe.part_size);
  const source = await open(file);
  for (const p of parts) {
    const bytes = Buffer.alloc(p.length);
    await source.read(bytes, 0, p.length, p.start);
    const out = await open(join(scratch, `part-${p.number}`), "w");
    await out.write(bytes);
    await out.close();
  }
  await source.close();

  // Each timed upload starts from the same state: earlier rounds' writes flushed, the page cache
  // dropped and the bytes the client reads read back into it (pageCacheLeveller; only a sync where
  // the cache cannot be dropped).
  const leveller = pageCacheLeveller();
  const level = async ([first, ...rest]) => {
    await run("sync");
    if (!leveller) return;
    // The leveller drops the cache and reads its file back; the others are read after it.
    await leveller(first);
    for (const f of rest) for await (const _ of createReadStream(f, { highWaterMark: 8 * MiB }));
  };
  const partFiles = parts.map((p) => join(scratch, `part-${p.number}`));

  const curlRound = async (round) => {
    const created = await callJson(host.base, "/v1/assets", {
      body: { title: `curl ${round}` },
      headers: host.auth,
    });
    expectStatus("create asset", created, 201);
    await level(partFiles);
    const started = performance.now();
    const begun = await callJson(host.base, "/v1/uploads", {
      body: { asset_id: created.body.asset.id, size_bytes: size },
      headers: host.auth,
    });
    expectStatus("start upload", begun, 201);
    const upload = begun.body.upload;
    const argv = ["--silent", "--show-error", "--fail", "--parallel", "--parallel-max", String(parallel)];
    for (const part of upload.parts)
      argv.push("-T", join(scratch, `part-${part.number}`), part.url, "-o", "/dev/null");
    await run("curl", argv, { maxBuffer: 16 * MiB });
    await host.complete(upload);
    return (performance.now() - started) / 1000;
  };
  const vodRound = async () => {
    await level([file]);
    const result = await vod(["upload", file, "--parallel", String(parallel)], cliEnv);
    if (result.code !== 0) throw new Error(`vod upload: ${result.code}\n${result.stderr}`);
    const own = /uploaded [\d.]+ MiB in ([\d.]+) s/.exec(result.stdout);
    if (!own) throw new Error(`vod upload printed no time:\n${result.stdout}`);
    return { upload: Number(own[1]), command: result.seconds };
  };

  // The first upload to a fresh host runs on its cold code: one of each, untimed.
  await vodRound();
  await curlRound("warm-up");
  const vodSeconds = [];
  const commandSeconds = [];
  const curlSeconds = [];
  for (let round = 0; round < rounds; round++) {
    // Alternating which goes first: neither always meets the other's leftovers.
    const vodOnce = async () => {
      const { upload, command } = await vodRound();
      vodSeconds.push(upload);
      commandSeconds.push(command);
    };
    if (round % 2 === 0) {
      await vodOnce();
      curlSeconds.push(await curlRound(round));
    } else {
      curlSeconds.push(await curlRound(round));
      await vodOnce();
    }
    log(
      `round ${round + 1}: vod upload ${fmt(vodSeconds.at(-1))} s (command ${fmt(commandSeconds.at(-1))} s), ` +
        `curl ${fmt(curlSeconds.at(-1))} s`,
    );
    await sleep(500);
  }
  await host.host.stop();

  // --- 2. kill and resume ----------------------------------------------------------------------
  const relay = await countingRelay();
  const relayUrl = `http://127.0.0.1:${relay.port}`;
  const resumeHost = await startVodHost({
    cli,
    dataDir: join(scratch, "resume"),
    env: {
      VOD_WORKER_CONCURRENCY: "1",
      VOD_BASE_URL: relayUrl,
      VOD_MEDIA_URL: relayUrl,
      VOD_DRM_URL: relayUrl,
    },
    track,
  });
  relay.to(Number(new URL(resumeHost.base).port));
  const resumeKey = await callJson(resumeHost.base, "/v1/api-keys", {
    body: { name: "bench", scopes: ["write"] },
    headers: resumeHost.auth,
  });
  const resumeEnv = {
    VOD_API_URL: relayUrl,
    VOD_API_KEY: resumeKey.body.key,
    VOD_STATE_DIR: join(scratch, "resume-state"),
  };
  const waitArgs = ["upload", file, "--wait", "--parallel", String(parallel)];
  const before = relay.sent();
  const killed = await vod(waitArgs, resumeEnv, {
    onSpawn: (child) => {
      const timer = setInterval(() => {
        if (relay.sent() - before >= killAt * size) {
          clearInterval(timer);
          child.kill("SIGKILL");
        }
      }, 2);
    },
  });
  const atKill = relay.sent() - before;
  const resumed = await vod(waitArgs, resumeEnv);
  if (resumed.code !== 0) throw new Error(`vod upload (resumed): ${resumed.code}\n${resumed.stderr}`);
  const sentRatio = (relay.sent() - before) / size;
  const stored = /resuming upload \S+ (\d+) of (\d+) parts/.exec(resumed.stderr);
  const url = /ready: (\S+)/.exec(resumed.stdout)?.[1];
  const ffprobe = await run("ffprobe", [
    "-v",
    "error",
    "-show_entries",
    "stream=codec_type",
    "-of",
    "csv=p=0",
    url,
  ]).then(
    (r) => r.stdout.trim().split("\n").join("+"),
    (e) => `failed: ${e.message}`,
  );
  relay.close();

  const throughput = (s) => size / MiB / s;
  const vodMiBs = vodSeconds.map(throughput);
  const commandMiBs = commandSeconds.map(throughput);
  const curlMiBs = curlSeconds.map(throughput);
  const ratios = vodSeconds.map((s, i) => curlSeconds[i] / s);
  console.log(
    `\nvod upload: ${fmt(size / MiB, 1)} MiB real MP4, --parallel ${parallel}, median of ${rounds} round(s), ` +
      `${leveller ? "page cache levelled before each upload" : "page cache not levelled (needs root)"}; ` +
      `load average at the end ${loadAverage()} ${describeBuild()}\n`,
  );
  console.log(
    table(
      ["measure", "target", "value", "verdict"],
      [
        [
          "vod upload, MiB/s (start, parts, complete)",
          "—",
          `${fmt(median(vodMiBs), 1)}${spread(vodMiBs, 1)}`,
          "",
        ],
        [
          "curl --parallel PUTs, MiB/s (start, parts, complete)",
          "—",
          `${fmt(median(curlMiBs), 1)}${spread(curlMiBs, 1)}`,
          "",
        ],
        [
          "vod upload / curl throughput",
          "≥ 0.90",
          `${fmt(median(ratios))}${spread(ratios)}`,
          verdict(median(ratios) >= 0.9),
        ],
        [
          "vod upload, the whole command, MiB/s (process start to exit)",
          "—",
          `${fmt(median(commandMiBs), 1)}${spread(commandMiBs, 1)}`,
          "",
        ],
        [
          `killed at ${fmt((100 * atKill) / size, 0)}% sent (${killed.signal}), run again: parts already stored`,
          "—",
          stored ? `${stored[1]} of ${stored[2]}` : "none found",
          "",
        ],
        ["bytes sent in all / file size", "≤ 1.15", fmt(sentRatio, 3), verdict(sentRatio <= 1.15)],
        [
          "resumed run reached ready; ffprobe of the URL printed",
          "video",
          ffprobe,
          verdict(ffprobe.includes("video")),
        ],
      ],
    ),
  );
} finally {
  await cleanup();
}

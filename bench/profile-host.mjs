#!/usr/bin/env node
// A CPU profile of the host's main thread while it works, and where that time went, by package and
// by function. Two modes:
//   upload      part PUTs of the random bytes as upload-and-processing.mjs sends them (8 MiB
//               parts, 4 in flight), on a host with no worker
//   processing  from upload-complete to ready of the test video, on a host with one worker, the
//               asset polled every --poll-ms (what the host does beside ffmpeg)
//
//   node bench/profile-host.mjs [--mode upload|processing] [--size-mib 1024] [--storage postgres|memory]
//                               [--video-seconds 30] [--poll-ms 250] [--top 30]
import { mkdir, mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import {
  cli,
  cpuSeconds,
  fromRepo,
  MiB,
  makeRandomFile,
  sleep,
  startVodHost,
  summarizeCpuProfile,
  table,
} from "./lib.mjs";
import { makeVideo } from "./processing.mjs";

const { values: args } = parseArgs({
  options: {
    mode: { type: "string", default: "upload" },
    "size-mib": { type: "string", default: "1024" },
    storage: { type: "string", default: "postgres" },
    "video-seconds": { type: "string", default: "30" },
    "poll-ms": { type: "string", default: "250" },
    top: { type: "string", default: "30" },
  },
});
if (!["upload", "processing"].includes(args.mode)) throw new Error(`bad --mode ${args.mode}`);
const SIZE = Number(args["size-mib"]) * MiB;
const pollMs = Number(args["poll-ms"]);
const top = Number(args.top);

/** The profile's sample clock is the monotonic clock process.hrtime reads, in microseconds. */
const micros = () => Number(process.hrtime.bigint() / 1000n);

const scratch = await mkdtemp(join(tmpdir(), "vod-bench-profile-"));
try {
  const profiles = join(scratch, "profiles");
  await mkdir(profiles);
  const { resolveTools } = await fromRepo("adapters/ffmpeg");
  const tools = resolveTools();
  const vod = await startVodHost({
    cli,
    dataDir: join(scratch, "data"),
    env: {
      VOD_STORAGE: args.storage,
      VOD_WORKER_CONCURRENCY: args.mode === "upload" ? "0" : "1",
      VOD_FFMPEG_PATH: tools.ffmpeg,
      VOD_FFPROBE_PATH: tools.ffprobe,
    },
    nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${profiles}`, "--cpu-prof-interval=500"],
  });
  let from;
  let to;
  let what;
  const before = { cpu: undefined };
  if (args.mode === "upload") {
    const file = join(scratch, "random.bin");
    await makeRandomFile(file, SIZE);
    await vod.putParts(file, await vod.begin(64 * MiB, "warm-up"));
    const upload = await vod.begin(SIZE, "profiled");
    before.cpu = await cpuSeconds(vod.host.child.pid);
    from = micros();
    await vod.putParts(file, upload);
    to = micros();
    what = `${SIZE / MiB} MiB of part PUTs in ${((to - from) / 1e6).toFixed(2)} s (${(SIZE / 1e6 / ((to - from) / 1e6)).toFixed(0)} MB/s)`;
  } else {
    const source = join(scratch, "source.mp4");
    await makeVideo(tools.ffmpeg, source, Number(args["video-seconds"]));
    const upload = await vod.begin((await stat(source)).size, "profiled");
    await vod.putParts(source, upload);
    await vod.complete(upload);
    before.cpu = await cpuSeconds(vod.host.child.pid);
    from = micros();
    for (let i = 0; ; i++) {
      const asset = await vod.asset(upload.assetId);
      if (asset.status === "ready" || asset.status === "failed") break;
      if (i * pollMs > 15 * 60_000) throw new Error(`asset still ${asset.status}`);
      await sleep(pollMs);
    }
    to = micros();
    what = `upload-complete → ready in ${((to - from) / 1e6).toFixed(2)} s, asset polled every ${pollMs} ms`;
  }
  const after = await cpuSeconds(vod.host.child.pid);
  await vod.host.stop();

  const name = (await readdir(profiles)).find((f) => f.endsWith(".cpuprofile"));
  if (!name) throw new Error(`no profile written:\n${vod.host.output()}`);
  const { total, places, functions } = summarizeCpuProfile(
    JSON.parse(await readFile(join(profiles, name), "utf8")),
    [[from, to]],
    top,
  );
  console.log(
    `\n${what} (storage ${args.storage}); host process CPU meanwhile ` +
      `${(after.user - before.cpu.user).toFixed(2)} s user + ${(after.system - before.cpu.system).toFixed(2)} s system ` +
      `(all threads); its main thread busy ${(total / 1e6).toFixed(2)} s\n`,
  );
  console.log(table(["where (main thread)", "self s", "share"], places));
  console.log();
  console.log(table(["function (main thread)", "self s", "share"], functions));
  console.log();
} finally {
  await rm(scratch, { recursive: true, force: true });
}

#!/usr/bin/env node
// Where the host's part PUT time goes: the same client and bytes as upload-and-processing.mjs
// against node:http servers that each add one thing the host does (servers/variants.mjs), then
// the filesystem store's receivePart alone, then the whole host (memory storage, then PGlite).
//
//   node bench/receive-part-breakdown.mjs [--size-mib 1024] [--rounds 3]
import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import {
  cli,
  cpuSeconds,
  keepAliveAgent,
  MiB,
  makeRandomFile,
  median,
  putPartsToServer,
  sampleRss,
  sleep,
  spawnNode,
  startVodHost,
  table,
} from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: { "size-mib": { type: "string", default: "1024" }, rounds: { type: "string", default: "3" } },
});
const SIZE = Number(args["size-mib"]) * MiB;
const rounds = Number(args.rounds);
if (!(SIZE > 0 && rounds >= 1 && rounds <= 20)) throw new Error("bad --size-mib or --rounds");
const PART = 8 * MiB;
const PARALLEL = 4;
const log = (...parts) => console.error(`[${new Date().toISOString().slice(11, 19)}]`, ...parts);
const now = () => process.hrtime.bigint();
const seconds = (start) => Number(process.hrtime.bigint() - start) / 1e9;

const cpuUsed = async (pid, before) => {
  const after = await cpuSeconds(pid);
  return { user: after.user - before.user, system: after.system - before.system };
};

const scratch = await mkdtemp(join(tmpdir(), "vod-bench-breakdown-"));
const stops = [];
try {
  const file = join(scratch, "random.bin");
  await makeRandomFile(file, SIZE);

  const variant = async (name) => {
    const dir = join(scratch, name);
    await mkdir(dir);
    const server = spawnNode([join(here, "servers/variants.mjs"), name, dir]);
    stops.push(server.stop);
    const port = Number((await server.waitFor(/listening (\d+)/))[1]);
    const agent = keepAliveAgent(PARALLEL);
    return {
      name,
      pid: server.child.pid,
      run: async (size) => {
        const cpu = await cpuSeconds(server.child.pid);
        const start = now();
        await putPartsToServer({ agent, port, file, size, partSize: PART, parallel: PARALLEL, name });
        const took = seconds(start);
        const used = await cpuUsed(server.child.pid, cpu);
        await rm(dir, { recursive: true, force: true });
        await mkdir(dir);
        return { took, ...used };
      },
    };
  };
  const host = async (storage) => {
    const dataDir = join(scratch, `host-${storage}`);
    const vod = await startVodHost({
      cli,
      dataDir,
      env: { VOD_STORAGE: storage, VOD_WORKER_CONCURRENCY: "0" },
      parallel: PARALLEL,
    });
    stops.push(vod.host.stop);
    let n = 0;
    return {
      name: `host (${storage})`,
      pid: vod.host.child.pid,
      run: async (size) => {
        const upload = await vod.begin(size, `breakdown ${++n}`);
        const cpu = await cpuSeconds(vod.host.child.pid);
        const start = now();
        await vod.putParts(file, upload);
        const took = seconds(start);
        const used = await cpuUsed(vod.host.child.pid, cpu);
        // Not completed: the parts are removed with the upload's directory.
        await rm(join(dataDir, "objects", ".multipart", upload.id), { recursive: true, force: true });
        return { took, ...used };
      },
    };
  };

  const servers = [
    await variant("pipe"),
    await variant("fsync"),
    await variant("sha256"),
    await variant("sha256+fsync"),
    await variant("pipe-1m"),
    await variant("handle-1m"),
    await variant("express-store"),
    await variant("store"),
    await host("memory"),
    await host("postgres"),
  ];
  for (const s of servers) await s.run(64 * MiB);
  const times = Object.fromEntries(servers.map((s) => [s.name, []]));
  const cpu = Object.fromEntries(servers.map((s) => [s.name, []]));
  const peaks = Object.fromEntries(servers.map((s) => [s.name, 0]));
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < servers.length; i++) {
      const s = servers[(i + round) % servers.length];
      execFileSync("sync");
      await sleep(300);
      const sampler = sampleRss(s.pid);
      const { took, user, system } = await s.run(SIZE);
      cpu[s.name].push({ user, system });
      peaks[s.name] = Math.max(peaks[s.name], (await sampler.stop()).peakKiB);
      times[s.name].push(took);
      log(
        `round ${round + 1} ${s.name}: ${took.toFixed(2)} s, ${(SIZE / 1e6 / took).toFixed(0)} MB/s, ` +
          `server CPU ${user.toFixed(2)} user + ${system.toFixed(2)} sys`,
      );
    }
  }
  const rows = servers.map((s) => {
    const t = median(times[s.name]);
    const ratio = median(times[s.name].map((x, i) => times.pipe[i] / x));
    return [
      s.name,
      `${t.toFixed(2)} (${times[s.name].map((x) => x.toFixed(2)).join(", ")})`,
      (SIZE / 1e6 / t).toFixed(0),
      ratio.toFixed(2),
      median(cpu[s.name].map((c) => c.user)).toFixed(2),
      median(cpu[s.name].map((c) => c.system)).toFixed(2),
      `${(peaks[s.name] / 1024).toFixed(0)} MiB`,
    ];
  });
  console.log(
    `\n${new Date().toISOString()}  ${SIZE / MiB} MiB, ${PART / MiB} MiB parts, ${PARALLEL} in flight, ${rounds} round(s)\n`,
  );
  console.log(
    table(
      [
        "server",
        "seconds (rounds)",
        "MB/s",
        "ratio to pipe",
        "server CPU user s",
        "server CPU sys s",
        "peak RSS",
      ],
      rows,
    ),
  );
  console.log();
} finally {
  await Promise.all(stops.map((stop) => stop()));
  await rm(scratch, { recursive: true, force: true });
}

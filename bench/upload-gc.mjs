#!/usr/bin/env node
// Full (mark-compact) GCs while the host takes part PUTs after a pause, with the host's heap
// tuning (VOD_HEAP_GROWING_PERCENT, default 200) and without it (0: V8's own), beside the bare
// pipe. Each server runs with --trace-gc; before each upload it sits idle for --idle-ms, as a
// server does between uploads, long enough for V8's memory reducer to shrink its heap.
//
//   node bench/upload-gc.mjs [--size-mib 1024] [--rounds 3] [--idle-ms 10000]
import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import {
  cli,
  cpuSeconds,
  describeBuild,
  keepAliveAgent,
  MiB,
  makeRandomFile,
  median,
  pageCacheLeveller,
  putPartsToServer,
  sleep,
  spawnNode,
  startVodHost,
  table,
} from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    "size-mib": { type: "string", default: "1024" },
    rounds: { type: "string", default: "3" },
    "idle-ms": { type: "string", default: "10000" },
  },
});
const SIZE = Number(args["size-mib"]) * MiB;
const rounds = Number(args.rounds);
const idleMs = Number(args["idle-ms"]);
if (!(SIZE > 0 && rounds >= 1 && rounds <= 20 && idleMs >= 0))
  throw new Error("bad --size-mib, --rounds or --idle-ms");
const PART = 8 * MiB;
const PARALLEL = 4;
const log = (...parts) => console.error(`[${new Date().toISOString().slice(11, 19)}]`, ...parts);

/**
 * Counts of `pid`'s --trace-gc lines: full GCs and scavenges, and the full GCs' pause time. By pid,
 * because the host's database process inherits the flag and writes to the same output.
 */
const gcCounts = (text, pid) => {
  const counts = { full: 0, fullMs: 0, scavenges: 0 };
  const line = new RegExp(`^\\[${pid}:[^\\]]*\\][^:]*: (Mark-Compact|Scavenge)\\b[^,]*, ([\\d.]+) \\/`, "gm");
  for (const match of text.matchAll(line)) {
    if (match[1] === "Mark-Compact") {
      counts.full++;
      counts.fullMs += Number(match[2]);
    } else counts.scavenges++;
  }
  return counts;
};

/** As upload-and-processing.mjs: every upload starts from the same page cache (root, Linux). */
const evenPageCache = pageCacheLeveller();

const scratch = await mkdtemp(join(tmpdir(), "vod-bench-gc-"));
const stops = [];
try {
  const file = join(scratch, "random.bin");
  await makeRandomFile(file, SIZE);

  const bare = async () => {
    const dir = join(scratch, "bare");
    await mkdir(dir);
    const server = spawnNode(["--trace-gc", join(here, "servers/bare-put.mjs"), dir]);
    stops.push(server.stop);
    const port = Number((await server.waitFor(/listening (\d+)/))[1]);
    const agent = keepAliveAgent(PARALLEL);
    return {
      name: "limit: bare node:http PUT → file",
      process: server,
      upload: async () => {
        await putPartsToServer({
          agent,
          port,
          file,
          size: SIZE,
          partSize: PART,
          parallel: PARALLEL,
          name: "bare",
        });
        await rm(dir, { recursive: true, force: true });
        await mkdir(dir);
      },
    };
  };
  const host = async (name, percent) => {
    const dataDir = join(scratch, `host-${percent ?? "default"}`);
    const env = { VOD_WORKER_CONCURRENCY: "0" };
    if (percent !== undefined) env.VOD_HEAP_GROWING_PERCENT = String(percent);
    const vod = await startVodHost({ cli, dataDir, env, nodeArgs: ["--trace-gc"], parallel: PARALLEL });
    stops.push(vod.host.stop);
    let n = 0;
    return {
      name,
      process: vod.host,
      upload: async () => {
        const upload = await vod.begin(SIZE, `gc ${++n}`);
        await vod.putParts(file, upload);
        // Not completed: the parts go with the upload's directory.
        await rm(join(dataDir, "objects", ".multipart", upload.id), { recursive: true, force: true });
      },
    };
  };

  const servers = [
    await bare(),
    await host("vod host (PGlite), heap growing percent 200 (default)"),
    await host("vod host (PGlite), VOD_HEAP_GROWING_PERCENT=0 (V8's own)", 0),
  ];
  for (const s of servers) await s.upload();
  const results = new Map(servers.map((s) => [s.name, []]));
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < servers.length; i++) {
      const s = servers[(i + round) % servers.length];
      execFileSync("sync");
      await evenPageCache?.(file);
      await sleep(idleMs);
      const pid = s.process.child.pid;
      const traced = s.process.output().length;
      const cpu = await cpuSeconds(pid);
      const start = process.hrtime.bigint();
      await s.upload();
      const took = Number(process.hrtime.bigint() - start) / 1e9;
      const after = await cpuSeconds(pid);
      const gc = gcCounts(s.process.output().slice(traced), pid);
      const row = { took, user: after.user - cpu.user, system: after.system - cpu.system, ...gc };
      results.get(s.name).push(row);
      log(
        `round ${round + 1} ${s.name}: ${took.toFixed(2)} s, CPU ${row.user.toFixed(2)} user + ` +
          `${row.system.toFixed(2)} sys, ${gc.full} full GCs (${gc.fullMs.toFixed(0)} ms), ${gc.scavenges} scavenges`,
      );
    }
  }
  const limit = results.get(servers[0].name);
  const rows = servers.map((s) => {
    const r = results.get(s.name);
    const each = (f, digits = 2) => r.map((x) => f(x).toFixed(digits)).join(", ");
    return [
      s.name,
      `${median(r.map((x) => x.took)).toFixed(2)} (${each((x) => x.took)})`,
      median(r.map((x, i) => limit[i].took / x.took)).toFixed(2),
      `${median(r.map((x) => x.user)).toFixed(2)} (${each((x) => x.user)})`,
      median(r.map((x) => x.system)).toFixed(2),
      `${median(r.map((x) => x.full))} (${each((x) => x.full, 0)})`,
      median(r.map((x) => x.scavenges)).toFixed(0),
    ];
  });
  console.log(
    `\n${new Date().toISOString()}  ${describeBuild()}\n${SIZE / MiB} MiB, ${PART / MiB} MiB parts, ` +
      `${PARALLEL} in flight, ${rounds} round(s), idle ${idleMs} ms before each upload, page cache ` +
      `${evenPageCache ? "dropped and the source read back" : "as left"}\n`,
  );
  console.log(
    table(
      [
        "server",
        "seconds (rounds)",
        "ratio to limit",
        "CPU user s (rounds)",
        "CPU sys s",
        "full GCs (rounds)",
        "scavenges",
      ],
      rows,
    ),
  );
  console.log();
} finally {
  await Promise.all(stops.map((stop) => stop()));
  await rm(scratch, { recursive: true, force: true });
}

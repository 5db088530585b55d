#!/usr/bin/env node
// Where each API hot path's time goes, per request: CPU of the host's main process, of its
// embedded database process, of the Postgres server's backends and of Redis, and of the load
// generator, each in microseconds per request; with --profile, the CPU profile by function of the host and of its database process.
//
// On the server set the Postgres column counts the host's own backends only (found by the client
// ports of its connections), so other work on the machine's Postgres does not count.
//
//   node bench/profile-api.mjs [--set embedded|server] [--duration 5] [--connections 50]
//                              [--paths limit50,limit1,me] [--profile] [--top 25] [--keep-profile FILE]
//                              [--title-pad N]
//   (--keep-profile keeps the host's profile as FILE and the database process's as FILE.db;
//   --title-pad lengthens each asset's title by N characters: builds whose asset replies differ
//   in size compared at the same reply bytes)
import { execFileSync } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  apiHotPaths,
  benchArgs,
  childPids,
  cli,
  cpuSeconds,
  dropBenchSchema,
  fromRepo,
  repo,
  spawnNode,
  startVodHost,
  summarizeCpuProfile,
  table,
} from "./lib.mjs";

const args = benchArgs(
  {
    set: { type: "string", default: "embedded" },
    duration: { type: "string", default: "5" },
    connections: { type: "string", default: "50" },
    paths: { type: "string", default: "limit50,limit1,me" },
    profile: { type: "boolean", default: false },
    top: { type: "string", default: "25" },
    "keep-profile": { type: "string" },
    "title-pad": { type: "string", default: "0" },
  },
  { redis: true },
);
const duration = Number(args.duration);
const server = args.set === "server";
const tag = `${process.pid}_${Date.now().toString(36)}`;
const schema = `vod_bench_prof_${tag}`;
const micros = () => Number(process.hrtime.bigint() / 1000n);

/** Total CPU seconds of every process whose command is `comm` (the Postgres backends, Redis). */
const cpuOfCommand = async (comm) => {
  let total = 0;
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = await readFile(`/proc/${name}/stat`, "utf8");
      if (stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")) !== comm) continue;
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      total += (Number(fields[11]) + Number(fields[12])) / 100;
    } catch {
      // exited while listing
    }
  }
  return total;
};
/**
 * The Postgres backends serving `pid`'s connections: their client ports, from ss, looked up in
 * pg_stat_activity (on one machine the client port names one connection).
 */
const backendsOf = async (pid, admin) => {
  const serverPort = new URL(args["database-url"]).port || "5432";
  const listing = execFileSync("ss", ["-Htnp", "state", "established", `( dport = :${serverPort} )`], {
    encoding: "utf8",
  });
  const ports = [...listing.matchAll(/:(\d+)\s+\S+:\d+\s+users:\(.*?pid=(\d+)/g)]
    .filter((m) => Number(m[2]) === pid)
    .map((m) => Number(m[1]));
  if (ports.length === 0) return [];
  const { rows } = await admin.query("SELECT pid FROM pg_stat_activity WHERE client_port = ANY($1::int[])", [
    ports,
  ]);
  return rows.map((r) => r.pid);
};
const cpuOf = async (pid) => {
  const c = await cpuSeconds(pid);
  return c.user + c.system;
};

const admin = server
  ? (await fromRepo("adapters/postgres")).connectPostgres({
      connectionString: args["database-url"],
      poolSize: 1,
    })
  : undefined;
const scratch = await mkdtemp(join(tmpdir(), "vod-bench-profile-api-"));
const profiles = join(scratch, "profiles");
await mkdir(profiles);
let vod;
try {
  vod = await startVodHost({
    cli,
    dataDir: join(scratch, "data"),
    env: {
      VOD_WORKER_CONCURRENCY: "0",
      VOD_RATE_LIMIT_API_PER_MINUTE: "100000000",
      ...(server
        ? {
            VOD_DATABASE_URL: args["database-url"],
            VOD_DATABASE_SCHEMA: schema,
            VOD_REDIS_URL: args["redis-url"],
            VOD_REDIS_KEY_PREFIX: `vod-bench-prof:${tag}:`,
          }
        : {}),
    },
    nodeArgs: args.profile ? ["--cpu-prof", `--cpu-prof-dir=${profiles}`, "--cpu-prof-interval=200"] : [],
  });
  const all = Object.fromEntries(
    (await apiHotPaths(vod, { titlePad: Number(args["title-pad"]) })).map((path) => [path.id, path]),
  );
  const hostPid = vod.host.child.pid;
  const dbPids = await childPids(hostPid);
  const rows = [];
  const windows = [];
  for (const name of args.paths.split(",")) {
    const path = all[name];
    const flags = Object.entries(path.headers).flatMap(([h, v]) => ["-H", `${h}=${v}`]);
    const run = (seconds) =>
      spawnNode([
        join(repo, "node_modules/autocannon/autocannon.js"),
        "-c",
        args.connections,
        "-d",
        String(seconds),
        "-j",
        ...flags,
        path.url,
      ]);
    const warm = run(1);
    await new Promise((r) => warm.child.once("exit", r));
    // After the warm-up, which opened the pool's connections.
    const backends = admin ? await backendsOf(hostPid, admin) : [];
    // Each backend's CPU, or NaN for one whose connection closed: such a backend counts nothing
    // (NaN - x is NaN, dropped from the sum), rather than its whole past as negative.
    const postgresCpu = async () => Promise.all(backends.map((pid) => cpuOf(pid).catch(() => Number.NaN)));
    const postgresDelta = (after, before) =>
      after.reduce((total, a, i) => (Number.isNaN(a - before[i]) ? total : total + a - before[i]), 0);
    const before = {
      host: await cpuOf(hostPid),
      db: (await Promise.all(dbPids.map(cpuOf))).reduce((a, b) => a + b, 0),
      postgres: await postgresCpu(),
      redis: await cpuOfCommand("redis-server"),
    };
    const from = micros();
    const runner = run(duration);
    const loadPid = runner.child.pid;
    let loadCpu = 0;
    const poll = setInterval(() => {
      cpuOf(loadPid).then(
        (s) => {
          loadCpu = s;
        },
        () => undefined,
      );
    }, 100);
    await new Promise((r) => runner.child.once("exit", r));
    clearInterval(poll);
    const to = micros();
    windows.push([from, to]);
    const text = runner.output();
    const result = JSON.parse(text.slice(text.indexOf("{"), text.lastIndexOf("}") + 1));
    const n = result.requests.total;
    const after = {
      host: await cpuOf(hostPid),
      db: (await Promise.all(dbPids.map(cpuOf))).reduce((a, b) => a + b, 0),
      postgres: await postgresCpu(),
      redis: await cpuOfCommand("redis-server"),
    };
    const us = (s) => ((s * 1e6) / n).toFixed(0);
    rows.push([
      name,
      path.bytes ?? "",
      (n / duration).toFixed(0),
      us(after.host - before.host),
      us(after.db - before.db),
      us(postgresDelta(after.postgres, before.postgres)),
      us(after.redis - before.redis),
      us(loadCpu),
      `${result.non2xx} non-2xx`,
    ]);
  }
  console.log(
    `\n${args.set}: CPU µs per request (1/100 s ticks; postgres: the host's backends; redis: every redis-server on the machine)\n`,
  );
  console.log(
    table(
      ["path", "reply bytes", "req/s", "host", "db process", "postgres", "redis", "load generator", "errors"],
      rows,
    ),
  );
  await vod.host.stop();
  vod = undefined;
  if (args.profile) {
    // Node names a profile CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile; the embedded
    // database's process inherits the host's flags, so it writes one too.
    const files = (await readdir(profiles)).filter((f) => f.endsWith(".cpuprofile"));
    const ofPid = (pid) => files.find((f) => f.split(".")[3] === String(pid));
    const processes = [["host", ofPid(hostPid)], ...dbPids.map((pid) => ["db process", ofPid(pid)])];
    for (const [who, name] of processes) {
      if (name === undefined) continue;
      // The host's profile as FILE, the database process's beside it as FILE.db.
      if (args["keep-profile"])
        await copyFile(join(profiles, name), `${args["keep-profile"]}${who === "host" ? "" : ".db"}`);
      const { total, places, functions } = summarizeCpuProfile(
        JSON.parse(await readFile(join(profiles, name), "utf8")),
        windows,
        Number(args.top),
      );
      console.log(`\n${who}: main thread busy ${(total / 1e6).toFixed(2)} s\n`);
      console.log(table([`where (${who})`, "self s", "share"], places));
      console.log();
      console.log(table([`function (${who})`, "self s", "share"], functions));
    }
  }
} finally {
  await vod?.host.stop();
  if (admin) {
    for (const s of [schema, `${schema}_jobs`]) await dropBenchSchema(admin, s).catch(() => undefined);
    await admin.close();
  }
  await rm(scratch, { recursive: true, force: true });
}

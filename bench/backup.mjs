// `vod backup` and `vod restore` of 10,000 assets, next to the plain tool of each engine.
//
// For each set (embedded PGlite, server Postgres) a `vod serve` is given one tenant with --assets
// assets (POST /v1/assets, 8 in flight), then:
//   - `vod backup DIR` runs while a loop reads GET /v1/assets?limit=1 through the host: its
//     wall time, the directory's size, and the slowest read during it (the embedded backup holds the
//     database while it copies: that read is how long the host's queries waited);
//   - the plain tool on the same database: `pg_dump -Fc` of the same two schemas (server), or
//     `tar -czf` of the PGlite data directory once the host has stopped (embedded: the offline
//     copy an operator would otherwise make);
//   - `vod restore DIR` into an empty data directory or database: its wall time.
// The filesystem store holds --objects-mib MiB of 1 MiB segment files besides, which `vod backup
// DIR` copies (and checksums) after the database, next to a plain `cp -r` of them.
// Usage: node bench/backup.mjs [--assets 10000] [--set embedded|server|both] [--objects-mib 256]

import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, readdir, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  benchArgs,
  benchScratch,
  callJson,
  cli,
  expectStatus,
  fmt,
  fromRepo,
  MiB,
  pool,
  spawnNode,
  startVodHost,
  table,
} from "./lib.mjs";

const run = promisify(execFile);
const log = (line) => process.stderr.write(`${line}\n`);
const args = benchArgs({
  assets: { type: "string", default: "10000" },
  set: { type: "string", default: "both" },
  "objects-mib": { type: "string", default: "256" },
});
const count = Number(args.assets);
const objectsMib = Number(args["objects-mib"]);
const databaseUrl = args["database-url"];
const schema = `bench_backup_${randomBytes(4).toString("hex")}`;
const restoreDb = `bench_restore_${randomBytes(4).toString("hex")}`;
const { connectPostgres } = await fromRepo("adapters/postgres");

const scratch = await benchScratch({
  dirPrefix: "vod-bench-backup-",
  log,
  server: args.set === "embedded" ? undefined : { databaseUrl, schema },
  also: async () => {
    if (args.set === "embedded") return;
    const admin = connectPostgres({ connectionString: databaseUrl, poolSize: 1 });
    await admin.exec(`DROP DATABASE IF EXISTS ${restoreDb} WITH (FORCE)`).catch(() => undefined);
    await admin.exec(`DROP ROLE IF EXISTS "vod_app_${restoreDb}_${schema}"`).catch(() => undefined);
    await admin.close();
  },
});

/** Runs `vod ARGS`, timed; fails with its output when it fails. */
const vod = async (cliArgs, env) => {
  const started = performance.now();
  const child = spawnNode([cli, ...cliArgs], { VOD_LOG_LEVEL: "warn", ...env });
  const code = await new Promise((resolve) => child.child.once("exit", resolve));
  if (code !== 0) throw new Error(`vod ${cliArgs.join(" ")}: exit ${code}\n${child.output()}`);
  return (performance.now() - started) / 1000;
};

const timed = async (fn) => {
  const started = performance.now();
  await fn();
  return (performance.now() - started) / 1000;
};

/** Reads one asset page in a loop until `done` resolves: the slowest read, in ms. */
const slowestReadDuring = async (base, auth, done) => {
  let stopped = false;
  let slowest = 0;
  let reads = 0;
  void done.finally(() => {
    stopped = true;
  });
  while (!stopped) {
    const started = performance.now();
    expectStatus("read", await callJson(base, "/v1/assets?limit=1", { headers: auth }), 200);
    slowest = Math.max(slowest, performance.now() - started);
    reads++;
  }
  return { slowest, reads };
};

const fill = async (vodHost) => {
  const started = performance.now();
  await pool(
    Array.from({ length: count }, (_, i) => i),
    8,
    async (i) => {
      expectStatus(
        "create",
        await callJson(vodHost.base, "/v1/assets", { body: { title: `a${i}` }, headers: vodHost.auth }),
        201,
      );
    },
  );
  log(`${count} assets in ${fmt((performance.now() - started) / 1000, 1)} s`);
};

/**
 * Files in the filesystem store as renditions leave them (1 MiB segments, 4 per asset dir), which
 * `vod backup DIR` copies after the database: what the copy of objects costs.
 */
const fillObjects = async (dataDir) => {
  const segment = randomBytes(MiB);
  for (let i = 0; i < objectsMib; i++) {
    const dir = join(dataDir, "objects", "renditions", "tnt_bench", `ast_${Math.floor(i / 4)}`, "360p");
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, `${i % 4}.m4s`), segment);
  }
};

/** MiB of a file, or of every file under a directory (a `vod backup DIR`). */
const size = async (path) => {
  const info = await stat(path);
  if (!info.isDirectory()) return info.size / MiB;
  const entries = await readdir(path, { recursive: true, withFileTypes: true });
  let bytes = 0;
  for (const entry of entries)
    if (entry.isFile()) bytes += (await stat(join(entry.parentPath, entry.name))).size;
  return bytes / MiB;
};
const rows = [];

const measure = async (set) => {
  const dataDir = join(scratch.dir, `${set}-data`);
  const env =
    set === "server"
      ? {
          VOD_DATABASE_URL: databaseUrl,
          VOD_DATABASE_SCHEMA: schema,
          VOD_RATE_LIMIT_API_PER_MINUTE: "1000000",
        }
      : { VOD_RATE_LIMIT_API_PER_MINUTE: "1000000" };
  const vodHost = await startVodHost({ cli, dataDir, env, track: scratch.track });
  await fill(vodHost);
  await fillObjects(dataDir);

  const file = join(scratch.dir, `${set}-backup`);
  log(`${set}: vod backup`);
  let backupSeconds;
  const backup = vod(["backup", file], { ...env, VOD_DATA_DIR: dataDir }).then((s) => {
    backupSeconds = s;
  });
  const reads = await slowestReadDuring(vodHost.base, vodHost.auth, backup);
  await backup;
  rows.push([
    set,
    "vod backup (online)",
    fmt(backupSeconds, 2),
    fmt(await size(file), 2),
    `${fmt(reads.slowest, 0)} ms (${reads.reads} reads)`,
  ]);

  const plain = join(scratch.dir, `${set}.plain`);
  if (set === "server") {
    const seconds = await timed(() =>
      run("pg_dump", [
        "-Fc",
        `--schema=${schema}`,
        `--schema=${schema}_jobs`,
        `--file=${plain}`,
        `--dbname=${databaseUrl}`,
      ]),
    );
    rows.push([set, "pg_dump -Fc (plain)", fmt(seconds, 2), fmt(await size(plain), 2), ""]);
    await vodHost.host.stop();
  } else {
    await vodHost.host.stop();
    const seconds = await timed(() => run("tar", ["-czf", plain, "-C", dataDir, "pglite"]));
    rows.push([
      set,
      "tar -czf of the stopped data dir (plain)",
      fmt(seconds, 2),
      fmt(await size(plain), 2),
      "",
    ]);
  }

  const plainObjects = join(scratch.dir, `${set}.objects`);
  const copySeconds = await timed(() => run("cp", ["-r", join(dataDir, "objects"), plainObjects]));
  rows.push([
    set,
    `cp -r of the objects directory (plain; ${objectsMib} MiB written by the bench)`,
    fmt(copySeconds, 2),
    fmt(await size(plainObjects), 2),
    "",
  ]);

  log(`${set}: vod restore`);
  let restoreEnv;
  if (set === "server") {
    const admin = connectPostgres({ connectionString: databaseUrl, poolSize: 1 });
    await admin.exec(`CREATE DATABASE ${restoreDb}`);
    await admin.close();
    const url = new URL(databaseUrl);
    url.pathname = `/${restoreDb}`;
    restoreEnv = { VOD_DATABASE_URL: url.href, VOD_DATABASE_SCHEMA: schema };
  } else restoreEnv = {};
  const restoreSeconds = await vod(["restore", file], {
    ...restoreEnv,
    VOD_DATA_DIR: join(scratch.dir, `${set}-restored`),
  });
  rows.push([set, "vod restore (into an empty target)", fmt(restoreSeconds, 2), "", ""]);
};

try {
  if (args.set !== "server") await measure("embedded");
  if (args.set !== "embedded") await measure("server");
  console.log(`\nBackup and restore of ${count} assets (one tenant), ${new Date().toISOString()}\n`);
  console.log(table(["set", "what", "seconds", "MiB", "slowest host read meanwhile"], rows));
} finally {
  await scratch.cleanup();
}

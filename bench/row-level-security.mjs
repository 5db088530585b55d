#!/usr/bin/env node
// The cost of row-level security on GET /v1/assets (API key, limit=50, a tenant with 50 assets),
// in one run: this build's host with its policies, the same build with the policies switched off
// in its schema (the scope statements still run: what is left is their round trips), and, given
// --baseline-repo, the build of a commit before row-level security. Each host's tenant has an API
// key and 50 assets; timed after a warm-up, every answer checked for 200 and 50 assets. The policies
// are switched off with the database's own DDL (NO FORCE, DISABLE on every table), as the adapter
// has no switch for it. Traffic goes to 127.0.0.1 only; every loop is bounded in time.
//
//   node bench/row-level-security.mjs [--seconds 3] [--rounds 2] [--storage server|embedded|both]
//     [--baseline-repo /tmp/vod-build-<commit>] [--database-url postgres://postgres@127.0.0.1:5432/postgres]
import { mkdtemp, rm } from "node:fs/promises";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import {
  benchArgs,
  callJson,
  cli,
  describeBuild,
  dropBenchSchema,
  expectStatus,
  fmt,
  fromRepo,
  loadAverage,
  median,
  repo,
  spread,
  startVodHost,
  table,
} from "./lib.mjs";

const args = benchArgs({
  seconds: { type: "string", default: "3" },
  rounds: { type: "string", default: "2" },
  storage: { type: "string", default: "server" },
  "baseline-repo": { type: "string" },
});
const seconds = Number(args.seconds);
const rounds = Number(args.rounds);
for (const [name, value] of Object.entries({ seconds, rounds }))
  if (!Number.isInteger(value) || value < 1 || value > 60) throw new Error(`bad --${name}: ${value}`);
if (!["server", "embedded", "both"].includes(args.storage)) throw new Error(`bad --storage: ${args.storage}`);
const databaseUrl = args["database-url"];
const baseline = args["baseline-repo"] && resolve(args["baseline-repo"]);

const ASSETS = 50;
/** Requests in flight in the throughput measurement; the latency one sends one at a time. */
const CONCURRENCY = 8;
const NO_LIMIT = "100000000";
const log = (m) => process.stderr.write(`[rls-bench] ${m}\n`);

const { connectPostgres } = await fromRepo("adapters/postgres");
const scratch = await mkdtemp(join(tmpdir(), "vod-rls-bench-"));
const closers = [];
const track = (spawned) => {
  closers.push(async () => {
    if (spawned.child.exitCode === null) {
      spawned.child.kill("SIGTERM");
      await new Promise((r) => spawned.child.once("exit", r));
    }
  });
  return spawned;
};
const cleanup = async () => {
  for (const close of closers.splice(0).reverse()) await close().catch((e) => log(`cleanup: ${e}`));
  await rm(scratch, { recursive: true, force: true });
};
process.once("SIGINT", () => void cleanup().finally(() => process.exit(130)));

/** A host of `build` on `storage`, with an API key and 50 assets in its tenant. */
const startHost = async (label, build, storage, schema) => {
  log(`${label}: starting`);
  const host = await startVodHost({
    cli: build === repo ? cli : join(build, "hosts/express/dist/bin/vod.js"),
    dataDir: join(scratch, label.replaceAll(/\W+/g, "-")),
    env: {
      VOD_WORKER_CONCURRENCY: "0",
      VOD_RATE_LIMIT_API_PER_MINUTE: NO_LIMIT,
      ...(storage === "server"
        ? { VOD_DATABASE_URL: databaseUrl, VOD_DATABASE_SCHEMA: schema, VOD_DATABASE_POOL_SIZE: "10" }
        : { VOD_STORAGE: "postgres" }),
    },
    parallel: 1,
    track,
  });
  const key = await callJson(host.base, "/v1/api-keys", {
    body: { name: "bench", scopes: ["read"] },
    headers: host.auth,
  });
  expectStatus("create API key", key, 201);
  for (let i = 0; i < ASSETS; i++)
    expectStatus(
      "create asset",
      await callJson(host.base, "/v1/assets", { body: { title: `asset ${i}` }, headers: host.auth }),
      201,
    );
  return { ...host, apiKey: key.body.key };
};

/** GET /v1/assets?limit=50 for `ms`, `concurrency` at a time: requests per second and latencies. */
const measure = async (host, ms, concurrency) => {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const url = new URL(`${host.base}/v1/assets?limit=${ASSETS}`);
  const latencies = [];
  const get = () =>
    new Promise((resolveGet, reject) => {
      const started = process.hrtime.bigint();
      const req = request(url, { agent, headers: { "x-api-key": host.apiKey } }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d) => {
          body += d;
        });
        res.on("end", () => {
          if (res.statusCode !== 200) return reject(new Error(`GET /v1/assets: ${res.statusCode} ${body}`));
          const count = JSON.parse(body).data?.length;
          if (count !== ASSETS) return reject(new Error(`GET /v1/assets: ${count} assets, not ${ASSETS}`));
          latencies.push(Number(process.hrtime.bigint() - started) / 1e6);
          resolveGet();
        });
      });
      req.on("error", reject);
      req.end();
    });
  // Warm the connections, the pool and the plans first.
  for (let i = 0; i < 50; i++) await get();
  latencies.length = 0;
  const until = Date.now() + ms;
  const started = Date.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < until) await get();
    }),
  );
  const elapsed = (Date.now() - started) / 1000;
  agent.destroy();
  const sorted = [...latencies].sort((a, b) => a - b);
  return {
    perSecond: latencies.length / elapsed,
    p50: median(latencies),
    p95: sorted[Math.floor(sorted.length * 0.95)] ?? Number.NaN,
  };
};

/** Switches row-level security off on every table of `schema`; the adapter still sets its scope. */
const policiesOff = async (schema) => {
  const admin = connectPostgres({ connectionString: databaseUrl, schema, poolSize: 1 });
  try {
    const { rows } = await admin.query(
      "SELECT relname FROM pg_class WHERE relnamespace = $1::regnamespace AND relrowsecurity",
      [schema],
    );
    for (const { relname } of rows)
      await admin.exec(`ALTER TABLE ${relname} NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY`);
    return rows.length;
  } finally {
    await admin.close();
  }
};

const runStorage = async (storage) => {
  const schemaBase = `vod_bench_${process.pid}_${Date.now().toString(36)}`;
  const scenarios = [
    { label: "RLS (this build)", build: repo, schema: `${schemaBase}_rls` },
    ...(storage === "server"
      ? [{ label: "policies off (this build)", build: repo, schema: `${schemaBase}_off`, off: true }]
      : []),
    ...(baseline
      ? [{ label: "before RLS (baseline build)", build: baseline, schema: `${schemaBase}_base` }]
      : []),
  ];
  if (storage === "server")
    closers.push(async () => {
      const admin = connectPostgres({ connectionString: databaseUrl, poolSize: 1 });
      try {
        for (const { schema } of scenarios)
          for (const name of [schema, `${schema}_jobs`]) await dropBenchSchema(admin, name);
        log(`${storage}: dropped schemas ${schemaBase}_* and their roles`);
      } finally {
        await admin.close();
      }
    });
  const hosts = [];
  for (const scenario of scenarios) {
    const host = await startHost(`${storage} ${scenario.label}`, scenario.build, storage, scenario.schema);
    if (scenario.off)
      log(`${scenario.label}: row-level security off on ${await policiesOff(scenario.schema)} tables`);
    hosts.push({ scenario, host, results: [] });
  }
  for (let round = 0; round < rounds; round++)
    // Each round starts at a different host, so load from elsewhere moves a round, not a row.
    for (let i = 0; i < hosts.length; i++) {
      const entry = hosts[(i + round) % hosts.length];
      log(`${storage} round ${round + 1}: ${entry.scenario.label}`);
      const serial = await measure(entry.host, (seconds * 1000) / 2, 1);
      const parallel = await measure(entry.host, seconds * 1000, CONCURRENCY);
      entry.results.push({ serial, parallel });
    }
  const first = hosts[0];
  const ratio = (entry, pick) => median(entry.results.map((r, i) => pick(r) / pick(first.results[i])));
  return hosts.map((entry) => {
    const p50 = entry.results.map((r) => r.serial.p50);
    const rps = entry.results.map((r) => r.parallel.perSecond);
    return [
      storage,
      entry.scenario.label,
      `${fmt(median(p50), 2)}${spread(p50)}`,
      fmt(median(entry.results.map((r) => r.serial.p95)), 2),
      `${fmt(median(rps), 0)}${spread(rps, 0)}`,
      fmt(
        ratio(entry, (r) => r.parallel.perSecond),
        2,
      ),
    ];
  });
};

try {
  const rows = [];
  for (const storage of args.storage === "both" ? ["server", "embedded"] : [args.storage])
    rows.push(...(await runStorage(storage)));
  console.log(
    `GET /v1/assets?limit=${ASSETS} with an API key, ${ASSETS} assets; ${rounds} round(s) of ${seconds / 2} s one at a time and ${seconds} s ${CONCURRENCY} at a time per row`,
  );
  console.log(
    `build ${repo} ${describeBuild()}${baseline ? `; baseline ${baseline}` : ""}; load average ${loadAverage()}`,
  );
  console.log(
    table(
      [
        "storage",
        "host",
        "ms p50, 1 at a time",
        "ms p95, 1 at a time",
        `req/s, ${CONCURRENCY} at a time`,
        "req/s vs RLS",
      ],
      rows,
    ),
  );
} finally {
  await cleanup();
}

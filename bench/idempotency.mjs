#!/usr/bin/env node
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
  loadAverage,
  median,
  spread,
  startVodHost,
  table,
} from "./lib.mjs";

const args = benchArgs({
  connections: { type: "string", default: "20" },
  duration: { type: "string", default: "5" },
  rounds: { type: "string", default: "3" },
  sets: { type: "string", default: "embedded,server" },
});
const connections = Number(args.connections);
const seconds = Number(args.duration);
const rounds = Number(args.rounds);
const sets = args.sets.split(",");
const databaseUrl = args["database-url"];
const log = (message) => process.stderr.write(`[idempotency] ${message}\n`);

const tag = `${process.pid}_${Date.now().toString(36)}`;
const schema = `vod_bench_idem_${tag}`;
const {
  dir: scratch,
  track,
  cleanup,
} = await benchScratch({
  dirPrefix: "vod-bench-idem-",
  log,
  server: sets.includes("server") && { databaseUrl, schema },
});

const startSet = async (set) => {
  const env = {
    VOD_WORKER_CONCURRENCY: "0",
    // The bench measures the path, not the limiter's refusals: one credential sends it all.
    VOD_RATE_LIMIT_API_PER_MINUTE: "100000000",
    ...(set === "server" ? { VOD_DATABASE_URL: databaseUrl, VOD_DATABASE_SCHEMA: schema } : {}),
  };
  const vod = await startVodHost({ cli, dataDir: join(scratch, set), env, track });
  const key = await callJson(vod.base, "/v1/api-keys", {
    body: { name: "bench", scopes: ["write"] },
    headers: vod.auth,
  });
  expectStatus("create API key", key, 201);
  const apiKey = { "x-api-key": key.body.key, "content-type": "application/json" };
  const body = JSON.stringify({ title: "bench" });
  const post = { method: "POST", body };
  const replayKey = `bench-replay-${tag}`;
  // Its first request done before the load: concurrent firsts would be 409s, not replays.
  expectStatus(
    "first request of the replayed key",
    await callJson(vod.base, "/v1/assets", {
      body: { title: "bench" },
      headers: { ...apiKey, "idempotency-key": replayKey },
    }),
    201,
  );
  return {
    set,
    paths: [
      { name: "POST /v1/assets, no key", options: { headers: apiKey, ...post } },
      {
        name: "POST /v1/assets, a fresh key each",
        options: { headers: { ...apiKey, "idempotency-key": "bench-[<id>]" }, ...post, idReplacement: true },
      },
      {
        name: "POST /v1/assets, one key (replays)",
        options: { headers: { ...apiKey, "idempotency-key": replayKey }, ...post },
      },
    ].map((p) => ({ ...p, url: `${vod.base}/v1/assets` })),
  };
};

try {
  log(`load average ${loadAverage()}; ${describeBuild()}`);
  const hosts = [];
  for (const set of sets) hosts.push(await startSet(set));
  const load = (path, duration = seconds) =>
    autocannonRps(path.url, { connections, seconds: duration, ...path.options });
  for (const host of hosts) for (const path of host.paths) await load(path, 1);

  /** rps[set][path] and ratio[set][path] (to the same round's request without a key). */
  const rps = Object.fromEntries(
    hosts.map((h) => [h.set, Object.fromEntries(h.paths.map((p) => [p.name, []]))]),
  );
  const ratios = structuredClone(rps);
  for (let round = 0; round < rounds; round++)
    for (const host of hosts) {
      const values = {};
      // Each round starts at another path, so a slow spell on the machine lands on different ones.
      for (let i = 0; i < host.paths.length; i++) {
        const path = host.paths[(i + round) % host.paths.length];
        values[path.name] = await load(path);
        log(`round ${round + 1} ${host.set}: ${path.name} ${values[path.name].toFixed(0)} req/s`);
      }
      const base = values[host.paths[0].name];
      for (const path of host.paths) {
        rps[host.set][path.name].push(values[path.name]);
        ratios[host.set][path.name].push(values[path.name] / base);
      }
    }

  const names = { embedded: "embedded default (PGlite)", server: "server set (Postgres)" };
  console.log(
    `\nIdempotency-Key on POST /v1/assets: ${connections} connections, ${seconds} s, median of ${rounds} round(s); ` +
      `load average at the end ${loadAverage()} ${describeBuild()}\n`,
  );
  const rows = hosts[0].paths.map((path) => [
    path.name,
    ...hosts.map(
      (h) =>
        `${median(rps[h.set][path.name]).toFixed(0)} (${fmt(median(ratios[h.set][path.name]))})` +
        spread(ratios[h.set][path.name]),
    ),
  ]);
  console.log(table(["path", ...hosts.map((h) => names[h.set])], rows));
  console.log("\nreq/s (ratio to the same round's POST without a key: median, then each round)");
} finally {
  await cleanup();
}

#!/usr/bin/env node
import { join } from "node:path";
import {
  apiHotPaths,
  autocannonRps,
  benchArgs,
  benchScratch,
  cli,
  describeBuild,
  fmt,
  freePort,
  fromRepo,
  loadAverage,
  median,
  repo,
  sleep,
  spawnNode,
  spread,
  startVodHost,
  table,
} from "./lib.mjs";

const args = benchArgs(
  {
    connections: { type: "string", default: "50" },
    duration: { type: "string", default: "8" },
    rounds: { type: "string", default: "3" },
    sets: { type: "string", default: "embedded,server" },
    // Lengthens each asset's title: builds whose asset replies differ in size (a field added)
    // compared at the same reply bytes, with VOD_BENCH_REPO naming the older build.
    "title-pad": { type: "string", default: "0" },
  },
  { redis: true },
);
const connections = Number(args.connections);
const duration = Number(args.duration);
const rounds = Number(args.rounds);
const sets = args.sets.split(",");
const databaseUrl = args["database-url"];
const redisUrl = args["redis-url"];
const log = (message) => process.stderr.write(`[api-paths] ${message}\n`);

const tag = `${process.pid}_${Date.now().toString(36)}`;
const schema = `vod_bench_api_${tag}`;
const redisPrefix = `vod-bench-api:${tag}:`;
const usesServer = sets.includes("server");
const {
  dir: scratch,
  track,
  cleanup,
} = await benchScratch({
  dirPrefix: "vod-bench-api-",
  log,
  server: usesServer && { databaseUrl, schema },
  also: async () => {
    if (!usesServer) return;
    const { redisBackdoor } = await fromRepo("adapters/redis", "dist/testing.js");
    const redis = redisBackdoor({ url: redisUrl, keyPrefix: redisPrefix });
    await redis.clear().catch(() => undefined);
    await redis.close();
  },
});

/** autocannon in its own process: the mean requests per second over `duration`, every reply checked. */
const load = (url, headers = {}, seconds = duration) => autocannonRps(url, { connections, seconds, headers });

/** The bare Express baseline, in a process of its own. */
const startBare = async () => {
  const port = await freePort();
  const server = track(spawnNode([join(repo, "bench/servers/bare-express.mjs")], { PORT: String(port) }));
  await server.waitFor(/listening on/);
  return { url: `http://127.0.0.1:${port}/v1/ping`, server };
};

/**
 * The second baseline, beside the server set: Express 5 with one Redis EVALSHA and one Postgres
 * SELECT per request and nothing else (`servers/one-lookup.mjs`), the least the listing costs on
 * the same services, in the bench's own schema.
 */
const startOneLookup = async () => {
  const port = await freePort();
  const server = track(
    spawnNode([join(repo, "bench/servers/one-lookup.mjs")], {
      PORT: String(port),
      DATABASE_URL: databaseUrl,
      SCHEMA: schema,
      REDIS_URL: redisUrl,
      KEY_PREFIX: `${redisPrefix}one-lookup:`,
    }),
  );
  await server.waitFor(/listening on/);
  const base = `http://127.0.0.1:${port}/v1/assets`;
  return [
    { name: "GET /v1/assets?limit=50, API key", url: `${base}?limit=50` },
    { name: "GET /v1/assets?limit=1, API key", url: `${base}?limit=1` },
  ];
};

/** A host on one set, with a tenant of 50 assets, an API key and a bearer. */
const startSet = async (set) => {
  const dataDir = join(scratch, set);
  const env = {
    VOD_WORKER_CONCURRENCY: "0",
    // The bench measures the path, not the limiter's refusals: one credential sends it all.
    VOD_RATE_LIMIT_API_PER_MINUTE: "100000000",
    ...(set === "server"
      ? {
          VOD_DATABASE_URL: databaseUrl,
          VOD_DATABASE_SCHEMA: schema,
          VOD_REDIS_URL: redisUrl,
          VOD_REDIS_KEY_PREFIX: redisPrefix,
        }
      : {}),
  };
  const vod = await startVodHost({ cli, dataDir, env, track });
  return { set, paths: await apiHotPaths(vod, { titlePad: Number(args["title-pad"]) }) };
};

const targets = {
  "GET /v1/assets?limit=50, API key": 0.35,
  "GET /v1/assets?limit=1, API key": 0.5,
  "GET /v1/auth/me, bearer": 0.5,
};

try {
  log(`load average ${loadAverage()}; ${describeBuild()}`);
  const bare = await startBare();
  const hosts = [];
  for (const set of sets) hosts.push(await startSet(set));
  const lookups = usesServer ? await startOneLookup() : [];
  // A short warm-up of each: JIT, pools, caches.
  await load(bare.url, {}, 1);
  for (const host of hosts) for (const path of host.paths) await load(path.url, path.headers, 1);
  for (const path of lookups) await load(path.url, {}, 1);
  /** The one-lookup baseline's req/s and ratio to the server round's bare Express, by path name. */
  const lookupRps = Object.fromEntries(lookups.map((p) => [p.name, []]));
  const lookupRatios = Object.fromEntries(lookups.map((p) => [p.name, []]));

  /** rps[set][path] and ratio[set][path]: one value per round. */
  const rps = Object.fromEntries(
    hosts.map((h) => [h.set, Object.fromEntries(h.paths.map((p) => [p.name, []]))]),
  );
  const ratios = Object.fromEntries(
    hosts.map((h) => [h.set, Object.fromEntries(h.paths.map((p) => [p.name, []]))]),
  );
  const baseline = Object.fromEntries(hosts.map((h) => [h.set, []]));
  for (let round = 0; round < rounds; round++) {
    for (const host of hosts) {
      const base = await load(bare.url);
      baseline[host.set].push(base);
      log(`round ${round + 1} ${host.set}: bare Express ${base.toFixed(0)} req/s`);
      // Each round starts at another path, so a slow spell on the machine lands on different ones.
      const order = host.paths.map((_, i) => host.paths[(i + round) % host.paths.length]);
      for (const path of order) {
        const value = await load(path.url, path.headers);
        rps[host.set][path.name].push(value);
        ratios[host.set][path.name].push(value / base);
        log(`round ${round + 1} ${host.set}: ${path.name} ${value.toFixed(0)} req/s (${fmt(value / base)})`);
      }
      if (host.set === "server")
        for (const path of lookups) {
          const value = await load(path.url);
          lookupRps[path.name].push(value);
          lookupRatios[path.name].push(value / base);
          log(`round ${round + 1} one lookup: ${path.name} ${value.toFixed(0)} req/s (${fmt(value / base)})`);
        }
      await sleep(200);
    }
  }

  const names = {
    embedded: "embedded default (PGlite)",
    server: "server set (Postgres + Redis)",
  };
  console.log(
    `\nAPI paths: ${connections} connections, ${duration} s, median of ${rounds} round(s); ` +
      `load average at the end ${loadAverage()} ${describeBuild()}; limit=50 replies ` +
      `${hosts.map((h) => `${h.set} ${h.paths.find((p) => p.id === "limit50")?.bytes} bytes`).join(", ")}\n`,
  );
  const rows = [
    [
      "bare Express 5 GET (baseline)",
      ...hosts.map((h) => `${median(baseline[h.set]).toFixed(0)} req/s`),
      "",
      "",
    ],
  ];
  for (const path of hosts[0].paths) {
    const target = targets[path.name];
    rows.push([
      path.name,
      ...hosts.map(
        (h) =>
          `${median(rps[h.set][path.name]).toFixed(0)} (${fmt(median(ratios[h.set][path.name]))})` +
          spread(ratios[h.set][path.name]),
      ),
      `>= ${target}`,
      hosts.every((h) => median(ratios[h.set][path.name]) >= target) ? "pass" : "FAIL",
    ]);
  }
  for (const path of lookups)
    rows.push([
      `${path.name.replace(", API key", "")}: Express + 1 EVALSHA + 1 SELECT, nothing else`,
      ...hosts.map((h) =>
        h.set === "server"
          ? `${median(lookupRps[path.name]).toFixed(0)} (${fmt(median(lookupRatios[path.name]))})` +
            spread(lookupRatios[path.name])
          : "",
      ),
      "",
      "",
    ]);
  console.log(table(["path", ...hosts.map((h) => names[h.set]), "target", "verdict"], rows));
  console.log("\nreq/s (ratio to the same round's bare Express: median, then each round)");
  if (lookups.length > 0)
    console.log(
      "The last rows are a second baseline on the server set's services: Express 5 answering the same " +
        "page with one Redis EVALSHA and one SELECT and nothing else (no authentication, validation, " +
        "row security, logging or metrics): bench/servers/one-lookup.mjs.",
    );
} finally {
  await cleanup();
}

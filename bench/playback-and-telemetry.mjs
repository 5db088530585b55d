#!/usr/bin/env node
// Playback sessions minted per second, and telemetry events stored per second through the host
// against the same events written by a bare loop straight to the same sink, in one run (target:
// at least 0.5 of it). Traffic goes to 127.0.0.1 only; every loop is bounded in count and in time.
//
// Not timed: a 2 s clip made and processed on `vod serve` (rate limits raised out of the way), 64
// sessions minted, and every body prepared (50 events each, `{token, player_version, events}`).
// Each round, host and bare loop alternating: sessions (POST /v1/playback/sessions, 16 in flight);
// telemetry through the host (POST /v1/telemetry as a text/plain beacon, 32 in flight, counting the
// events of `x-telemetry-accepted`); the bare loop (32 loops of `sink.write` of the same events
// into `postgresTelemetrySink` on a fresh database of the same engine). Per second is the median of
// the rounds, the ratio the median of per-round ratios. --profile counts the INSERTs and their
// events and prints where the host's main thread went.
//
//   node bench/playback-and-telemetry.mjs [--rounds 3] [--seconds 5] [--sessions 2000] [--quick] [--server]
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { Agent, request } from "node:http";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs, promisify } from "node:util";
import { Effect } from "effect";
import {
  callJson,
  cleanUpOnSignals,
  cli,
  cpuSeconds,
  describeBuild,
  dropBenchSchema,
  expectStatus,
  fmt,
  fromRepo,
  loadAverage,
  median,
  repo,
  sleep,
  spread,
  startVodHost,
  sum,
  summarizeCpuProfile,
  table,
} from "./lib.mjs";

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    rounds: { type: "string" },
    seconds: { type: "string" },
    sessions: { type: "string" },
    server: { type: "boolean", default: false },
    "database-url": { type: "string", default: "postgres://postgres@127.0.0.1:5432/postgres" },
    profile: { type: "boolean", default: false },
  },
});
const quick = args.quick;
/** Rounds: each runs every scenario once, host and bare loop in alternating order. */
const rounds = Number(args.rounds ?? (quick ? 1 : 3));
/** Seconds of each timed telemetry scenario per round (host, bare loop): 3 × 5 = 15 s each. */
const secondsPerRound = Number(args.seconds ?? (quick ? 2 : 5));
/** Sessions minted in all, spread over the rounds; each round also stops after secondsPerRound. */
const sessionsTotal = Number(args.sessions ?? (quick ? 300 : 2000));
for (const [name, value] of Object.entries({ rounds, secondsPerRound, sessionsTotal }))
  if (!Number.isInteger(value) || value < 1 || value > 100_000) throw new Error(`bad ${name}: ${value}`);
const databaseUrl = args["database-url"];
if (args.server && !["127.0.0.1", "localhost"].includes(new URL(databaseUrl).hostname))
  throw new Error(`--database-url must point at 127.0.0.1: ${databaseUrl}`);

const SESSION_CONCURRENCY = 16;
const TELEMETRY_CONCURRENCY = 32;
const TELEMETRY_SESSIONS = 64;
const EVENTS_PER_BATCH = 50; // the most a batch may hold (Requests.TelemetryBatch)
const EVENT_LISTS = 16; // distinct batches of events, sent round-robin over the sessions
/** Upper bounds on requests per timed run, beside the time bound (far above what 2 cores reach). */
const MAX_BATCHES_PER_RUN = 200_000;
/** Warm-up of each scenario before the rounds (JIT, PGlite's caches), not counted. */
const WARMUP_SECONDS = quick ? 0.5 : 3;
/** Limits the host enforces per minute, raised so that they do not cut the measure short. */
const NO_LIMIT = "100000000";

if (!existsSync(cli)) throw new Error(`${cli} is missing: build first (cd ${repo} && npx tsc -b)`);
const { resolveTools } = await fromRepo("adapters/ffmpeg");
const { openPglite, connectPostgres, migrate, postgresTelemetrySink } = await fromRepo("adapters/postgres");
const tools = resolveTools();
const log = (...parts) => console.error(`[${new Date().toISOString().slice(11, 19)}]`, ...parts);
const now = () => performance.now();

// ---------------------------------------------------------------------------------------------
// Scratch space, children, databases, and cleanup on every way out.

const scratch = await mkdtemp(join(tmpdir(), "vod-bench-telemetry-"));
const children = new Set();
const closers = [];
const agents = new Set();
/** A keep-alive agent of at most `sockets` connections, destroyed on the way out. */
const keepAlive = (sockets) => {
  const agent = new Agent({ keepAlive: true, maxSockets: sockets });
  agents.add(agent);
  return agent;
};
let cleaning;
/** Stops the hosts, closes the databases, drops the schemas, removes the scratch space: once. */
const cleanup = () => {
  cleaning ??= (async () => {
    // Open keep-alive sockets would hold a stopping host in its grace period.
    for (const agent of agents) agent.destroy();
    await Promise.all([...children].map((c) => c.stop()));
    for (const close of closers.reverse())
      await close().catch((error) => log(`cleanup: ${error?.message ?? error}`));
    await rm(scratch, { recursive: true, force: true });
  })();
  // Whoever asks (a signal, the way out of the main block) waits for the same work to finish.
  return cleaning;
};
cleanUpOnSignals(cleanup, log);
const track = (spawned) => {
  children.add(spawned);
  const stop = spawned.stop;
  return {
    ...spawned,
    stop: async () => {
      await stop();
      children.delete(spawned);
    },
  };
};

// ---------------------------------------------------------------------------------------------
// The client: node:http with a keep-alive agent, bodies made before anything is timed.

/** POSTs `body` (a Buffer) and answers the status, headers and body text. */
const post = (agent, url, headers, body) =>
  new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        agent,
        method: "POST",
        headers: { ...headers, "content-length": String(body.length) },
        timeout: 60_000,
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d) => {
          text += d;
        });
        res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: text }));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`POST ${url}: no answer in 60 s`)));
    req.on("error", reject);
    req.end(body);
  });

/**
 * Runs `op(i)` from `concurrency` loops until `maxOps` were started or `seconds` passed, and answers
 * how many finished, what each returned in all (`op` answers a count, say events stored), the
 * wall time from the first start to the last finish, and each op's latency in ms.
 */
const runFor = async ({ concurrency, maxOps, seconds, op }) => {
  const latencies = [];
  let started = 0;
  let units = 0;
  const start = now();
  const deadline = start + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (started < maxOps && now() < deadline) {
        const i = started++;
        const t0 = now();
        // Not `units += await op(i)`: that reads `units` before the await and loses the others' adds.
        const n = await op(i);
        units += n;
        latencies.push(now() - t0);
      }
    }),
  );
  return { ops: latencies.length, units, seconds: (now() - start) / 1000, latencies };
};

const percentile = (values, p) => {
  if (values.length === 0) return Number.NaN;
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};

// ---------------------------------------------------------------------------------------------
// Telemetry events: what a player sends, and what the host makes of them for the sink.

const KNOWN = new Set([
  "event",
  "ts_ms",
  "playhead_ms",
  "rendition",
  "error_code",
  "startup_ms",
  "stall_ms",
  "bitrate_kbps",
]);
const RENDITIONS = ["240p", "360p", "480p", "720p"];

/** Event `k` of list `list`: mostly heartbeats, some switches, stalls, a start-up and an error. */
const rawEvent = (list, k) => {
  const ts = 1_763_683_200_000 + list * 60_000 + k * 1000;
  const playhead = list * 30_000 + k * 1000 + 0.5;
  const rendition = RENDITIONS[(list + k) % RENDITIONS.length];
  const common = { ts_ms: ts, playhead_ms: playhead, rendition };
  if (k === 0) return { event: "startup", ...common, startup_ms: 412 + list, autoplay: true, muted: false };
  if (k % 17 === 5)
    return {
      event: "rendition_change",
      ...common,
      bitrate_kbps: 800 + 400 * (k % 4),
      from_rendition: RENDITIONS[(list + k + 1) % RENDITIONS.length],
      reason: "abr",
    };
  if (k % 23 === 7) return { event: "stall", ...common, stall_ms: 250 + k, buffer_ms: 0, reason: "network" };
  if (k === 41 && list % 4 === 3)
    return { event: "error", ...common, error_code: "MEDIA_ERR_NETWORK", fatal: false, retry: 1 };
  return {
    event: "heartbeat",
    ...common,
    bitrate_kbps: 1400 + 100 * (k % 7),
    buffer_ms: 8000 + 37 * k,
    dropped_frames: k % 3,
    seq: k,
  };
};
const eventLists = Array.from({ length: EVENT_LISTS }, (_, list) =>
  Array.from({ length: EVENTS_PER_BATCH }, (_, k) => rawEvent(list, k)),
);
const PLAYER_VERSION = "vod-bench-player/1.0.0";

/** The claims of a playback token (`v1.` and a compact JWS), read without verifying. */
const claimsOf = (token) => JSON.parse(Buffer.from(token.slice(3).split(".")[1], "base64url").toString());

/**
 * The TelemetryEvent objects the host's telemetry use case hands the sink for `raw` events of the
 * session holding `token` (core/src/use-cases/playback.ts): the known fields, null when absent,
 * every other key in `extra`; `received_at` is set at each write.
 */
const sinkEvents = (token, raw) => {
  const { sid, tid, aid } = claimsOf(token);
  return raw.map((e) => ({
    tenant_id: tid,
    session_id: sid,
    asset_id: aid,
    received_at: 0,
    player_version: PLAYER_VERSION,
    event: e.event,
    ts_ms: e.ts_ms,
    playhead_ms: e.playhead_ms,
    rendition: e.rendition ?? null,
    error_code: e.error_code ?? null,
    startup_ms: e.startup_ms ?? null,
    stall_ms: e.stall_ms ?? null,
    bitrate_kbps: e.bitrate_kbps ?? null,
    extra: Object.fromEntries(Object.entries(e).filter(([key]) => !KNOWN.has(key))),
  }));
};

// ---------------------------------------------------------------------------------------------
// A host with a ready asset, an API key and sessions to send telemetry for.

/** A 2 s 320x180 testsrc2 + sine, H.264/AAC in MP4: processed in seconds. */
const makeClip = async (path) => {
  await promisify(execFile)(tools.ffmpeg, [
    ...["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x180:rate=30:duration=2"],
    ...["-f", "lavfi", "-i", "sine=frequency=440:duration=2"],
    ...["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac"],
    ...["-movflags", "+faststart", path],
  ]);
};

const startHost = async (label, clip, env, nodeArgs = []) => {
  log(`${label}: starting vod serve`);
  const host = await startVodHost({
    cli,
    dataDir: join(scratch, `host-${label}`),
    env: {
      VOD_WORKER_CONCURRENCY: "1",
      VOD_FFMPEG_PATH: tools.ffmpeg,
      VOD_FFPROBE_PATH: tools.ffprobe,
      VOD_RATE_LIMIT_API_PER_MINUTE: NO_LIMIT,
      VOD_RATE_LIMIT_TELEMETRY_PER_MINUTE: NO_LIMIT,
      ...env,
    },
    nodeArgs,
    parallel: 1,
    track,
  });
  const key = await callJson(host.base, "/v1/api-keys", {
    body: { name: "bench", scopes: ["read"] },
    headers: host.auth,
  });
  expectStatus("create API key", key, 201);
  const upload = await host.begin((await stat(clip)).size, "bench clip");
  await host.putParts(clip, upload);
  await host.complete(upload);
  const until = Date.now() + 180_000;
  for (;;) {
    const asset = await host.asset(upload.assetId);
    if (asset.status === "ready") break;
    if (asset.status === "failed" || Date.now() > until)
      throw new Error(`asset ${asset.status}: ${JSON.stringify(asset)}\n${host.host.output()}`);
    await sleep(250);
  }
  log(`${label}: asset ${upload.assetId} ready`);
  return { ...host, apiKey: key.body.key, assetId: upload.assetId };
};

// ---------------------------------------------------------------------------------------------
// --profile: the telemetry INSERTs counted, in the host (a preload) and in this process alike.

/**
 * A module that wraps `query` of PGlite and of pg's Pool, the two the Postgres adapter calls, and
 * counts the telemetry INSERTs: statements, events, milliseconds from call to answer (which, with
 * one flush at a time, is each statement's time plus whatever the event loop did meanwhile). It
 * writes the counts to VOD_BENCH_STATS_FILE (the host) and exports them (this process).
 */
const statsModule = () => `
import { writeFileSync } from "node:fs";
import { PGlite } from ${JSON.stringify(import.meta.resolve("@electric-sql/pglite"))};
import pg from ${JSON.stringify(import.meta.resolve("pg"))};
export const stats = { statements: 0, events: 0, ms: 0 };
const wrap = (proto) => {
  const query = proto.query;
  proto.query = function (text, params, ...rest) {
    const result = query.call(this, text, params, ...rest);
    if (typeof text !== "string" || !text.startsWith("INSERT INTO telemetry_events")) return result;
    const t0 = performance.now();
    const done = () => {
      stats.statements++;
      stats.events += params[0].length;
      stats.ms += performance.now() - t0;
    };
    return result.then((v) => (done(), v), (e) => { done(); throw e; });
  };
};
wrap(PGlite.prototype);
wrap(pg.Pool.prototype);
const file = process.env.VOD_BENCH_STATS_FILE;
if (file) setInterval(() => writeFileSync(file, JSON.stringify(stats)), 100).unref();
`;

let statsFile;
let ownStats;
/** Writes the counting module, loads it here, and names the file the hosts write their counts to. */
const setupProfile = async () => {
  const module = join(scratch, "count-inserts.mjs");
  await writeFile(module, statsModule());
  statsFile = join(scratch, "host-inserts.json");
  ownStats = (await import(pathToFileURL(module).href)).stats;
};
/** The counts so far: of the host (from its file, at most 100 ms old) or of this process. */
const insertStats = async (of) => {
  if (!args.profile) return undefined;
  if (of === "self") return { ...ownStats };
  await sleep(250);
  return JSON.parse(await readFile(statsFile, "utf8").catch(() => '{"statements":0,"events":0,"ms":0}'));
};
const statsDelta = (a, b) =>
  a && b
    ? { statements: b.statements - a.statements, events: b.events - a.events, ms: b.ms - a.ms }
    : undefined;

// ---------------------------------------------------------------------------------------------
// The scenarios.

const mintSessions = (host, agent, maxOps, seconds) => {
  const body = Buffer.from(JSON.stringify({ asset_id: host.assetId }));
  const headers = { "content-type": "application/json", "x-api-key": host.apiKey };
  const tokens = [];
  const run = runFor({
    concurrency: SESSION_CONCURRENCY,
    maxOps,
    seconds,
    op: async () => {
      const reply = await post(agent, `${host.base}/v1/playback/sessions`, headers, body);
      if (reply.status !== 201) throw new Error(`mint session: ${reply.status} ${reply.body}`);
      tokens.push(JSON.parse(reply.body));
      return 1;
    },
  });
  return run.then((result) => ({ ...result, sessions: tokens }));
};

/** The sessions telemetry is sent for, and each session's batches as request bodies. */
const telemetrySetup = async (host) => {
  const agent = keepAlive(SESSION_CONCURRENCY);
  const minted = await mintSessions(host, agent, TELEMETRY_SESSIONS, 60);
  agent.destroy();
  if (minted.sessions.length !== TELEMETRY_SESSIONS) throw new Error("could not mint the sessions");
  const sessions = minted.sessions.map((s) => ({
    token: s.token,
    url: s.urls.telemetry,
    bodies: eventLists.map((events) =>
      Buffer.from(JSON.stringify({ token: s.token, player_version: PLAYER_VERSION, events })),
    ),
    sinkEvents: eventLists.map((events) => sinkEvents(s.token, events)),
  }));
  return sessions;
};

/** Batch `i` of a run: the sessions in turn, and for each the event lists in turn. */
const pick = (sessions, i) => {
  const session = sessions[i % sessions.length];
  const list = Math.floor(i / sessions.length) % EVENT_LISTS;
  return { session, list };
};

const telemetryThroughHost = (sessions, agent, seconds) =>
  runFor({
    concurrency: TELEMETRY_CONCURRENCY,
    maxOps: MAX_BATCHES_PER_RUN,
    seconds,
    op: async (i) => {
      const { session, list } = pick(sessions, i);
      const reply = await post(agent, session.url, { "content-type": "text/plain" }, session.bodies[list]);
      const accepted = Number(reply.headers["x-telemetry-accepted"]);
      if (reply.status !== 204 || accepted !== EVENTS_PER_BATCH)
        throw new Error(`telemetry: ${reply.status} accepted ${accepted}: ${reply.body}`);
      return accepted;
    },
  });

/** The limit: the host's own sink on the same engine, called from a bare loop in this process. */
const telemetryStraightToSink = (sessions, sink, seconds) =>
  runFor({
    concurrency: TELEMETRY_CONCURRENCY,
    maxOps: MAX_BATCHES_PER_RUN,
    seconds,
    op: async (i) => {
      const { session, list } = pick(sessions, i);
      const receivedAt = Date.now();
      const events = session.sinkEvents[list].map((e) => ({ ...e, received_at: receivedAt }));
      await Effect.runPromise(sink.write(events));
      return events.length;
    },
  });

/** CPU seconds (user + system) of `pid` while `work` runs, beside what `work` answers. */
const withCpu = async (pids, work) => {
  const before = await Promise.all(pids.map((pid) => cpuSeconds(pid)));
  const result = await work();
  const after = await Promise.all(pids.map((pid) => cpuSeconds(pid)));
  return {
    ...result,
    cpu: after.map((a, i) => a.user + a.system - before[i].user - before[i].system),
  };
};

/**
 * One engine: a host on it and a bare sink on a database of its own on the same engine. Each round
 * mints sessions, then sends telemetry through the host and writes it straight to the sink, the
 * two in alternating order.
 */
const runEngine = async (engine, clip) => {
  const schemaBase = `vod_bench_${process.pid}_${Date.now().toString(36)}`;
  const hostEnv =
    engine === "server"
      ? { VOD_DATABASE_URL: databaseUrl, VOD_DATABASE_SCHEMA: `${schemaBase}_host` }
      : { VOD_STORAGE: "postgres" };
  if (engine === "server") {
    // Dropped on the way out, whatever happened: the host's schema, its queue's, the bare loop's.
    closers.push(async () => {
      const admin = connectPostgres({ connectionString: databaseUrl, poolSize: 1 });
      try {
        for (const schema of [`${schemaBase}_host`, `${schemaBase}_host_jobs`, `${schemaBase}_bare`])
          await dropBenchSchema(admin, schema);
        log(`${engine}: dropped schemas ${schemaBase}_*`);
      } finally {
        await admin.close();
      }
    });
  }
  const profiles = join(scratch, `profiles-${engine}`);
  const nodeArgs = args.profile
    ? [
        "--cpu-prof",
        `--cpu-prof-dir=${profiles}`,
        "--cpu-prof-interval=500",
        "--import",
        pathToFileURL(join(scratch, "count-inserts.mjs")).href,
      ]
    : [];
  const host = await startHost(
    engine,
    clip,
    { ...hostEnv, ...(args.profile ? { VOD_BENCH_STATS_FILE: statsFile } : {}) },
    nodeArgs,
  );
  const hostPid = host.host.child.pid;
  const sessions = await telemetrySetup(host);

  const db =
    engine === "server"
      ? connectPostgres({ connectionString: databaseUrl, schema: `${schemaBase}_bare`, poolSize: 10 })
      : await openPglite(join(scratch, `bare-${engine}-pglite`));
  let open = true;
  const closeDb = async () => {
    if (open) await db.close();
    open = false;
  };
  closers.push(closeDb);
  await migrate(db);
  const sink = postgresTelemetrySink(db);

  const sessionAgent = keepAlive(SESSION_CONCURRENCY);
  const telemetryAgent = keepAlive(TELEMETRY_CONCURRENCY);
  log(`${engine}: warming up (${WARMUP_SECONDS} s each)`);
  await mintSessions(host, sessionAgent, 100, WARMUP_SECONDS);
  await telemetryThroughHost(sessions, telemetryAgent, WARMUP_SECONDS);
  await telemetryStraightToSink(sessions, sink, WARMUP_SECONDS);

  const results = { mint: [], host: [], bare: [] };
  const profileWindows = [];
  const micros = () => Number(process.hrtime.bigint() / 1000n);
  for (let round = 0; round < rounds; round++) {
    const perRound = Math.ceil(sessionsTotal / rounds);
    const mint = await withCpu([hostPid], () => mintSessions(host, sessionAgent, perRound, secondsPerRound));
    results.mint.push(mint);
    log(
      `${engine} round ${round + 1}: minted ${mint.ops} sessions in ${mint.seconds.toFixed(2)} s ` +
        `(${(mint.ops / mint.seconds).toFixed(0)}/s)`,
    );
    const viaHost = async () => {
      const before = await insertStats("host");
      const from = micros();
      const r = await withCpu([hostPid, process.pid], () =>
        telemetryThroughHost(sessions, telemetryAgent, secondsPerRound),
      );
      profileWindows.push([from, micros()]);
      r.inserts = statsDelta(before, await insertStats("host"));
      results.host.push(r);
      log(
        `${engine} round ${round + 1} host: ${r.units} events in ${r.seconds.toFixed(2)} s ` +
          `(${(r.units / r.seconds).toFixed(0)}/s), host CPU ${r.cpu[0].toFixed(2)} s, client CPU ${r.cpu[1].toFixed(2)} s` +
          (r.inserts ? `, ${r.inserts.statements} INSERTs` : ""),
      );
    };
    const bare = async () => {
      const before = await insertStats("self");
      const r = await withCpu([process.pid], () => telemetryStraightToSink(sessions, sink, secondsPerRound));
      r.inserts = statsDelta(before, await insertStats("self"));
      results.bare.push(r);
      log(
        `${engine} round ${round + 1} bare: ${r.units} events in ${r.seconds.toFixed(2)} s ` +
          `(${(r.units / r.seconds).toFixed(0)}/s), CPU ${r.cpu[0].toFixed(2)} s` +
          (r.inserts ? `, ${r.inserts.statements} INSERTs` : ""),
      );
    };
    if (round % 2 === 0) {
      await viaHost();
      await bare();
    } else {
      await bare();
      await viaHost();
    }
  }
  sessionAgent.destroy();
  telemetryAgent.destroy();

  // Every event the bare loop wrote is in its table (the host's count is its x-telemetry-accepted,
  // sent only once the events are stored).
  const written = [...results.bare].reduce((n, r) => n + r.units, 0);
  const { rows } = await db.query("SELECT count(*)::int8 AS n FROM telemetry_events");
  const stored = Number(rows[0].n);
  if (stored < written) throw new Error(`bare sink: ${written} events written, ${stored} in the table`);

  await closeDb();
  await host.host.stop();
  let profile;
  if (args.profile) profile = await summarizeProfile(profiles, profileWindows);
  const bodyKiB = median(sessions.flatMap((s) => s.bodies.map((b) => b.length))) / 1024;
  return { engine, results, stored, profile, bodyKiB };
};

// ---------------------------------------------------------------------------------------------
// --profile: where the host's main thread spends the telemetry runs (samples inside them only).

const summarizeProfile = async (dir, windows) => {
  const name = (await readdir(dir)).find((f) => f.endsWith(".cpuprofile"));
  if (!name) return undefined;
  const profile = JSON.parse(await readFile(join(dir, name), "utf8"));
  return summarizeCpuProfile(profile, windows);
};

// ---------------------------------------------------------------------------------------------

try {
  const loadBefore = loadAverage();
  const header =
    `${new Date().toISOString()}  node ${process.version}  ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}  ` +
    `load average at start ${loadBefore}\nbuild measured: ${repo} ${describeBuild()}`;
  if (args.profile) await setupProfile();
  const clip = join(scratch, "clip.mp4");
  await makeClip(clip);
  const engines = [await runEngine("pglite", clip)];
  if (args.server) engines.push(await runEngine("server", clip));

  const rows = [];
  const notes = [];
  for (const { engine, results, stored, profile } of engines) {
    const name = engine === "pglite" ? "PGlite (embedded, the default)" : "Postgres server (pg pool of 10)";
    const rate = (r) => r.units / r.seconds;
    const all = (list) => list.flatMap((r) => r.latencies);
    const ms = (v) => `${fmt(v, 1)} ms`;
    const mint = results.mint;
    rows.push([
      `sessions: vod host POST /v1/playback/sessions, ${name}`,
      sum(mint.map((r) => r.ops)),
      fmt(sum(mint.map((r) => r.seconds))),
      `${fmt(median(mint.map(rate)), 0)}${spread(mint.map(rate), 0)}`,
      ms(percentile(all(mint), 50)),
      ms(percentile(all(mint), 99)),
      "—",
      "info",
      "—",
    ]);
    const bare = results.bare;
    const host = results.host;
    rows.push([
      `telemetry limit: bare loop → postgresTelemetrySink, ${name}`,
      sum(bare.map((r) => r.units)),
      fmt(sum(bare.map((r) => r.seconds))),
      `${fmt(median(bare.map(rate)), 0)}${spread(bare.map(rate), 0)}`,
      ms(percentile(all(bare), 50)),
      ms(percentile(all(bare), 99)),
      "1.00",
      "—",
      "—",
    ]);
    const ratio = median(host.map((r, i) => rate(r) / rate(bare[i])));
    rows.push([
      `telemetry: vod host POST /v1/telemetry, ${name}`,
      sum(host.map((r) => r.units)),
      fmt(sum(host.map((r) => r.seconds))),
      `${fmt(median(host.map(rate)), 0)}${spread(host.map(rate), 0)}`,
      ms(percentile(all(host), 50)),
      ms(percentile(all(host), 99)),
      fmt(ratio),
      "≥ 0.50",
      ratio >= 0.5 ? "pass" : "FAIL",
    ]);
    const batchRate = (r) => r.ops / r.seconds;
    const per100k = (cpu, r) => (cpu / r.units) * 100_000;
    notes.push(
      `${engine}: host ${fmt(median(host.map(batchRate)), 0)} batches/s${spread(host.map(batchRate), 0)}; ` +
        `per-round ratios host/bare ${host.map((r, i) => fmt(rate(r) / rate(bare[i]))).join(", ")}; ` +
        `bare table holds ${stored} rows after warm-up and rounds`,
      `${engine}: CPU seconds per 100k events: host process ${fmt(median(host.map((r) => per100k(r.cpu[0], r))))}, ` +
        `the client meanwhile ${fmt(median(host.map((r) => per100k(r.cpu[1], r))))}; bare loop (this process, ` +
        `${engine === "pglite" ? "PGlite included" : "the server's backends not counted"}) ` +
        `${fmt(median(bare.map((r) => per100k(r.cpu[0], r))))}; sessions: host CPU ${fmt(median(mint.map((r) => (r.cpu[0] / r.ops) * 1000)))} s per 1000`,
    );
    const inserts = (list) => {
      const total = list.reduce(
        (t, r) => ({
          statements: t.statements + r.inserts.statements,
          events: t.events + r.inserts.events,
          ms: t.ms + r.inserts.ms,
        }),
        { statements: 0, events: 0, ms: 0 },
      );
      return (
        `${total.statements} INSERTs, ${fmt(total.events / total.statements, 0)} events each, ` +
        `${fmt(total.ms / total.statements, 1)} ms each, ${fmt(total.ms / 1000 / (total.events / 100_000))} s per 100k events`
      );
    };
    if (args.profile)
      notes.push(`${engine} --profile: telemetry INSERTs: host ${inserts(host)}; bare loop ${inserts(bare)}`);
    if (profile) {
      notes.push(
        `${engine} --profile: host main thread busy ${fmt(profile.total / 1e6)} s of ${fmt(profile.wall / 1e6)} s of telemetry runs`,
      );
      console.log(`\n${engine}: where the host's main thread went during the telemetry runs\n`);
      console.log(table(["where (main thread)", "self s", "share"], profile.places));
      console.log();
      console.log(table(["function (main thread)", "self s", "share"], profile.functions));
    }
  }
  notes.push(
    `${rounds} round(s) of ${secondsPerRound} s per telemetry scenario (host and bare alternate which goes first), ` +
      `${Math.ceil(sessionsTotal / rounds)} sessions per round; per second is the median over rounds ` +
      `(each round in parentheses), ratio the median of per-round ratios; p50/p99 over every request or write call`,
    `telemetry: ${TELEMETRY_CONCURRENCY} batches in flight of ${EVENTS_PER_BATCH} events, text/plain, ` +
      `${fmt(engines[0].bodyKiB, 1)} KiB (median) ` +
      `per body, round-robin over ${TELEMETRY_SESSIONS} sessions; sessions: ${SESSION_CONCURRENCY} in flight, x-api-key`,
    `load average at start ${loadBefore}, at end ${loadAverage()}`,
  );
  console.log(`\n${header}\n`);
  console.log(
    table(["scenario", "count", "seconds", "per second", "p50", "p99", "ratio", "target", "pass/fail"], rows),
  );
  console.log(`\n${notes.map((l) => `- ${l}`).join("\n")}\n`);
} finally {
  await cleanup();
}

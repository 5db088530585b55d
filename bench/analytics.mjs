#!/usr/bin/env node
// Playback analytics on server Postgres: each metric over 90 days of one tenant with 10 million
// telemetry events (p95 of 20 queries; target <= 200 ms), and telemetry intake into the sink with
// views folded as events are stored against raw events only, side by side in one run (target:
// with / without >= 0.9).
//
// Not timed: the data. 10 million events of one tenant are made in this process (a seeded
// generator: play, first frame with a startup time, a heartbeat every 10 s, stalls, errors, exits
// before the first frame, ended), spread over 90 days by the time the service would have received
// each view's first event, and folded into views with the core's own fold (`foldViews`, what the
// sink runs); the views are inserted into playback_views in batches, with the columns the sink
// writes, and their rollups built by the migration's own statement (`buildRollupsSql`), as the sink
// would have kept them. The raw events themselves are not stored: no query reads telemetry_events.
// Timed: each metric through the adapter's query (the port the use case calls), 20 times over the
// whole range; then as a series per day and per hour, grouped by asset, for one asset, and over a
// range that starts and ends inside an hour (the last 90 days as of a moment: edges read from the
// views). Intake: 32 writers each writing 50-event batches (a session's next events, a new session
// every 20 batches, each of one of the 50 assets, 4 renditions and 3 player versions) for `--seconds`, into
// `postgresTelemetrySink(db)` and `postgresTelemetrySink(db, { views: false })` in alternating
// rounds; events/s is the median of the rounds, the ratio the median of per-round ratios.
//
//   node bench/analytics.mjs [--events 10000000] [--rounds 3] [--seconds 5] [--quick]
import { parseArgs } from "node:util";
import { Effect } from "effect";
import {
  cleanUpOnSignals,
  describeBuild,
  dropBenchSchema,
  fmt,
  fromRepo,
  loadAverage,
  median,
  spread,
  table,
} from "./lib.mjs";

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    events: { type: "string" },
    rounds: { type: "string" },
    seconds: { type: "string" },
    "database-url": { type: "string", default: "postgres://postgres@127.0.0.1:5432/postgres" },
  },
});
const totalEvents = Number(args.events ?? (args.quick ? 1_000_000 : 10_000_000));
const rounds = Number(args.rounds ?? (args.quick ? 1 : 3));
const seconds = Number(args.seconds ?? (args.quick ? 3 : 5));
const QUERIES = 20;
const WRITERS = 32;
const BATCH = 50;
const DAY = 86_400_000;

const { buildRollupsSql, connectPostgres, migrate, postgresTelemetrySink } =
  await fromRepo("adapters/postgres");
const { foldViews, ANALYTICS_METRICS } = await fromRepo("core");
const log = (...parts) => console.error(`[${new Date().toISOString().slice(11, 19)}]`, ...parts);

const schema = `vod_bench_analytics_${process.pid}`;
const url = args["database-url"];
const admin = connectPostgres({ connectionString: url, poolSize: 1 });
const db = connectPostgres({ connectionString: url, schema, poolSize: 8 });
let cleaning;
const cleanup = () => {
  cleaning ??= (async () => {
    await db.close().catch(() => {});
    await dropBenchSchema(admin, schema).catch((e) => log(`cleanup: ${e?.message ?? e}`));
    await admin.close();
  })();
  return cleaning;
};
cleanUpOnSignals(cleanup, log);

// ---------------------------------------------------------------------------------------------
// Data: views of one tenant, folded from generated events.

/** mulberry32: a small seeded generator, so that every run measures the same data. */
const random = (() => {
  let a = 0x5eed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
})();
const pick = (list) => list[Math.floor(random() * list.length)];
const normal = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());

const TENANT = "tnt_bench_analytics";
const ASSETS = Array.from({ length: 50 }, (_, i) => `ast_bench_${i}`);
const RENDITIONS = ["360p", "540p", "720p", "1080p"];
const VERSIONS = ["hls.js 1.5", "hls.js 1.6", "vod-player 0.3"];
const start = Math.floor(Date.now() / DAY) * DAY - 90 * DAY;

/** One view's events: what a player of the client kit sends. */
const viewEvents = (sessionId) => {
  const received = start + Math.floor(random() * 90 * DAY);
  const base = {
    tenant_id: TENANT,
    session_id: sessionId,
    // A few assets are watched far more than the rest.
    asset_id: ASSETS[Math.floor(ASSETS.length * random() ** 2)],
    received_at: received,
    player_version: pick(VERSIONS),
    rendition: null,
    startup_ms: null,
  };
  const events = [];
  const at = (event, ts, more = {}) => events.push({ ...base, event, ts_ms: ts, ...more });
  at("play", 0);
  if (random() < 0.02) {
    at("heartbeat", 5_000);
    return events;
  }
  const startup = Math.round(Math.exp(6.6 + 0.6 * normal()));
  at("first_frame", startup, { startup_ms: startup, rendition: pick(RENDITIONS) });
  let t = startup;
  const beats = 5 + Math.floor(random() * 66);
  for (let i = 0; i < beats; i++) {
    t += 10_000;
    if (random() < 0.01) {
      const stall = 500 + Math.floor(random() * 4_500);
      at("stall_start", t);
      t += stall;
      at("stall_end", t);
    }
    at("heartbeat", t);
  }
  if (random() < 0.01) at("error", t + 1_000);
  else at("ended", t + 1_000);
  return events;
};

const VIEW_COLUMNS = [
  ["tenant_id", "text"],
  ["session_id", "text"],
  ["asset_id", "text"],
  ["player_version", "text"],
  ["rendition", "text"],
  ["first_received_at", "int8"],
  ["last_ts_ms", "float8"],
  ["play_ts_ms", "float8"],
  ["state", "text"],
  ["played", "bool"],
  ["started", "bool"],
  ["failed", "bool"],
  ["startup_ms", "float8"],
  ["playing_ms", "float8"],
  ["stall_ms", "float8"],
  ["stalls", "int4"],
];
const INSERT_VIEWS = `INSERT INTO playback_views (${VIEW_COLUMNS.map(([n]) => n).join(", ")})
SELECT * FROM unnest(${VIEW_COLUMNS.map(([, t], i) => `$${i + 1}::${t}[]`).join(", ")})`;

const generate = async () => {
  const t0 = performance.now();
  let events = 0;
  let views = 0;
  let pending = [];
  const flush = async () => {
    if (pending.length === 0) return;
    await db.query(
      INSERT_VIEWS,
      VIEW_COLUMNS.map(([n]) => pending.map((v) => v[n])),
    );
    views += pending.length;
    pending = [];
  };
  while (events < totalEvents) {
    const batch = viewEvents(`pbs_bench_${views + pending.length}`);
    events += batch.length;
    for (const view of foldViews(new Map(), batch).values()) pending.push(view);
    if (pending.length >= 5_000) await flush();
  }
  await flush();
  // A build without rollups (to measure the one before) answers from the views alone.
  if (buildRollupsSql) await db.exec(buildRollupsSql);
  // This schema's tables only: a bare VACUUM would take every table of the shared database.
  await db.exec(
    `VACUUM ANALYZE playback_views${buildRollupsSql ? ", playback_rollups, playback_startup_rollups" : ""}`,
  );
  log(`${events} events folded into ${views} views in ${fmt((performance.now() - t0) / 1000, 1)} s`);
  return { events, views };
};

// ---------------------------------------------------------------------------------------------
// Queries.

const p95 = (values) => [...values].sort((a, b) => a - b)[Math.ceil(0.95 * values.length) - 1];

const timeQueries = async (sink, metric, shape) => {
  const query = { tenantId: TENANT, from: start, to: start + 90 * DAY, ...shape };
  if (shape.from !== undefined && shape.to === undefined) query.to = shape.from + 90 * DAY;
  const run = () =>
    Effect.runPromise(metric === "startup_time_ms" ? sink.startupPercentiles(query) : sink.viewTotals(query));
  await run();
  const times = [];
  let rows = 0;
  for (let i = 0; i < QUERIES; i++) {
    const t0 = performance.now();
    rows = (await run()).length;
    times.push(performance.now() - t0);
  }
  return { p50: median(times), p95: p95(times), rows };
};

// ---------------------------------------------------------------------------------------------
// Intake.

const intake = async (sink, round) => {
  let stored = 0;
  const deadline = performance.now() + seconds * 1000;
  const writer = async (w) => {
    let view;
    for (let n = 0; performance.now() < deadline; n++) {
      // A view of one of the assets, renditions and player versions: the rollup rows a statement
      // touches are those of many views, as in production, not one asset's.
      if (n % 20 === 0)
        view = {
          session: `pbs_intake_${round}_${w}_${n / 20}`,
          asset: ASSETS[Math.floor(ASSETS.length * random() ** 2)],
          rendition: pick(RENDITIONS),
          version: pick(VERSIONS),
        };
      const events = Array.from({ length: BATCH }, (_, i) => ({
        tenant_id: "tnt_bench_intake",
        session_id: view.session,
        asset_id: view.asset,
        received_at: Date.now(),
        player_version: view.version,
        event: n % 20 === 0 && i === 0 ? "play" : n % 20 === 0 && i === 1 ? "first_frame" : "heartbeat",
        ts_ms: ((n % 20) * BATCH + i) * 1_000,
        playhead_ms: ((n % 20) * BATCH + i) * 1_000,
        rendition: view.rendition,
        error_code: null,
        startup_ms: n % 20 === 0 && i === 1 ? 800 : null,
        stall_ms: null,
        bitrate_kbps: 2_400,
        extra: {},
      }));
      await Effect.runPromise(sink.write(events));
      stored += events.length;
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
  return stored / ((performance.now() - t0) / 1000);
};

try {
  log(`schema ${schema}; load ${loadAverage()}`);
  await migrate(db);
  const data = await generate();
  const sink = postgresTelemetrySink(db);

  const queryRows = [];
  for (const metric of ANALYTICS_METRICS) {
    const r = await timeQueries(sink, metric, {});
    queryRows.push([metric, "one value", fmt(r.p50, 1), fmt(r.p95, 1), r.p95 <= 200 ? "yes" : "no"]);
  }
  const asset = ASSETS[0];
  const unaligned = start + 37 * 60_000 + 13_000;
  for (const [label, shape] of [
    ["per day", { interval: "day" }],
    ["per asset", { groupBy: "asset" }],
    ["per hour", { interval: "hour" }],
    ["one asset", { assetId: asset }],
    ["one asset per hour", { assetId: asset, interval: "hour" }],
    ["from inside an hour", { from: unaligned }],
    ["from inside an hour per hour", { from: unaligned, interval: "hour" }],
  ])
    for (const metric of ["views", "startup_time_ms"]) {
      const r = await timeQueries(sink, metric, shape);
      queryRows.push([
        metric,
        `${label} (${r.rows} rows)`,
        fmt(r.p50, 1),
        fmt(r.p95, 1),
        r.p95 <= 200 ? "yes" : "no",
      ]);
    }

  const withViews = [];
  const without = [];
  const ratios = [];
  const rawOnly = postgresTelemetrySink(db, { views: false });
  for (let round = 0; round < rounds; round++) {
    // Alternating order, so that neither always runs on a warmer or a busier machine.
    const order = round % 2 === 0 ? ["without", "with"] : ["with", "without"];
    const got = {};
    for (const which of order)
      got[which] = await intake(which === "with" ? sink : rawOnly, `${round}${which}`);
    withViews.push(got.with);
    without.push(got.without);
    ratios.push(got.with / got.without);
    log(`round ${round + 1}: with views ${fmt(got.with, 0)} events/s, raw only ${fmt(got.without, 0)}`);
  }

  console.log(`\nanalytics on server Postgres ${describeBuild()}; load average ${loadAverage()}`);
  console.log(
    `${data.events.toLocaleString("en")} events of one tenant over 90 days, folded into ${data.views.toLocaleString("en")} views; ${QUERIES} queries each over the whole range\n`,
  );
  console.log(table(["metric", "shape", "p50 ms", "p95 ms", "p95 <= 200 ms"], queryRows));
  console.log(
    `\ntelemetry intake into the sink, ${WRITERS} writers of ${BATCH}-event batches, ${rounds} × ${seconds} s each\n`,
  );
  console.log(
    table(
      ["events/s with views", "events/s raw only", "with / without (target >= 0.9)"],
      [
        [
          `${fmt(median(withViews), 0)}${spread(withViews, 0)}`,
          `${fmt(median(without), 0)}${spread(without, 0)}`,
          `${fmt(median(ratios))}${spread(ratios)}`,
        ],
      ],
    ),
  );
} finally {
  await cleanup();
}

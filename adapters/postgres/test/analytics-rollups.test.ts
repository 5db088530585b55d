import { postgresTelemetrySink, type SqlDatabase } from "@vod/adapter-postgres";
import { uid } from "@vod/contract-tests";
import {
  ANALYTICS_GROUPS,
  AssetId,
  PlaybackSessionId,
  type PlaybackView,
  percentilesOfViews,
  type TelemetryEvent,
  type TelemetrySink,
  TenantId,
  totalsOfViews,
  type ViewQuery,
  type ViewTotals,
} from "@vod/core";
import { Effect } from "effect";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { migratedOnce, onEachEngine } from "./engines.js";

const HOUR = 3_600_000;
const DAY = 86_400_000;
/** A UTC midnight: the generated views are received over the four days after it. */
const BASE = Math.floor(1_795_000_000_000 / DAY) * DAY;
const ASSETS = ["ast_a", "ast_b", "ast_c"];

/** A time in the four days: on an hour (midnights among them), just before a midnight, or any. */
const instant = fc.oneof(
  fc.integer({ min: 0, max: 4 * 24 - 1 }).map((h) => BASE + h * HOUR),
  fc.integer({ min: 1, max: 4 }).map((d) => BASE + d * DAY - 1),
  fc.integer({ min: 0, max: 4 * DAY - 1 }).map((t) => BASE + t),
);

interface GeneratedEvent {
  readonly event: string;
  readonly step: number;
  readonly rendition: string | null;
  readonly startup_ms: number | null;
}
interface Batch {
  readonly received_at: number;
  readonly player_version: string | null;
  readonly events: ReadonlyArray<GeneratedEvent>;
}
interface Session {
  readonly asset: string;
  readonly batches: ReadonlyArray<Batch>;
}

// '' is a value of its own, never the null of a view that named no rendition or player version.
const anEvent: fc.Arbitrary<GeneratedEvent> = fc.record({
  event: fc.constantFrom(
    "play",
    "first_frame",
    "heartbeat",
    "heartbeat",
    "pause",
    "stall_start",
    "stall_end",
    "error",
    "ended",
  ),
  step: fc.integer({ min: 0, max: 40_000 }),
  rendition: fc.constantFrom(null, null, "", "360p", "720p"),
  startup_ms: fc.oneof(
    fc.constant(null),
    fc.constantFrom(0, 0.5, 1, 400, 1_000),
    fc.double({ min: 0, max: 30_000, noNaN: true }),
  ),
});
const aBatch: fc.Arbitrary<Batch> = fc.record({
  // Later batches may be received earlier (another node's clock): the view's hour moves.
  received_at: instant,
  player_version: fc.constantFrom(null, null, "", "p1", "p2"),
  events: fc.array(anEvent, { minLength: 1, maxLength: 5 }),
});
const aSession: fc.Arbitrary<Session> = fc.record({
  asset: fc.constantFrom(...ASSETS),
  batches: fc.array(aBatch, { minLength: 1, maxLength: 4 }),
});

type Shape = Omit<ViewQuery, "tenantId">;
const aShape: fc.Arbitrary<Shape> = fc
  .record({
    from: fc.oneof(instant, fc.constant(BASE - DAY)),
    length: fc.oneof(
      fc.integer({ min: 1, max: 5 * DAY }),
      fc.integer({ min: 1, max: 5 * 24 }).map((h) => h * HOUR),
      fc.integer({ min: 1, max: 5 }).map((d) => d * DAY),
    ),
    interval: fc.constantFrom(undefined, "hour" as const, "day" as const),
    groupBy: fc.constantFrom(undefined, ...ANALYTICS_GROUPS),
    assetId: fc.constantFrom(undefined, undefined, ...ASSETS, "ast_none"),
  })
  .map(({ from, length, assetId, ...shape }) => ({
    from,
    to: from + length,
    ...shape,
    ...(assetId === undefined ? {} : { assetId: AssetId(assetId) }),
  }));

/** A session's batches as telemetry events, its player clock running on. */
const eventsOf = (tenant: string, session: string, s: Session): TelemetryEvent[][] => {
  let ts = 0;
  return s.batches.map((b) =>
    b.events.map((e) => {
      ts += e.step;
      return {
        tenant_id: TenantId(tenant),
        session_id: PlaybackSessionId(session),
        asset_id: AssetId(s.asset),
        received_at: b.received_at,
        player_version: b.player_version,
        event: e.event,
        ts_ms: ts,
        playhead_ms: ts,
        rendition: e.rendition,
        error_code: null,
        startup_ms: e.startup_ms,
        stall_ms: null,
        bitrate_kbps: null,
        extra: {},
      };
    }),
  );
};

/** The views as stored, read around the policies (the test connects as the superuser). */
const storedViews = async (db: SqlDatabase, tenant: string) =>
  (
    await db.query<PlaybackView>(
      `SELECT tenant_id, session_id, asset_id, player_version, rendition, first_received_at, last_ts_ms,
         play_ts_ms, state, played, started, failed, startup_ms, playing_ms, stall_ms, stalls
       FROM playback_views WHERE tenant_id = $1`,
      [tenant],
    )
  ).rows.map((v) => ({ ...v, first_received_at: Number(v.first_received_at) }));

/** Sums within 1e-6 relative (and 1e-6 ms where they are 0: a moved view may leave a residue). */
const close = (a: number, b: number) => Math.abs(a - b) <= 1e-6 * Math.max(Math.abs(a), Math.abs(b), 1);

/** The answer from rollups against the answer from the views: counts exact, sums close. */
const expectSameTotals = (
  actual: ReadonlyArray<ViewTotals>,
  wanted: ReadonlyArray<ViewTotals>,
  what: unknown,
) => {
  const counts = (t: ViewTotals) => ({
    ...(t.bucket === undefined ? {} : { bucket: t.bucket }),
    ...(t.group === undefined ? {} : { group: t.group }),
    views: t.views,
    stalls: t.stalls,
    failures: t.failures,
    exits: t.exits,
  });
  expect(actual.map(counts), JSON.stringify(what)).toEqual(wanted.map(counts));
  for (const [i, t] of actual.entries()) {
    const w = wanted[i] as ViewTotals;
    expect(
      close(t.playing_ms, w.playing_ms) && close(t.stall_ms, w.stall_ms),
      JSON.stringify({ what, t, w }),
    ).toBe(true);
  }
};

const expectAnswers = async (sink: TelemetrySink, views: ReadonlyArray<PlaybackView>, query: ViewQuery) => {
  expectSameTotals(await Effect.runPromise(sink.viewTotals(query)), totalsOfViews(views, query), query);
  expect(await Effect.runPromise(sink.startupPercentiles(query)), JSON.stringify(query)).toEqual(
    percentilesOfViews(views, query),
  );
};

onEachEngine(({ name, open, separatePools }) => {
  describe(`analytics rollups on ${name}`, () => {
    const engine = migratedOnce(open);
    beforeAll(() => engine.db(), 120_000);

    it("answers any range, interval, group and asset as the folded views do", async () => {
      const db = await engine.db();
      const sink = postgresTelemetrySink(db);
      await fc.assert(
        fc.asyncProperty(
          fc.array(aSession, { minLength: 1, maxLength: 6 }),
          fc.array(aShape, { minLength: 6, maxLength: 10 }),
          async (sessions, shapes) => {
            const tenant = uid("tnt");
            const batches = sessions.map((s) => eventsOf(tenant, uid("pbs"), s));
            // Round by round, each session's next batch; the calls of a round share statements.
            for (let round = 0; batches.some((b) => b.length > round); round++)
              await Promise.all(
                batches.flatMap((b) => {
                  const events = b[round];
                  return events ? [Effect.runPromise(sink.write(events))] : [];
                }),
              );
            const views = await storedViews(db, tenant);
            expect(views).toHaveLength(sessions.length);
            for (const shape of shapes)
              await expectAnswers(sink, views, { tenantId: TenantId(tenant), ...shape });
            // The whole four days in every shape: days, hours and edges of views all in play.
            for (const interval of [undefined, "hour", "day"] as const)
              for (const groupBy of [undefined, ...ANALYTICS_GROUPS])
                await expectAnswers(sink, views, {
                  tenantId: TenantId(tenant),
                  from: BASE - 30 * 60_000,
                  to: BASE + 4 * DAY + 1,
                  interval,
                  groupBy,
                });
          },
        ),
        { seed: 29, numRuns: name === "postgres" ? 60 : 30, endOnFailure: true },
      );
    }, 300_000);

    it("keeps the rollups equal to the views' sums when two nodes write the same sessions at once", async () => {
      const db = await engine.db();
      // Two nodes: two pools on the server; PGlite is one process's database, two sinks over it.
      const other = separatePools ? await engine.another() : db;
      const sinks = [postgresTelemetrySink(db), postgresTelemetrySink(other)];
      const tenant = uid("tnt");
      const sessions = Array.from({ length: 12 }, (_, i) => ({
        id: uid("pbs"),
        asset: ASSETS[i % 3] as string,
      }));
      // 8 batches per session; they cross hours (and a midnight), name their rendition and player
      // version late, and carry startup times and stalls.
      const batchOf = (s: (typeof sessions)[number], i: number, n: number): TelemetryEvent[] =>
        [0, 1, 2].map((k) => {
          const ts = n * 30_000 + k * 10_000;
          const event =
            n === 0 && k === 0
              ? "play"
              : n === 1 && k === 0
                ? "first_frame"
                : k === 1
                  ? "stall_start"
                  : "stall_end";
          return {
            tenant_id: TenantId(tenant),
            session_id: PlaybackSessionId(s.id),
            asset_id: AssetId(s.asset),
            // Odd batches were received an hour earlier (another node's clock): the view's hour moves.
            received_at: BASE + DAY - HOUR + (i + n) * 9 * 60_000 - (n % 2) * HOUR,
            player_version: n < 2 ? null : `p${i % 2}`,
            event,
            ts_ms: ts,
            playhead_ms: ts,
            rendition: n < 3 ? null : `${360 + 180 * (i % 3)}p`,
            error_code: null,
            startup_ms: event === "first_frame" ? 200 + 97 * i : null,
            stall_ms: null,
            bitrate_kbps: null,
            extra: {},
          };
        });
      // Four rounds; in each, every session's next two batches, one through each node, at once.
      for (let round = 0; round < 4; round++)
        await Promise.all(
          sessions.flatMap((s, i) =>
            [0, 1].map((node) =>
              Effect.runPromise((sinks[node] as TelemetrySink).write(batchOf(s, i, 2 * round + node))),
            ),
          ),
        );
      const views = await storedViews(db, tenant);
      expect(views).toHaveLength(12);
      expect(views.every((v) => v.started && v.rendition !== null && v.player_version !== null)).toBe(true);
      // Whole days and whole hours: answered from the rollups alone.
      for (const interval of [undefined, "hour", "day"] as const)
        for (const groupBy of [undefined, ...ANALYTICS_GROUPS])
          for (const assetId of [undefined, AssetId("ast_b")]) {
            const query = {
              tenantId: TenantId(tenant),
              from: BASE,
              to: BASE + 3 * DAY,
              interval,
              groupBy,
              assetId,
            };
            await expectAnswers(sinks[1] as TelemetrySink, views, query);
          }
      const hours = await Effect.runPromise(
        (sinks[0] as TelemetrySink).viewTotals({
          tenantId: TenantId(tenant),
          from: BASE,
          to: BASE + 3 * DAY,
          interval: "hour",
        }),
      );
      expect(hours.reduce((n, h) => n + h.views, 0)).toBe(12);
      expect(hours.length).toBeGreaterThan(1);
    }, 120_000);
  });
});

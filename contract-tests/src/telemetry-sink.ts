import {
  AssetId,
  PlaybackSessionId,
  type StorageError,
  startupBucket,
  startupBucketValue,
  type TelemetryEvent,
  type TelemetrySink,
  TenantId,
} from "@vod/core";
import { Effect, Either } from "effect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { uid } from "./fixtures.js";

export interface TelemetrySinkSubject {
  readonly sink: TelemetrySink;
  /** Backdoor: the session's events as really stored (the array, the table), in the order stored. */
  readonly read: (sessionId: string) => Promise<ReadonlyArray<TelemetryEvent>>;
  readonly cleanup: () => Promise<void>;
}

const write = (sink: TelemetrySink, events: ReadonlyArray<TelemetryEvent>) =>
  Effect.runPromise(sink.write(events));
const attemptWrite = (sink: TelemetrySink, events: ReadonlyArray<TelemetryEvent>) =>
  Effect.runPromise(Effect.either(sink.write(events)));

const RECEIVED_AT = 1_795_000_000_123;

/** A heartbeat of `sessionId` with every optional field null and no extra keys. */
const anEvent = (sessionId: string, n: number, over: Partial<TelemetryEvent> = {}): TelemetryEvent => ({
  tenant_id: TenantId("tnt_telemetry"),
  session_id: PlaybackSessionId(sessionId),
  asset_id: AssetId("ast_telemetry"),
  received_at: RECEIVED_AT,
  player_version: null,
  event: "heartbeat",
  ts_ms: RECEIVED_AT - 5_000 + n,
  playhead_ms: n * 1_000.25,
  rendition: null,
  error_code: null,
  startup_ms: null,
  stall_ms: null,
  bitrate_kbps: null,
  extra: {},
  ...over,
});

const eventsOf = (sessionId: string, count: number, from = 0) =>
  Array.from({ length: count }, (_, i) => anEvent(sessionId, from + i));

/**
 * The TelemetrySink port: a write resolves once its events are stored, every field as given, in
 * order, exactly once, also when many calls run at once and share one write underneath.
 */
export const describeTelemetrySink = (name: string, makeSubject: () => Promise<TelemetrySinkSubject>) =>
  describe(`TelemetrySink [${name}]`, () => {
    let subject: TelemetrySinkSubject;
    beforeEach(async () => {
      subject = await makeSubject();
    });
    afterEach(async () => subject.cleanup());

    it("stores every field as written, nulls and nested extra keys included, in order", async () => {
      const session = uid("pbs");
      const events: TelemetryEvent[] = [
        anEvent(session, 0, { event: "first_frame", player_version: "hls.js 1.5.20", startup_ms: 812.5 }),
        anEvent(session, 1, {
          player_version: "hls.js 1.5.20",
          event: "error",
          ts_ms: 1_795_000_000_000.375,
          playhead_ms: 0,
          rendition: "1080p",
          error_code: "MEDIA_ERR_DECODE",
          startup_ms: 0.1,
          stall_ms: 1e-7,
          bitrate_kbps: 1e21,
          extra: {
            note: 'Grüße, 東京 🎬 "quoted" back\\slash, {braces} and\na newline',
            nested: { list: [1, "two", null, true, { deep: [[]] }], empty: {} },
            flag: false,
            nothing: null,
            tiny: 5e-324,
            negative: -42.5,
          },
        }),
        // Strings that mean something to array and CSV syntaxes must come back as strings.
        anEvent(session, 2, { rendition: "NULL", error_code: "", player_version: "\\N", event: "x-custom" }),
        anEvent(session, 3, { extra: { "key with spaces": "", ключ: "значение" } }),
      ];
      await write(subject.sink, events);
      expect(await subject.read(session)).toEqual(events);
    });

    it("keeps the order of consecutive writes to one session", async () => {
      const session = uid("pbs");
      const first = eventsOf(session, 3);
      const second = eventsOf(session, 2, 3).map((e) => ({ ...e, event: "pause" }));
      await write(subject.sink, first);
      await write(subject.sink, second);
      expect(await subject.read(session)).toEqual([...first, ...second]);
    });

    it("takes an empty write and stores nothing", async () => {
      await write(subject.sink, []);
      const session = uid("pbs");
      await Promise.all([write(subject.sink, []), write(subject.sink, eventsOf(session, 1))]);
      expect(await subject.read(session)).toEqual(eventsOf(session, 1));
    });

    it("stores 50 concurrent writes exactly once each, each readable when its write resolves", async () => {
      const sessions = Array.from({ length: 50 }, () => uid("pbs"));
      const seenOnResolve = await Promise.all(
        sessions.map(async (session) => {
          await write(subject.sink, eventsOf(session, 10));
          return subject.read(session);
        }),
      );
      sessions.forEach((session, i) => {
        expect(seenOnResolve[i]).toEqual(eventsOf(session, 10));
      });
      for (const session of sessions) expect(await subject.read(session)).toEqual(eventsOf(session, 10));
    });

    it("stores concurrent writes to one session each whole and in its own order", async () => {
      const session = uid("pbs");
      const calls = Array.from({ length: 20 }, (_, call) =>
        eventsOf(session, 5, call * 5).map((e) => ({ ...e, extra: { call } })),
      );
      await Promise.all(calls.map((events) => write(subject.sink, events)));
      const stored = await subject.read(session);
      expect(stored).toHaveLength(100);
      // Calls may interleave with each other, never within one: each call's events stay adjacent.
      for (const events of calls) {
        const at = stored.findIndex((e) => e.ts_ms === events[0]?.ts_ms);
        expect(stored.slice(at, at + events.length)).toEqual(events);
      }
    });

    it("stores a large write whole and in order", async () => {
      const session = uid("pbs");
      const events = eventsOf(session, 20_000).map((e, i) => ({ ...e, extra: { i } }));
      await write(subject.sink, events);
      const stored = await subject.read(session);
      expect(stored).toHaveLength(events.length);
      expect(stored.map((e) => e.extra.i)).toEqual(events.map((_, i) => i));
      expect(stored[19_999]).toEqual(events[19_999]);
    });

    it("fails or stores a write it may refuse on its own: writes beside it still land", async () => {
      // Postgres keeps no NUL character in text or jsonb; a memory sink keeps it. Either way the
      // call is all or nothing, and the calls that share its write are not spoiled by it.
      const sessions = Array.from({ length: 8 }, () => uid("pbs"));
      const odd = uid("pbs");
      const oddEvents = eventsOf(odd, 3).map((e, i) => (i === 1 ? { ...e, extra: { text: "a\u0000b" } } : e));
      const results = await Promise.all([
        ...sessions.slice(0, 4).map((s) => attemptWrite(subject.sink, eventsOf(s, 4))),
        attemptWrite(subject.sink, oddEvents),
        ...sessions.slice(4).map((s) => attemptWrite(subject.sink, eventsOf(s, 4))),
      ]);
      const oddResult = results[4] as Either.Either<void, StorageError>;
      expect(results.filter(Either.isLeft)).toHaveLength(Either.isLeft(oddResult) ? 1 : 0);
      if (Either.isLeft(oddResult)) {
        expect(oddResult.left._tag).toBe("StorageError");
        expect(await subject.read(odd)).toEqual([]);
      } else expect(await subject.read(odd)).toEqual(oddEvents);
      for (const session of sessions) expect(await subject.read(session)).toEqual(eventsOf(session, 4));
    });

    it("folds each session's events into its view, across writes and concurrent calls", async () => {
      const tenant = TenantId(uid("tnt"));
      const at = (session: string, over: Partial<TelemetryEvent>) =>
        anEvent(session, 0, { tenant_id: tenant, ...over });
      const [a, b] = [uid("pbs"), uid("pbs")];
      // a: starts in 400 ms, plays 10 s, stalls 2 s, plays 5 s; b: asks to play and never starts.
      await write(subject.sink, [
        at(a, { event: "play", ts_ms: 0, player_version: "p1" }),
        at(a, { event: "first_frame", ts_ms: 400, startup_ms: 400, rendition: "720p" }),
      ]);
      await Promise.all([
        write(subject.sink, [
          at(a, { event: "stall_start", ts_ms: 10_400 }),
          at(a, { event: "stall_end", ts_ms: 12_400 }),
          at(a, { event: "heartbeat", ts_ms: 17_400 }),
        ]),
        write(subject.sink, [
          at(b, { event: "play", ts_ms: 0 }),
          at(b, { event: "heartbeat", ts_ms: 3_000 }),
        ]),
      ]);
      const query = { tenantId: tenant, from: RECEIVED_AT, to: RECEIVED_AT + 1 };
      expect(await Effect.runPromise(subject.sink.viewTotals(query))).toEqual([
        { views: 2, playing_ms: 15_000, stall_ms: 2_000, stalls: 1, failures: 0, exits: 1 },
      ]);
      // Percentiles answer the value of the startup time's histogram bucket: within 1% of it.
      const startup = startupBucketValue(startupBucket(400));
      expect(Math.abs(startup - 400)).toBeLessThanOrEqual(4);
      expect(await Effect.runPromise(subject.sink.startupPercentiles(query))).toEqual([
        { values: [startup, startup, startup] },
      ]);
      expect(
        await Effect.runPromise(
          subject.sink.viewTotals({ ...query, groupBy: "rendition", interval: "hour" }),
        ),
      ).toEqual([
        {
          bucket: RECEIVED_AT - (RECEIVED_AT % 3_600_000),
          group: null,
          views: 1,
          playing_ms: 0,
          stall_ms: 0,
          stalls: 0,
          failures: 0,
          exits: 1,
        },
        {
          bucket: RECEIVED_AT - (RECEIVED_AT % 3_600_000),
          group: "720p",
          views: 1,
          playing_ms: 15_000,
          stall_ms: 2_000,
          stalls: 1,
          failures: 0,
          exits: 0,
        },
      ]);
      // Another tenant's query, and a range that ends where the views begin, see none of them.
      expect(
        await Effect.runPromise(subject.sink.viewTotals({ ...query, tenantId: TenantId(uid("tnt")) })),
      ).toEqual([]);
      expect(
        await Effect.runPromise(subject.sink.viewTotals({ ...query, from: 0, to: RECEIVED_AT })),
      ).toEqual([]);
    });

    it("deletes raw events received before a cutoff, of every tenant, and keeps their views", async () => {
      // Long before any other test's events, which this delete must leave alone.
      const old = 900_000_000_000;
      const tenant = TenantId(uid("tnt"));
      const [gone, kept] = [uid("pbs"), uid("pbs")];
      const oldEvents = [0, 1].map((n) => anEvent(gone, n, { tenant_id: tenant, received_at: old + n }));
      const newEvents = [anEvent(kept, 0, { tenant_id: tenant, received_at: old + 10 })];
      await write(subject.sink, [...oldEvents, ...newEvents]);
      expect(await Effect.runPromise(subject.sink.deleteEventsReceivedBefore(old + 10))).toBe(2);
      expect(await subject.read(gone)).toEqual([]);
      expect(await subject.read(kept)).toEqual(newEvents);
      const views = await Effect.runPromise(
        subject.sink.viewTotals({ tenantId: tenant, from: old, to: old + 11 }),
      );
      expect(views.map((v) => v.views)).toEqual([2]);
    });
  });

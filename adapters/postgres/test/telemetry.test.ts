import {
  openPglite,
  postgresRevocationStore,
  postgresTelemetrySink,
  type SqlDatabase,
} from "@vod/adapter-postgres";
import { postgresTelemetryBackdoor } from "@vod/adapter-postgres/testing";
import { describeRevocationStore, describeTelemetrySink, uid } from "@vod/contract-tests";
import { AssetId, PlaybackSessionId, type TelemetryEvent, TenantId } from "@vod/core";
import { Effect, Either } from "effect";
import { describe, expect, it } from "vitest";
import { migratedOnce, onEachEngine } from "./engines.js";

const suites = (name: string, open: () => Promise<SqlDatabase>, separatePools: boolean) => {
  const engine = migratedOnce(open);
  describeTelemetrySink(name, async () => {
    const db = await engine.db();
    return {
      sink: postgresTelemetrySink(db),
      read: postgresTelemetryBackdoor(db).events,
      cleanup: async () => {},
    };
  });
  let other: Promise<SqlDatabase> | undefined;
  describeRevocationStore(name, async () => {
    const db = await engine.db();
    // PGlite is one process's database: the other node is a second store over the same one.
    other ??= separatePools ? engine.another() : Promise.resolve(db);
    return {
      store: postgresRevocationStore(db),
      otherNode: postgresRevocationStore(await other),
      cleanup: async () => {},
    };
  });
};

onEachEngine(({ name, open, separatePools }) => suites(name, open, separatePools));

describe("postgresTelemetrySink on pglite: group commit", () => {
  const engine = migratedOnce(() => openPglite());
  /** The database, counting the events of each telemetry INSERT. */
  const counted = async () => {
    const db = await engine.db();
    const statements: number[] = [];
    // The sink inserts after setting its row-level security scope.
    const counting: SqlDatabase = {
      ...db,
      queryIn: (scope, text, params) => {
        // Alone, or with the views it folds them into (WITH ... INSERT INTO telemetry_events).
        if (text.includes("INSERT INTO telemetry_events"))
          statements.push((params as ReadonlyArray<ReadonlyArray<unknown>>)[0]?.length ?? 0);
        return db.queryIn(scope, text, params);
      },
    };
    return { db, counting, statements };
  };
  const events = (session: string, count: number): TelemetryEvent[] =>
    Array.from({ length: count }, (_, i) => ({
      tenant_id: TenantId("tnt_gc"),
      session_id: PlaybackSessionId(session),
      asset_id: AssetId("ast_gc"),
      received_at: 1_795_000_000_000,
      player_version: null,
      event: "heartbeat",
      ts_ms: i,
      playhead_ms: i,
      rendition: null,
      error_code: null,
      startup_ms: null,
      stall_ms: null,
      bitrate_kbps: null,
      extra: {},
    }));

  it("stores concurrent writes in few statements", async () => {
    const { counting, statements } = await counted();
    const sink = postgresTelemetrySink(counting);
    const sessions = Array.from({ length: 50 }, () => uid("pbs"));
    await Promise.all(sessions.map((s) => Effect.runPromise(sink.write(events(s, 10)))));
    expect(statements.reduce((a, b) => a + b, 0)).toBe(500);
    expect(statements.length).toBeLessThanOrEqual(2);
  });

  it("puts at most maxBatchEvents in a statement, and a larger call alone and whole", async () => {
    const { db, counting, statements } = await counted();
    const sink = postgresTelemetrySink(counting, { maxBatchEvents: 25 });
    const sessions = Array.from({ length: 20 }, () => uid("pbs"));
    const big = uid("pbs");
    await Promise.all([
      ...sessions.map((s) => Effect.runPromise(sink.write(events(s, 10)))),
      Effect.runPromise(sink.write(events(big, 60))),
    ]);
    expect(statements.reduce((a, b) => a + b, 0)).toBe(260);
    expect(statements.filter((n) => n > 25)).toEqual([60]);
    expect(await postgresTelemetryBackdoor(db).events(big)).toEqual(events(big, 60));
  });

  it("fails only the call whose rows the database refuses, and stores the calls beside it", async () => {
    const { db, counting, statements } = await counted();
    const sink = postgresTelemetrySink(counting);
    const sessions = Array.from({ length: 7 }, () => uid("pbs"));
    const odd = uid("pbs");
    const oddEvents = events(odd, 3).map((e, i) => (i === 2 ? { ...e, rendition: "720p\u0000" } : e));
    const results = await Promise.all([
      ...sessions.map((s) => Effect.runPromise(Effect.either(sink.write(events(s, 5))))),
      Effect.runPromise(Effect.either(sink.write(oddEvents))),
    ]);
    expect(results.map((r) => (Either.isLeft(r) ? r.left._tag : "stored"))).toEqual([
      ...sessions.map(() => "stored"),
      "StorageError",
    ]);
    const backdoor = postgresTelemetryBackdoor(db);
    for (const s of sessions) expect(await backdoor.events(s)).toEqual(events(s, 5));
    expect(await backdoor.events(odd)).toEqual([]);
    // The whole batch first, then halves until the odd call is alone: a few statements, not one per call.
    expect(statements[0]).toBe(38);
    expect(statements.length).toBeLessThanOrEqual(1 + 2 * Math.ceil(Math.log2(8)));
  });

  it("fails every waiting call with StorageError when the database is away", async () => {
    const db = await openPglite();
    await db.close();
    const sink = postgresTelemetrySink(db);
    const results = await Promise.all(
      [uid("pbs"), uid("pbs")].map((s) => Effect.runPromise(Effect.either(sink.write(events(s, 2))))),
    );
    for (const result of results) {
      expect(Either.isLeft(result) && result.left._tag).toBe("StorageError");
    }
  });
});

import {
  connectPostgres,
  migrate,
  type SqlDatabase,
  standaloneScoped,
  tenantScope,
} from "@vod/adapter-postgres";
import { temporarySchemas } from "@vod/adapter-postgres/testing";
import { suiteName, testServices, uid } from "@vod/contract-tests";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * The shared connections of a server pool (`src/lanes.ts`): statements of many scopes written
 * behind each other without waiting, each of which must still run in its own scope, whatever
 * failed before it, and a connection lost under them.
 */
const { databaseUrl } = testServices();

/** What a statement sees of its scope: the tenant setting, and whether it runs as the login. */
const WHO =
  "SELECT coalesce(current_setting('vod.tenant_id', true), '') AS tenant, current_user = session_user AS login, $1::int AS n";
/** Fails in its scope (division by zero), after the scope is set. */
const FAILS = "SELECT 1 / ($1::int - $1::int) AS n";

describe.skipIf(databaseUrl === null)(
  suiteName("shared connections on the postgres server", databaseUrl !== null, "VOD_TEST_DATABASE_URL"),
  () => {
    const url = databaseUrl ?? "";
    const schemas = temporarySchemas(url);
    const schema = schemas.fresh();
    const application = uid("vod-lanes").toLowerCase();
    let db: SqlDatabase;
    beforeAll(async () => {
      db = connectPostgres({ connectionString: url, schema, poolSize: 4, applicationName: application });
      await migrate(db);
    }, 60_000);
    afterAll(async () => {
      await db?.close();
      await schemas.dropAll();
    });

    /** The backends of this pool, as the server lists them. */
    const backends = async () => {
      const admin = connectPostgres({ connectionString: url, poolSize: 1 });
      try {
        return (
          await admin.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE application_name = $1", [
            application,
          ])
        ).rows.map((r) => r.pid);
      } finally {
        await admin.close();
      }
    };

    type Call = { scope: "neutral" | string; fails: boolean; n: number };
    /** Runs `calls` all at once; each answer is what its statement saw, or its error's SQLSTATE. */
    const runAll = (calls: ReadonlyArray<Call>) => {
      const sql = standaloneScoped(db);
      return Promise.all(
        calls.map(({ scope, fails, n }) => {
          const text = fails ? FAILS : WHO;
          const sent = scope === "neutral" ? db.query(text, [n]) : sql.query(tenantScope(scope), text, [n]);
          return sent.then(
            (result) => result.rows[0],
            (error: { code?: string; message?: string }) => ({ error: error.code ?? error.message }),
          );
        }),
      );
    };
    /** What each call should answer. */
    const expected = (calls: ReadonlyArray<Call>) =>
      calls.map(({ scope, fails, n }) =>
        fails
          ? { error: "22012" }
          : scope === "neutral"
            ? { tenant: "", login: true, n }
            : { tenant: scope, login: false, n },
      );

    it("runs each statement in its own scope while many scopes and failures interleave on the shared connections", async () => {
      const scopes = ["neutral", uid("tnt"), uid("tnt"), uid("tnt"), uid("tnt"), uid("tnt")];
      // About one call in seven fails; fixed seeds, so that a failure replays.
      const call = fc.record({
        scope: fc.constantFrom(...scopes),
        fails: fc.integer({ min: 0, max: 99 }).map((x) => x < 15),
      });
      for (let round = 0; round < 5; round++) {
        const calls = fc.sample(call, { numRuns: 300, seed: 7 + round }).map((c, n) => ({ ...c, n }));
        expect(await runAll(calls)).toEqual(expected(calls));
      }
      // One scope at a time, the shared connections set and left in it, then a failure in a
      // scope switch right before statements of the scope the connection was in.
      const [a, b] = [uid("tnt"), uid("tnt")];
      const settle = Array.from({ length: 40 }, (_, n) => ({ scope: a, fails: false, n }));
      expect(await runAll(settle)).toEqual(expected(settle));
      const calls = [
        { scope: b, fails: true, n: 0 },
        ...Array.from({ length: 20 }, (_, n) => ({ scope: n % 2 ? a : b, fails: n % 3 === 0, n: n + 1 })),
      ];
      expect(await runAll(calls)).toEqual(expected(calls));
    });

    it("keeps to the pool's size: two of its connections are shared, the rest pooled", async () => {
      const calls = Array.from({ length: 200 }, (_, n) => ({ scope: uid("tnt"), fails: false, n }));
      // Transactions hold pooled connections while the shared ones take the statements.
      const held = Array.from({ length: 6 }, () =>
        db.transaction(async (tx) => {
          await tx.query("SELECT pg_sleep(0.05)");
          return (await tx.query<{ n: number }>("SELECT 1 AS n")).rows[0]?.n;
        }),
      );
      expect(await runAll(calls)).toEqual(expected(calls));
      expect(await Promise.all(held)).toEqual([1, 1, 1, 1, 1, 1]);
      expect((await backends()).length).toBeLessThanOrEqual(4);
    });

    it("fails only the statements on a connection the server ends, and the next ones run in their scope", async () => {
      const tenant = uid("tnt");
      const warm = Array.from({ length: 50 }, (_, n) => ({ scope: tenant, fails: false, n }));
      expect(await runAll(warm)).toEqual(expected(warm));
      // The server ends every backend of the pool while statements are on their way.
      const slow = Array.from({ length: 30 }, (_, n) =>
        standaloneScoped(db)
          .query(tenantScope(tenant), "SELECT pg_sleep(0.2), $1::int AS n", [n])
          .then(
            () => "answered",
            (error: { code?: string }) => error.code ?? "lost",
          ),
      );
      await new Promise((resolve) => setTimeout(resolve, 50));
      const admin = connectPostgres({ connectionString: url, poolSize: 1 });
      let ended: number[] = [];
      try {
        ended = (
          await admin.query<{ pid: number }>(
            "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
            [application],
          )
        ).rows.map((r) => r.pid);
        // The backends exit in their own time, and an idle connection learns of its end only when
        // its FATAL message arrives: until then a statement sent on it fails with 57P01, as any
        // client's would. The next statements start once every ended backend is gone.
        for (let i = 0; i < 100; i++) {
          const left = await admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = ANY($1::int[])", [
            ended,
          ]);
          if (left.rows.length === 0) break;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      } finally {
        await admin.close();
      }
      expect(ended.length).toBeGreaterThan(0);
      const outcomes = await Promise.all(slow);
      await new Promise((resolve) => setTimeout(resolve, 100));
      // Each either ran before its connection went, or failed as a lost connection (57P01, or
      // the socket reset or closed), never with another error.
      for (const outcome of outcomes) expect(["answered", "57P01", "ECONNRESET", "lost"]).toContain(outcome);
      expect(outcomes).toContain("57P01");
      const after = Array.from({ length: 60 }, (_, n) => ({
        scope: n % 3 === 0 ? "neutral" : n % 3 === 1 ? tenant : uid("tnt"),
        fails: n % 7 === 0,
        n,
      }));
      expect(await runAll(after)).toEqual(expected(after));
    });
  },
);

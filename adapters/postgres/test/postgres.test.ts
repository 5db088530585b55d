import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  connectPostgres,
  migrate,
  migrations,
  openPglite,
  openPgliteProcess,
  pgBossQueue,
  postgresStorage,
  postgresTelemetrySink,
  prepareDatabase,
  type SqlDatabase,
} from "@vod/adapter-postgres";
import { temporarySchemas } from "@vod/adapter-postgres/testing";
import { suiteName, testServices } from "@vod/contract-tests";
import {
  AssetId,
  jobNames,
  PlaybackSessionId,
  startupBucket,
  startupBucketValue,
  type TelemetryEvent,
  TenantId,
  type ViewQuery,
} from "@vod/core";
import { Cause, Effect, Exit } from "effect";
import { afterAll, describe, expect, it } from "vitest";

/** Runs `use` on a new temporary directory, removed after. */
const inTempDir = async (prefix: string, use: (dir: string) => Promise<void>) => {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  try {
    await use(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
};

const { databaseUrl } = testServices();

/** Every job name, as the queue table lists them ordered. */
const queueNames = [...jobNames].sort();
const schemas = temporarySchemas(databaseUrl ?? "");
const fresh = schemas.fresh;
const open: SqlDatabase[] = [];
const connect = (schema: string, poolSize = 4) => {
  const db = connectPostgres({ connectionString: databaseUrl ?? "", schema, poolSize });
  open.push(db);
  return db;
};

const tablesOf = async (db: SqlDatabase, schema: string) =>
  (
    await db.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name",
      [schema],
    )
  ).rows.map((r) => r.table_name);

describe.skipIf(databaseUrl === null)(
  suiteName("Postgres server specifics", databaseUrl !== null, "VOD_TEST_DATABASE_URL"),
  () => {
    afterAll(async () => {
      await Promise.all(open.map((db) => db.close()));
      await schemas.dropAll();
    });

    it("two migrations started at once leave one correct schema", async () => {
      const schema = fresh();
      const [a, b] = [connect(schema), connect(schema)];
      const applied = await Promise.all([migrate(a), migrate(b)]);
      // One process applied everything, the other found it done.
      expect(applied.map((v) => v.length).sort()).toEqual([0, migrations.length]);
      const { rows } = await a.query<{ version: number }>(
        "SELECT version FROM vod_migrations ORDER BY version",
      );
      expect(rows.map((r) => r.version)).toEqual(migrations.map((m) => m.version));
      expect(await tablesOf(a, schema)).toEqual([
        "api_keys",
        "asset_chunks",
        "assets",
        "content_keys",
        "email_tokens",
        "idempotency_keys",
        "identities",
        "playback_revocations",
        "playback_rollups",
        "playback_sessions",
        "playback_startup_rollups",
        "playback_views",
        "refresh_sessions",
        "refresh_tokens",
        "retired_tenant_slugs",
        "telemetry_events",
        "tenants",
        "text_tracks",
        "upload_sessions",
        "users",
        "vod_migrations",
        "webhook_deliveries",
        "webhooks",
      ]);
      expect(await migrate(a)).toEqual([]);
    });

    /** A fresh database as the given version left it, with one tenant, `tnt_1`. */
    const atVersion = async (version: number) => {
      const schema = fresh();
      const db = connect(schema);
      await db.exec(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
      await db.exec(
        "CREATE TABLE vod_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
      );
      for (const migration of migrations.filter((m) => m.version <= version)) {
        await db.exec(migration.sql);
        await db.query("INSERT INTO vod_migrations (version, name) VALUES ($1, $2)", [
          migration.version,
          migration.name,
        ]);
      }
      await db.query(
        "INSERT INTO tenants (id, slug, name, plan, status, created_at) VALUES ('tnt_1', 'one', 'One', 'free', 'active', 1)",
      );
      return db;
    };

    it("migration 8 empties the Idempotency-Key records of version 7 and keys them by principal", async () => {
      // The database as version 7 left it, with a record whose body holds a key in clear.
      const db = await atVersion(7);
      const insert = (columns: string, values: string) =>
        db.query(
          `INSERT INTO idempotency_keys (tenant_id, ${columns}key, fingerprint, status, body, locked_until, expires_at)
           VALUES ('tnt_1', ${values}'k', 'f', 201, '{"key": "vod_abcdefgh_secret"}', 1, 9e12)`,
        );
      await insert("", "");

      expect(await migrate(db)).toEqual(migrations.filter((m) => m.version > 7).map((m) => m.version));
      expect((await db.query("SELECT * FROM idempotency_keys")).rows).toEqual([]);
      await insert("principal, ", "'api_key:a', ");
      await insert("principal, ", "'api_key:b', ");
      await expect(insert("principal, ", "'api_key:a', ")).rejects.toThrow(/duplicate key/);
      await expect(insert("", "")).rejects.toThrow(/principal/);
    });

    it("migration 11 shows an asset made ready before it with no renditions and no ready_at", async () => {
      const db = await atVersion(10);
      await db.query(
        `INSERT INTO assets (id, tenant_id, title, status, drm_enabled, visibility, created_at)
         VALUES ('ast_1', 'tnt_1', 'old', 'ready', false, 'private', 1)`,
      );
      expect(await migrate(db)).toEqual(migrations.filter((m) => m.version > 10).map((m) => m.version));
      expect((await db.query("SELECT renditions, ready_at FROM assets")).rows).toEqual([
        { renditions: [], ready_at: null },
      ]);
    });

    it("migration 17 rolls up the views stored before it, and later events move them from there", async () => {
      const db = await atVersion(16);
      const day = Math.floor(1_795_000_000_000 / 86_400_000) * 86_400_000;
      // Two views as version 16 stored them: one started on 720p at 1:00, one never named a rendition.
      await db.query(
        `INSERT INTO playback_views (tenant_id, session_id, asset_id, player_version, rendition, first_received_at,
           last_ts_ms, play_ts_ms, state, played, started, failed, startup_ms, playing_ms, stall_ms, stalls)
         VALUES ('tnt_1', 'pbs_1', 'ast_1', 'p1', '720p', $1, 20000, 0, 'playing', true, true, false, 400, 19600, 0, 0),
                ('tnt_1', 'pbs_2', 'ast_1', NULL, NULL, $2, 3000, 0, 'idle', true, false, false, NULL, 0, 0, 0)`,
        [day + 3_600_000, day + 5 * 3_600_000 + 7],
      );
      expect(await migrate(db)).toEqual(migrations.filter((m) => m.version > 16).map((m) => m.version));
      const sink = postgresTelemetrySink(db);
      const query = { tenantId: TenantId("tnt_1"), from: day, to: day + 86_400_000 };
      const totals = (q: Partial<ViewQuery> = {}) => Effect.runPromise(sink.viewTotals({ ...query, ...q }));
      const sums = { stall_ms: 0, stalls: 0, failures: 0 };
      expect(await totals()).toEqual([{ views: 2, playing_ms: 19_600, exits: 1, ...sums }]);
      expect(await totals({ groupBy: "rendition" })).toEqual([
        { group: null, views: 1, playing_ms: 0, exits: 1, ...sums },
        { group: "720p", views: 1, playing_ms: 19_600, exits: 0, ...sums },
      ]);
      const startup = startupBucketValue(startupBucket(400));
      expect(await Effect.runPromise(sink.startupPercentiles(query))).toEqual([
        { values: [startup, startup, startup] },
      ]);
      // The second view goes on: it starts on 360p, 10 s later. It moves from the null rendition.
      const at = (event: string, ts: number, more: Partial<TelemetryEvent> = {}): TelemetryEvent => ({
        tenant_id: TenantId("tnt_1"),
        session_id: PlaybackSessionId("pbs_2"),
        asset_id: AssetId("ast_1"),
        received_at: day + 6 * 3_600_000,
        player_version: null,
        event,
        ts_ms: ts,
        playhead_ms: ts,
        rendition: null,
        error_code: null,
        startup_ms: null,
        stall_ms: null,
        bitrate_kbps: null,
        extra: {},
        ...more,
      });
      await Effect.runPromise(
        sink.write([
          at("first_frame", 4_000, { rendition: "360p", startup_ms: 1_000 }),
          at("heartbeat", 14_000),
        ]),
      );
      expect(await totals({ groupBy: "rendition" })).toEqual([
        { group: "360p", views: 1, playing_ms: 10_000, exits: 0, ...sums },
        { group: "720p", views: 1, playing_ms: 19_600, exits: 0, ...sums },
      ]);
      expect(await totals({ interval: "hour" })).toEqual([
        { bucket: day + 3_600_000, views: 1, playing_ms: 19_600, exits: 0, ...sums },
        { bucket: day + 5 * 3_600_000, views: 1, playing_ms: 10_000, exits: 0, ...sums },
      ]);
    });

    it("four starts at once on a new schema, each migrating and starting its queue, all succeed", async () => {
      const schema = fresh();
      // Pools of one connection too: the lock's connection does all the installing itself.
      const dbs = [connect(schema, 1), connect(schema, 1), connect(schema), connect(schema)];
      const started = await Promise.allSettled(
        dbs.map(async (db) => {
          const applied = await migrate(db);
          const queue = await pgBossQueue(db, { maxAttempts: 4, retryDelaySeconds: 2, leaseSeconds: 30 });
          await queue.close();
          return applied.length;
        }),
      );
      expect(started.filter((s) => s.status === "rejected")).toEqual([]);
      expect(started.map((s) => (s.status === "fulfilled" ? s.value : -1)).sort()).toEqual([
        0,
        0,
        0,
        migrations.length,
      ]);
      const { rows } = await dbs[0]!.query(
        `SELECT name, retry_limit, retry_delay, expire_seconds FROM ${schema}_jobs.queue ORDER BY name`,
      );
      expect(rows).toEqual(
        queueNames.map((name) => ({ name, retry_limit: 3, retry_delay: 2, expire_seconds: 30 })),
      );
    });

    it("prepareDatabase (vod migrate) leaves the queue installed, racing host starts or not", async () => {
      const schema = fresh();
      const [job, host] = [connect(schema), connect(schema)];
      const [prepared, queue] = await Promise.all([
        prepareDatabase(job, { maxAttempts: 2 }),
        migrate(host).then(() => pgBossQueue(host, { maxAttempts: 2 })),
      ]);
      await queue.close();
      expect([0, migrations.length]).toContain(prepared.length);
      const version = await job.query<{ version: number }>(`SELECT version FROM ${schema}_jobs.version`);
      expect(version.rows).toHaveLength(1);
      const queues = await job.query(`SELECT name, retry_limit FROM ${schema}_jobs.queue ORDER BY name`);
      expect(queues.rows).toEqual(queueNames.map((name) => ({ name, retry_limit: 1 })));
      // Prepared again, nothing is left to do.
      expect(await prepareDatabase(job, { maxAttempts: 2 })).toEqual([]);
    });

    it("serves keyset pages of assets from an index, with and without the status filter", async () => {
      const schema = fresh();
      const db = connect(schema, 1);
      await migrate(db);
      await db.withConnection(async (conn) => {
        // The planner prefers a sequential scan of a tiny table; forbid it to ask whether an index serves.
        await conn.exec("SET enable_seqscan = off");
        const plan = async (sql: string, params: unknown[]) =>
          (await conn.query<{ "QUERY PLAN": string }>(`EXPLAIN ${sql}`, params)).rows
            .map((r) => r["QUERY PLAN"])
            .join("\n");
        const page = await plan(
          "SELECT * FROM assets WHERE tenant_id = $1 AND deleted_at IS NULL AND (created_at, id) < ($2, $3) ORDER BY created_at DESC, id DESC LIMIT 51",
          ["t", 1, "a"],
        );
        expect(page).toMatch(/Index (Only )?Scan.* using assets_list_idx/);
        expect(page).not.toMatch(/Sort/);
        const filtered = await plan(
          "SELECT * FROM assets WHERE tenant_id = $1 AND deleted_at IS NULL AND status = $2 ORDER BY created_at DESC, id DESC LIMIT 51",
          ["t", "ready"],
        );
        expect(filtered).toMatch(/Index (Only )?Scan.* using assets_status_list_idx/);
        const keys = await plan("SELECT * FROM api_keys WHERE key_hash = $1", ["h"]);
        expect(keys).toMatch(/Index Scan using api_keys_key_hash_key/);
        const email = await plan("SELECT * FROM users WHERE lower(email) = lower($1)", ["A@B.C"]);
        expect(email).toMatch(/Index Scan using users_email_key/);
      });
    });

    it("makes a value the database refuses as data a defect, never a retryable storage_error", async () => {
      const schema = fresh();
      const db = connect(schema, 1);
      await migrate(db);
      const storage = postgresStorage(db);
      const tenant = {
        id: TenantId("tnt_a"),
        slug: "a",
        name: "a",
        plan: "free",
        status: "active",
        created_at: 1,
      } as const;
      // 22021: a NUL byte in text. The request checks refuse it first; this is what is left if they do not.
      const exits: Array<Exit.Exit<unknown, unknown>> = [
        await Effect.runPromiseExit(storage.assets.get(TenantId("tnt_a"), AssetId("ast_\u0000"))),
        await Effect.runPromiseExit(storage.tenants.insert({ ...tenant, name: "a\u0000b" })),
        await Effect.runPromiseExit(
          storage.transaction((tx) => tx.tenants.insert({ ...tenant, slug: "\u0000" })),
        ),
      ];
      for (const exit of exits) {
        expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true);
        expect(Exit.isFailure(exit) && Cause.isFailType(exit.cause)).toBe(false);
      }
      // What the database reports as its own trouble stays a storage_error.
      await db.query("DROP TABLE assets CASCADE");
      const missing = await Effect.runPromiseExit(storage.assets.get(TenantId("tnt_a"), AssetId("ast_1")));
      expect(Exit.isFailure(missing) && Cause.isDie(missing.cause)).toBe(false);
      expect(Exit.isFailure(missing) && missing.cause.toString()).toMatch(/StorageError/);
    });
  },
);

describe("PGlite", () => {
  // Two PGlite starts on a data directory: about 20 s on a loaded 2-core machine.
  it("migrates once and keeps its data in its directory across a reopen", async () => {
    await inTempDir("vod-pglite-", async (dir) => {
      const first = await openPglite(dir);
      expect(await migrate(first)).toEqual(migrations.map((m) => m.version));
      await first.query(
        "INSERT INTO tenants (id, slug, name, plan, status, created_at) VALUES ('t1', 's', 'n', 'free', 'active', 1)",
      );
      await first.close();
      const second = await openPglite(dir);
      expect(await migrate(second)).toEqual([]);
      expect((await second.query("SELECT id FROM tenants")).rows).toEqual([{ id: "t1" }]);
      await second.close();
    });
  }, 60_000);
});

describe("PGlite start-up", () => {
  it("takes turns between starts in one process and installs the queue without waiting on itself", async () => {
    const db = await openPglite();
    try {
      // PGlite's one session never waits on its own advisory lock: the turns order these two.
      const applied = await Promise.all([prepareDatabase(db), prepareDatabase(db)]);
      expect(applied.map((a) => a.length).sort()).toEqual([0, migrations.length]);
      const queue = await pgBossQueue(db, { maxAttempts: 5 });
      await queue.close();
      const { rows } = await db.query("SELECT name, retry_limit FROM vod_jobs.queue ORDER BY name");
      expect(rows).toEqual(queueNames.map((name) => ({ name, retry_limit: 4 })));
    } finally {
      await db.close();
    }
  }, 60_000);

  it("prepares the embedded database in its own process, then starts the queue on it", async () => {
    await inTempDir("vod-pglite-start-", async (dir) => {
      const db = await openPgliteProcess(dir);
      try {
        expect(await prepareDatabase(db)).toEqual(migrations.map((m) => m.version));
        const queue = await pgBossQueue(db);
        await queue.close();
        const { rows } = await db.query("SELECT name FROM vod_jobs.queue ORDER BY name");
        expect(rows).toEqual(queueNames.map((name) => ({ name })));
      } finally {
        await db.close();
      }
    });
  }, 60_000);
});

import { randomBytes } from "node:crypto";
import {
  connectPostgres,
  migrate,
  postgresStorage,
  type Queryable,
  type SqlDatabase,
  standaloneScoped,
  tenantScope,
} from "@vod/adapter-postgres";
import { anAsset, aTenant, suiteName, testServices, uid } from "@vod/contract-tests";
import { TenantId } from "@vod/core";
import { Effect } from "effect";
import { beforeAll, describe, expect, it } from "vitest";
import { migratedOnce, onEachEngine } from "./engines.js";

/**
 * The tables a tenant owns, read from the catalog (any table of the schema with a tenant_id
 * column, and tenants itself), each with whether row-level security is on, forced, and how many
 * policies it has. A new migration's table shows up here without anyone listing it.
 */
const tenantOwnedTables = (sql: Queryable) =>
  sql.query<{ table: string; enabled: boolean; forced: boolean; policies: number; isolating: number }>(
    `SELECT c.relname AS table, c.relrowsecurity AS enabled, c.relforcerowsecurity AS forced,
            (SELECT count(*)::int FROM pg_policy p WHERE p.polrelid = c.oid) AS policies,
            (SELECT count(*)::int FROM pg_policy p
              WHERE p.polrelid = c.oid AND p.polcmd = '*' AND p.polpermissive) AS isolating
     FROM pg_class c
     WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
       AND (c.relname = 'tenants' OR EXISTS (
         SELECT FROM pg_attribute a
         WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND a.attnum > 0 AND NOT a.attisdropped))
     ORDER BY c.relname`,
  );

/** The tables of `rows` that lack forced row-level security or a policy binding every command. */
const unguarded = (
  rows: ReadonlyArray<{ table: string; enabled: boolean; forced: boolean; isolating: number }>,
) => rows.filter((r) => !r.enabled || !r.forced || r.isolating === 0).map((r) => r.table);

/** One row in every tenant-owned table for `tenant`, written as the superuser (no policy applies). */
const seed = async (db: SqlDatabase, tenant: string) => {
  const user = uid("usr");
  const asset = uid("ast");
  const session = uid("rs");
  const keyHash = uid("keyhash");
  const emailTokenHash = uid("mailhash");
  await db.transaction(async (tx) => {
    const q = (text: string, params: unknown[]) => tx.query(text, params);
    await q("INSERT INTO tenants VALUES ($1, $1, 'T', 'free', 'active', 1)", [tenant]);
    await q(
      "INSERT INTO users (id, tenant_id, email, email_verified, role, created_at) VALUES ($1, $2, $3, true, 'owner', 1)",
      [user, tenant, `${user}@example.com`],
    );
    await q("INSERT INTO identities VALUES ('google', $1, $2, $3, 1)", [uid("sub"), user, tenant]);
    await q("INSERT INTO refresh_sessions (id, tenant_id, user_id, created_at) VALUES ($1, $2, $3, 1)", [
      session,
      tenant,
      user,
    ]);
    await q("INSERT INTO refresh_tokens VALUES ($1, $2, $3, $4, 1, 9e12, NULL)", [
      uid("tokhash"),
      session,
      tenant,
      user,
    ]);
    await q(
      "INSERT INTO email_tokens VALUES ($1, 'reset_password', $2, $3, 'e@example.com', 1, 9e12, NULL)",
      [emailTokenHash, tenant, user],
    );
    await q(
      "INSERT INTO api_keys (id, tenant_id, name, prefix, scopes, key_hash, created_at) VALUES ($1, $2, 'k', 'p', '{read}', $3, 1)",
      [uid("key"), tenant, keyHash],
    );
    await q(
      "INSERT INTO assets (id, tenant_id, title, status, drm_enabled, visibility, created_at) VALUES ($1, $2, 'a', 'pending', false, 'private', 1)",
      [asset, tenant],
    );
    await q(
      `INSERT INTO upload_sessions (id, tenant_id, asset_id, status, part_size, part_count, size_bytes, expires_at, created_at)
       VALUES ($1, $2, $3, 'created', 1, 1, 1, 1, 1)`,
      [uid("upl"), tenant, asset],
    );
    await q("INSERT INTO playback_sessions VALUES ($1, $2, $3, false, 9e12, 1, NULL)", [
      uid("ps"),
      tenant,
      asset,
    ]);
    await q("INSERT INTO content_keys VALUES ($1, $2, 'kid', 'wrapped', 1)", [tenant, asset]);
    await q("INSERT INTO asset_chunks VALUES ($1, $2, '360p', 0, 1, 0, NULL, NULL)", [tenant, asset]);
    await q(
      `INSERT INTO playback_views (tenant_id, session_id, asset_id, first_received_at, last_ts_ms, state,
         played, started, failed, playing_ms, stall_ms, stalls)
       VALUES ($1, $2, $3, 1, 0, 'idle', false, false, false, 0, 0, 0)`,
      [tenant, uid("ps"), asset],
    );
    await q(
      `INSERT INTO playback_rollups (tenant_id, span, asset_scope, dimension, period, value, views,
         playing_ms, stall_ms, stalls, failures, exits)
       VALUES ($1, 'hour', '', '', 0, NULL, 1, 0, 0, 0, 0, 0)`,
      [tenant],
    );
    await q(
      `INSERT INTO playback_startup_rollups (tenant_id, span, asset_scope, dimension, period, value, bucket, count)
       VALUES ($1, 'hour', '', '', 0, NULL, 1, 1)`,
      [tenant],
    );
    await q(
      `INSERT INTO text_tracks (id, tenant_id, asset_id, type, language_code, name, closed_captions, status, created_at)
       VALUES ($1, $2, $3, 'text', 'en', 'English', false, 'ready', 1)`,
      [uid("trk"), tenant, asset],
    );
    await q(
      "INSERT INTO idempotency_keys (tenant_id, principal, key, fingerprint, locked_until, expires_at) VALUES ($1, 'p', 'k', 'f', 1, 9e12)",
      [tenant],
    );
    await q(
      "INSERT INTO telemetry_events (tenant_id, session_id, asset_id, received_at, event, ts_ms, playhead_ms) VALUES ($1, 's', $2, 1, 'play', 1, 0)",
      [tenant, asset],
    );
    const webhook = uid("whk");
    await q(
      "INSERT INTO webhooks (id, tenant_id, url, events, secret, created_at) VALUES ($1, $2, 'https://x.example', '{*}', 's', 1)",
      [webhook, tenant],
    );
    await q(
      `INSERT INTO webhook_deliveries (id, tenant_id, webhook_id, event_id, event_type, payload, status, attempts, created_at)
       VALUES ($1, $2, $3, 'evt', 'asset.created', '{}', 'pending', 0, 1)`,
      [uid("dlv"), tenant, webhook],
    );
  });
  return { user, asset, keyHash, emailTokenHash };
};

/** The column naming a row's tenant: tenants are their own. */
const tenantColumn = (table: string) => (table === "tenants" ? "id" : "tenant_id");

onEachEngine(({ name, open }) => {
  describe(`row-level security on ${name}`, () => {
    const engine = migratedOnce(open);
    // Creating and migrating the database (initdb, for PGlite) is slow on a busy machine.
    beforeAll(() => engine.db(), 120_000);

    /**
     * Runs `fn` as the adapter's tenant work runs: in a transaction, as the schema's app role,
     * with `settings` set. Rolled back, so that nothing it managed to do stays.
     */
    const asApp = async <T>(settings: Record<string, string>, fn: (tx: Queryable) => Promise<T>) => {
      const db = await engine.db();
      const undo = new Error("roll back");
      let result: T | undefined;
      await db
        .transaction(async (tx) => {
          const { rows } = await tx.query<{ role: string }>(
            "SELECT 'vod_app_' || current_database() || '_' || current_schema() AS role",
          );
          await tx.query("SELECT set_config('role', $1, true)", [rows[0]?.role]);
          for (const [key, value] of Object.entries(settings))
            await tx.query("SELECT set_config($1, $2, true)", [key, value]);
          result = await fn(tx);
          throw undo;
        })
        .catch((error: unknown) => {
          if (error !== undo) throw error;
        });
      return result as T;
    };
    /** The SQLSTATE the statement fails with, in a transaction of its own as the app role. */
    const refusal = async (settings: Record<string, string>, text: string, params: unknown[]) =>
      asApp(settings, (tx) =>
        tx.query(text, params).then(
          () => "accepted",
          (error: { code?: string }) => error.code,
        ),
      );

    it("guards every table with a tenant_id column: enabled, forced, and a policy on every command", async () => {
      const db = await engine.db();
      const { rows } = await tenantOwnedTables(db);
      expect(rows.map((r) => r.table)).toEqual(
        expect.arrayContaining(["api_keys", "assets", "telemetry_events", "tenants", "users"]),
      );
      expect(rows.length).toBeGreaterThanOrEqual(11);
      expect(unguarded(rows)).toEqual([]);
      // The check sees a table that a future migration adds without a policy.
      const probe = await db
        .transaction(async (tx) => {
          await tx.exec("CREATE TABLE rls_probe (id text, tenant_id text)");
          const found = unguarded((await tenantOwnedTables(tx)).rows);
          throw Object.assign(new Error("roll back"), { found });
        })
        .catch((error: { found?: string[] }) => error.found);
      expect(probe).toEqual(["rls_probe"]);
    });

    it("gives the app role no way around the policies", async () => {
      const db = await engine.db();
      const { rows } = await db.query<{ rolsuper: boolean; rolbypassrls: boolean; rolcanlogin: boolean }>(
        `SELECT rolsuper, rolbypassrls, rolcanlogin FROM pg_roles
         WHERE rolname = 'vod_app_' || current_database() || '_' || current_schema()`,
      );
      expect(rows).toEqual([{ rolsuper: false, rolbypassrls: false, rolcanlogin: false }]);
    });

    it("binds the app role to its tenant: another tenant's rows are not seen, changed or written", async () => {
      const db = await engine.db();
      const [a, b] = [uid("tnt"), uid("tnt")];
      await seed(db, a);
      await seed(db, b);
      const tables = (await tenantOwnedTables(db)).rows.map((r) => r.table);
      const tenantA = { "vod.tenant_id": a };
      for (const table of tables) {
        const column = tenantColumn(table);
        const seen = await asApp(tenantA, async (tx) => ({
          own: (await tx.query(`SELECT 1 FROM ${table} WHERE ${column} = $1`, [a])).rows.length,
          others: (await tx.query(`SELECT 1 FROM ${table} WHERE ${column} = $1`, [b])).rows.length,
          all: (await tx.query(`SELECT DISTINCT ${column} AS t FROM ${table}`)).rows,
          updated: (await tx.query(`UPDATE ${table} SET ${column} = ${column} WHERE ${column} = $1`, [b]))
            .rowCount,
        }));
        expect({ table, ...seen }).toEqual({ table, own: 1, others: 0, all: [{ t: a }], updated: 0 });
        // Moving its own row to the other tenant is refused by the policy's check.
        expect(
          await refusal(tenantA, `UPDATE ${table} SET ${column} = $2 WHERE ${column} = $1`, [a, b]),
          table,
        ).toBe("42501");
        // The role deletes nothing: it has no DELETE right at all, but on idempotency keys, where
        // it deletes only its own tenant's rows (a released key) and expired ones (the sweep), on
        // email and refresh tokens, where the sweep deletes expired ones, and on telemetry events,
        // where only the retention sweep's scope deletes (old events).
        if (["idempotency_keys", "telemetry_events", "email_tokens", "refresh_tokens"].includes(table))
          expect(
            await asApp(
              tenantA,
              async (tx) => (await tx.query(`DELETE FROM ${table} WHERE ${column} = $1`, [b])).rowCount,
            ),
          ).toBe(0);
        else
          expect(await refusal(tenantA, `DELETE FROM ${table} WHERE ${column} = $1`, [b]), table).toBe(
            "42501",
          );
      }
      // Inserting a row of the other tenant is refused.
      const insertAsset = (tenant: string) =>
        refusal(
          tenantA,
          "INSERT INTO assets (id, tenant_id, title, status, drm_enabled, visibility, created_at) VALUES ($1, $2, 'x', 'pending', false, 'private', 1)",
          [uid("ast"), tenant],
        );
      expect(await insertAsset(b)).toBe("42501");
      expect(
        await refusal(
          tenantA,
          "INSERT INTO telemetry_events (tenant_id, session_id, asset_id, received_at, event, ts_ms, playhead_ms) VALUES ($1, 's', 'a', 1, 'play', 1, 0)",
          [b],
        ),
      ).toBe("42501");
      expect(
        await refusal(tenantA, "INSERT INTO tenants VALUES ($1, $1, 'T', 'free', 'active', 1)", [uid("tnt")]),
      ).toBe("42501");
      // Its own tenant's insert goes through (and is rolled back).
      expect(await insertAsset(a)).toBe("accepted");
      // Nothing of B's changed, as the superuser sees it.
      for (const table of tables) {
        const { rows } = await db.query(`SELECT 1 FROM ${table} WHERE ${tenantColumn(table)} = $1`, [b]);
        expect({ table, rows: rows.length }).toEqual({ table, rows: 1 });
      }
    });

    it("runs each statement in its own scope on connections that statements of other scopes left set", async () => {
      const db = await engine.db();
      const [a, b] = [uid("tnt"), uid("tnt")];
      await seed(db, a);
      await seed(db, b);
      const sql = standaloneScoped(db);
      const seen = async (tenant: string, params?: unknown[]) =>
        (await sql.query(tenantScope(tenant), "SELECT DISTINCT tenant_id AS t FROM assets", params)).rows;
      // The session kept from one statement to the next, switched, and with a text of no parameters.
      expect([await seen(a, []), await seen(a, []), await seen(b, []), await seen(a), await seen(b)]).toEqual(
        [[{ t: a }], [{ t: a }], [{ t: b }], [{ t: a }], [{ t: b }]],
      );
      // Many at once, alternating, each on whatever connection (or turn on PGlite's one) it gets.
      const all = await Promise.all(Array.from({ length: 40 }, (_, i) => seen(i % 2 ? a : b, [])));
      expect(all).toEqual(Array.from({ length: 40 }, (_, i) => [{ t: i % 2 ? a : b }]));
      // A statement that fails in a scope leaves none of it to the next.
      await expect(sql.query(tenantScope(a), "SELECT no_such_column FROM assets", [])).rejects.toThrow();
      expect(await seen(b, [])).toEqual([{ t: b }]);
      // Work outside any scope, on the connections the scoped statements used, runs as the login.
      const neutral =
        "SELECT current_user = session_user AS login, coalesce(current_setting('vod.tenant_id', true), '') AS tenant";
      const asLogin = [{ login: true, tenant: "" }];
      expect((await db.query(neutral)).rows).toEqual(asLogin);
      await seen(a, []);
      expect((await db.query(neutral, [])).rows).toEqual(asLogin);
      await seen(a, []);
      expect(await db.transaction(async (tx) => (await tx.query(neutral)).rows)).toEqual(asLogin);
      expect(await db.withConnection(async (conn) => (await conn.query(neutral)).rows)).toEqual(asLogin);
      // A text first seen right after a tenant's statement, on a schema the app role may not use
      // (as pg-boss's is), is read as the login: on PGlite its parameter types are described in
      // the scope it runs in, not in the one the session was left in.
      const hidden = uid("vod_hidden").toLowerCase();
      await db.exec(`CREATE SCHEMA ${hidden}; CREATE TABLE ${hidden}.t (n int)`);
      try {
        await seen(a, []);
        expect((await db.query(`SELECT count(*)::int AS n FROM ${hidden}.t WHERE n > $1`, [0])).rows).toEqual(
          [{ n: 0 }],
        );
      } finally {
        await db.exec(`DROP SCHEMA ${hidden} CASCADE`);
      }
      expect(
        (
          await db.query(
            "SELECT count(DISTINCT tenant_id)::int AS n FROM assets WHERE tenant_id IN ($1, $2)",
            [a, b],
          )
        ).rows,
      ).toEqual([{ n: 2 }]);
    });

    it("shows nothing tenant-owned to the app role with no tenant set", async () => {
      const db = await engine.db();
      await seed(db, uid("tnt"));
      const tables = (await tenantOwnedTables(db)).rows.map((r) => r.table);
      const counts = await asApp({}, async (tx) => {
        const seen: Record<string, number> = {};
        for (const table of tables) seen[table] = (await tx.query(`SELECT 1 FROM ${table}`)).rows.length;
        return seen;
      });
      expect(counts).toEqual(Object.fromEntries(tables.map((t) => [t, 0])));
    });

    it("shows a lookup only the row of the key it names, and lets telemetry insert but not read", async () => {
      const db = await engine.db();
      const a = uid("tnt");
      const { keyHash, user, emailTokenHash } = await seed(db, a);
      await seed(db, uid("tnt"));
      const byHash = await asApp({ "vod.api_key_hash": keyHash }, async (tx) => ({
        keys: (await tx.query<{ tenant_id: string }>("SELECT tenant_id FROM api_keys")).rows,
        assets: (await tx.query("SELECT 1 FROM assets")).rows.length,
        // A lookup reads; it does not write.
        touched: (await tx.query("UPDATE api_keys SET last_used_at = 2")).rowCount,
      }));
      expect(byHash).toEqual({ keys: [{ tenant_id: a }], assets: 0, touched: 0 });
      const byEmail = await asApp({ "vod.email": `${user.toUpperCase()}@EXAMPLE.COM` }, async (tx) => ({
        users: (await tx.query<{ id: string }>("SELECT id FROM users")).rows,
        keys: (await tx.query("SELECT 1 FROM api_keys")).rows.length,
      }));
      expect(byEmail).toEqual({ users: [{ id: user }], keys: 0 });
      // A link of account mail is used by its hash alone: that row, and nothing else, is seen and marked.
      const byMailToken = await asApp({ "vod.email_token_hash": emailTokenHash }, async (tx) => ({
        tokens: (await tx.query<{ tenant_id: string }>("SELECT tenant_id FROM email_tokens")).rows,
        used: (await tx.query("UPDATE email_tokens SET used_at = 2")).rowCount,
        users: (await tx.query("SELECT 1 FROM users")).rows.length,
      }));
      expect(byMailToken).toEqual({ tokens: [{ tenant_id: a }], used: 1, users: 0 });
      const telemetry = await asApp({ "vod.telemetry": "ingest" }, async (tx) => ({
        inserted: (
          await tx.query(
            "INSERT INTO telemetry_events (tenant_id, session_id, asset_id, received_at, event, ts_ms, playhead_ms) VALUES ($1, 's', 'a', 1, 'play', 1, 0)",
            [a],
          )
        ).rowCount,
        read: (await tx.query("SELECT 1 FROM telemetry_events")).rows.length,
      }));
      expect(telemetry).toEqual({ inserted: 1, read: 0 });
      // The token sweep's scope sees and deletes tokens of any tenant past the expiry it names,
      // and nothing else (the seeded tokens expire at 9e12).
      const sweep = (before: number) =>
        asApp({ "vod.expired_before": String(before) }, async (tx) => ({
          mail: (await tx.query("DELETE FROM email_tokens")).rowCount,
          refresh: (await tx.query("DELETE FROM refresh_tokens")).rowCount,
          users: (await tx.query("SELECT 1 FROM users")).rows.length,
        }));
      expect(await sweep(9e12 - 1)).toEqual({ mail: 0, refresh: 0, users: 0 });
      const swept = await sweep(9e12);
      expect(swept.mail).toBeGreaterThanOrEqual(2);
      expect(swept.refresh).toBeGreaterThanOrEqual(2);
      expect(swept.users).toBe(0);
    });
  });
});

// Cloud SQL's and RDS's admin logins are not superusers: the migration must make the role and
// join it, and the owner, being bound by FORCE, must see nothing outside the adapter's scope.
const { databaseUrl } = testServices();
describe.skipIf(databaseUrl === null)(
  suiteName(
    "row-level security with a login that is not a superuser",
    databaseUrl !== null,
    "VOD_TEST_DATABASE_URL",
  ),
  () => {
    it("migrates, serves its tenant and binds the tables' owner too", async () => {
      const admin = connectPostgres({ connectionString: databaseUrl ?? "", poolSize: 1 });
      const suffix = randomBytes(6).toString("hex");
      const login = `vod_test_login_${suffix}`;
      const schema = `vod_test_ns_${suffix}`;
      const password = randomBytes(12).toString("hex");
      const { rows } = await admin.query<{ db: string }>("SELECT current_database() AS db");
      const database = rows[0]?.db ?? "";
      await admin.exec(
        `CREATE ROLE ${login} LOGIN NOSUPERUSER NOBYPASSRLS CREATEROLE PASSWORD '${password}';
         GRANT CREATE ON DATABASE "${database}" TO ${login}`,
      );
      const url = new URL(databaseUrl ?? "");
      url.username = login;
      url.password = password;
      const db = connectPostgres({ connectionString: url.toString(), schema, poolSize: 2 });
      try {
        expect((await migrate(db)).length).toBeGreaterThanOrEqual(4);
        const storage = postgresStorage(db);
        const tenant = aTenant();
        const asset = anAsset(tenant);
        await Effect.runPromise(storage.tenants.insert(tenant));
        await Effect.runPromise(storage.assets.insert(asset));
        const mine = await Effect.runPromise(storage.assets.list(tenant.id, { limit: 10 }));
        const others = await Effect.runPromise(storage.assets.list(TenantId(uid("tnt")), { limit: 10 }));
        expect({ mine: mine.map((a) => a.id), others }).toEqual({ mine: [asset.id], others: [] });
        // The owner itself, outside the adapter's scope, sees no tenant's rows.
        expect((await db.query("SELECT id FROM assets")).rows).toEqual([]);
        expect((await admin.query(`SELECT id FROM ${schema}.assets`)).rows).toEqual([{ id: asset.id }]);

        // A deleted tenant's purge runs as this owner, held by the policies to that tenant alone;
        // the app role's new rights (retired slugs) work for this login's role too.
        const doomed = aTenant();
        const doomedAsset = anAsset(doomed);
        await Effect.runPromise(storage.tenants.insert(doomed));
        await Effect.runPromise(storage.assets.insert(doomedAsset));
        expect(await Effect.runPromise(storage.tenants.markDeleted(doomed.id, 1))).toBe(true);
        await Effect.runPromise(storage.tenants.purge(doomed.id));
        expect((await admin.query(`SELECT id FROM ${schema}.assets ORDER BY id`)).rows).toEqual([
          { id: asset.id },
        ]);
        expect((await admin.query(`SELECT id FROM ${schema}.tenants`)).rows).toEqual([{ id: tenant.id }]);
        const reused = await Effect.runPromise(
          Effect.either(storage.tenants.insert(aTenant({ slug: doomed.slug }))),
        );
        expect(reused._tag).toBe("Left");
      } finally {
        await db.close();
        await admin.exec(
          `DROP SCHEMA IF EXISTS ${schema} CASCADE; DROP SCHEMA IF EXISTS ${schema}_jobs CASCADE;
           DROP ROLE IF EXISTS "vod_app_${database}_${schema}";
           REVOKE CREATE ON DATABASE "${database}" FROM ${login}; DROP ROLE ${login}`,
        );
        await admin.close();
      }
    }, 60_000);
  },
);

import type * as Core from "@vod/core";
import type { Queryable } from "./sql.js";
import { COLUMNS } from "./telemetry-sink.js";

/** Raw SQL reads of what the adapter stored, in the shape of `@vod/contract-tests`' StorageBackdoor. */
export const postgresBackdoor = (sql: Queryable & { readonly schema?: string | undefined }) => {
  const first = async <R>(text: string, params: unknown[]) => (await sql.query<R>(text, params)).rows[0];
  return {
    tenant: (id: string) => first<Core.Tenant>("SELECT * FROM tenants WHERE id = $1", [id]),
    user: (id: string) => first<Core.UserRecord>("SELECT * FROM users WHERE id = $1", [id]),
    identity: (provider: "google", subject: string) =>
      first<Core.Identity>("SELECT * FROM identities WHERE provider = $1 AND subject = $2", [
        provider,
        subject,
      ]),
    refreshSession: (id: string) =>
      first<Core.RefreshSession>("SELECT * FROM refresh_sessions WHERE id = $1", [id]),
    refreshTokensOfSession: async (sessionId: string) =>
      (
        await sql.query<Core.RefreshToken>(
          "SELECT * FROM refresh_tokens WHERE session_id = $1 ORDER BY created_at",
          [sessionId],
        )
      ).rows,
    emailTokensOfUser: async (userId: string) =>
      (
        await sql.query<Core.EmailToken>(
          "SELECT * FROM email_tokens WHERE user_id = $1 ORDER BY created_at, token_hash",
          [userId],
        )
      ).rows,
    apiKey: (id: string) => first<Core.ApiKey>("SELECT * FROM api_keys WHERE id = $1", [id]),
    // A deleted asset reads as none, as it does in the memory adapter, whose rows go.
    asset: async (id: string) => {
      const row = await first<Core.Asset & { deleted_at: number | null }>(
        "SELECT * FROM assets WHERE id = $1",
        [id],
      );
      if (row === undefined || row.deleted_at !== null) return undefined;
      const { deleted_at: _, ...asset } = row;
      return asset as Core.Asset;
    },
    upload: (id: string) => first<Core.UploadSession>("SELECT * FROM upload_sessions WHERE id = $1", [id]),
    playbackSession: (id: string) =>
      first<Core.PlaybackSession>("SELECT * FROM playback_sessions WHERE id = $1", [id]),
    contentKey: (assetId: string) =>
      first<Core.ContentKey>("SELECT * FROM content_keys WHERE asset_id = $1", [assetId]),
    webhook: (id: string) => first<Core.Webhook>("SELECT * FROM webhooks WHERE id = $1", [id]),
    textTrack: (id: string) => first<Core.TextTrack>("SELECT * FROM text_tracks WHERE id = $1", [id]),
    idempotencyRecords: async (tenantId: string) =>
      (
        await sql.query<Record<string, unknown>>("SELECT * FROM idempotency_keys WHERE tenant_id = $1", [
          tenantId,
        ])
      ).rows,
    // Every table of our schema with a tenant_id column, as the catalog lists them now: a table
    // a later migration adds is counted without a change here.
    rowsOfTenant: async (tenantId: string) => {
      const { rows: tables } = await sql.query<{ table_name: string }>(
        `SELECT c.table_name FROM information_schema.columns c
         JOIN information_schema.tables t USING (table_schema, table_name)
         WHERE c.table_schema = current_schema() AND c.column_name = 'tenant_id' AND t.table_type = 'BASE TABLE'
         ORDER BY c.table_name`,
        [],
      );
      const counts: Record<string, number> = {};
      const count = async (table: string, column: string) => {
        const { rows } = await sql.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${table}" WHERE ${column} = $1`,
          [tenantId],
        );
        const n = rows[0]?.n ?? 0;
        if (n > 0) counts[table] = n;
      };
      await count("tenants", "id");
      for (const { table_name } of tables) await count(table_name, "tenant_id");
      return counts;
    },
    // pg-boss keeps its jobs in a schema of its own, named after ours (see jobs.ts).
    jobs: async () =>
      (
        await sql.query<{ name: string; data: unknown; state: string }>(
          `SELECT name, data, state FROM ${sql.schema ?? "vod"}_jobs.job ORDER BY created_on`,
        )
      ).rows,
    insertUser: async (u: Core.UserRecord) => {
      await sql.query(
        `INSERT INTO users (id, tenant_id, email, email_verified, name, role, password_hash, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
        [u.id, u.tenant_id, u.email, u.email_verified, u.name, u.role, u.password_hash, u.created_at],
      );
    },
    // One statement for them all: unnest of one array per column.
    insertApiKeys: async (keys: ReadonlyArray<Core.ApiKey>) => {
      const column = <K extends keyof Core.ApiKey>(name: K) => keys.map((k) => k[name]);
      await sql.query(
        `INSERT INTO api_keys (id, tenant_id, name, prefix, scopes, key_hash, last_used_at, expires_at, revoked_at, created_at)
         SELECT id, tenant_id, name, prefix, string_to_array(scopes, ','), key_hash, last_used_at, expires_at, revoked_at, created_at
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                     $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[])
           AS k(id, tenant_id, name, prefix, scopes, key_hash, last_used_at, expires_at, revoked_at, created_at)`,
        [
          column("id"),
          column("tenant_id"),
          column("name"),
          column("prefix"),
          keys.map((k) => k.scopes.join(",")),
          column("key_hash"),
          column("last_used_at"),
          column("expires_at"),
          column("revoked_at"),
          column("created_at"),
        ],
      );
    },
    setTenantStatus: async (id: string, status: Core.TenantStatus) => {
      await sql.query("UPDATE tenants SET status = $2 WHERE id = $1", [id, status]);
    },
  };
};

interface TelemetryRow extends Omit<Core.TelemetryEvent, "extra"> {
  readonly extra: string;
}

/** Raw reads of telemetry_events, for tests: a session's events in the order they were stored. */
export const postgresTelemetryBackdoor = (db: Queryable) => ({
  events: async (sessionId: string): Promise<Core.TelemetryEvent[]> => {
    const { rows } = await db.query<TelemetryRow>(
      `SELECT ${COLUMNS.map(([name]) => (name === "extra" ? "extra::text AS extra" : name)).join(", ")}
       FROM telemetry_events WHERE session_id = $1 ORDER BY id`,
      [sessionId],
    );
    return rows.map((row) => ({ ...row, extra: JSON.parse(row.extra) as Core.TelemetryEvent["extra"] }));
  },
});

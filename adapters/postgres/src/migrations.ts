import { playbackRollupsSql, playbackViewsSql } from "./analytics.js";
import {
  emailTokensSql,
  idempotencyKeysSql,
  idempotencyPrincipalSql,
  rowLevelSecuritySql,
  tenantOwnedTablesSql,
} from "./row-level-security.js";
import type { Queryable, SqlDatabase } from "./sql.js";
import { withStartupLock } from "./startup-lock.js";
import { APP_ROLE_SQL } from "./tenancy.js";

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/**
 * The schema, as an append-only list: a released migration is never edited, a change is a new
 * one. Every tenant-owned table carries tenant_id; list orders have an index that serves them.
 */
export const migrations: ReadonlyArray<Migration> = [
  {
    version: 1,
    name: "accounts, API keys and assets",
    sql: `
CREATE TABLE tenants (
  id text PRIMARY KEY,
  slug text NOT NULL UNIQUE,
  name text NOT NULL,
  plan text NOT NULL CHECK (plan IN ('free', 'pro', 'enterprise')),
  status text NOT NULL CHECK (status IN ('active', 'suspended')),
  created_at bigint NOT NULL
);

CREATE TABLE users (
  id text PRIMARY KEY,
  tenant_id text NOT NULL REFERENCES tenants (id),
  email text NOT NULL,
  email_verified boolean NOT NULL,
  name text,
  role text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  password_hash text,
  created_at bigint NOT NULL
);
-- Emails are unique without regard to case; login looks them up through this index.
CREATE UNIQUE INDEX users_email_key ON users (lower(email));
CREATE INDEX users_tenant_idx ON users (tenant_id);

CREATE TABLE identities (
  provider text NOT NULL,
  subject text NOT NULL,
  user_id text NOT NULL REFERENCES users (id),
  tenant_id text NOT NULL REFERENCES tenants (id),
  created_at bigint NOT NULL,
  PRIMARY KEY (provider, subject)
);
CREATE INDEX identities_user_idx ON identities (tenant_id, user_id);

CREATE TABLE refresh_sessions (
  id text PRIMARY KEY,
  tenant_id text NOT NULL REFERENCES tenants (id),
  user_id text NOT NULL REFERENCES users (id),
  created_at bigint NOT NULL,
  revoked_at bigint,
  revoked_reason text CHECK (revoked_reason IN ('logout', 'reuse_detected', 'password_changed'))
);
CREATE INDEX refresh_sessions_live_idx ON refresh_sessions (tenant_id, user_id) WHERE revoked_at IS NULL;

CREATE TABLE refresh_tokens (
  token_hash text PRIMARY KEY,
  session_id text NOT NULL REFERENCES refresh_sessions (id),
  tenant_id text NOT NULL REFERENCES tenants (id),
  user_id text NOT NULL REFERENCES users (id),
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL,
  used_at bigint
);
CREATE INDEX refresh_tokens_session_idx ON refresh_tokens (session_id);

CREATE TABLE api_keys (
  id text PRIMARY KEY,
  tenant_id text NOT NULL REFERENCES tenants (id),
  name text NOT NULL,
  prefix text NOT NULL,
  scopes text[] NOT NULL,
  key_hash text NOT NULL UNIQUE,
  last_used_at bigint,
  expires_at bigint,
  revoked_at bigint,
  created_at bigint NOT NULL
);
CREATE INDEX api_keys_list_idx ON api_keys (tenant_id, created_at DESC, id DESC);

CREATE TABLE assets (
  id text PRIMARY KEY,
  tenant_id text NOT NULL REFERENCES tenants (id),
  title text NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'uploaded', 'processing', 'ready', 'failed')),
  failure_code text,
  source_width integer,
  source_height integer,
  source_fps double precision,
  source_codec text,
  source_duration_ms bigint,
  source_bitrate_kbps integer,
  origin_size_bytes bigint,
  checksum_sha256 text,
  drm_enabled boolean NOT NULL,
  visibility text NOT NULL CHECK (visibility IN ('private', 'public')),
  published_at bigint,
  created_at bigint NOT NULL
);
-- Keyset pagination, newest first, with and without the status filter.
CREATE INDEX assets_list_idx ON assets (tenant_id, created_at DESC, id DESC);
CREATE INDEX assets_status_list_idx ON assets (tenant_id, status, created_at DESC, id DESC);
`,
  },
  {
    version: 2,
    name: "upload sessions",
    sql: `
CREATE TABLE upload_sessions (
  id text PRIMARY KEY,
  tenant_id text NOT NULL REFERENCES tenants (id),
  asset_id text NOT NULL REFERENCES assets (id),
  status text NOT NULL CHECK (status IN ('created', 'completed', 'aborted', 'expired')),
  part_size bigint NOT NULL,
  part_count integer NOT NULL,
  size_bytes bigint NOT NULL,
  sha256 text,
  expires_at bigint NOT NULL,
  created_at bigint NOT NULL,
  completed_at bigint,
  completed_parts jsonb
);
-- At most one open session per asset: of two concurrent starts, one wins.
CREATE UNIQUE INDEX upload_sessions_open_key ON upload_sessions (asset_id) WHERE status = 'created';
CREATE INDEX upload_sessions_asset_idx ON upload_sessions (tenant_id, asset_id);
CREATE INDEX upload_sessions_expiry_idx ON upload_sessions (expires_at) WHERE status = 'created';
`,
  },
  {
    version: 3,
    name: "playback sessions, content keys, revocations, telemetry",
    sql: `
-- One row per playback token minted; ended_at is set when the session is revoked.
CREATE TABLE playback_sessions (
  id text PRIMARY KEY,
  tenant_id text NOT NULL REFERENCES tenants (id),
  asset_id text NOT NULL REFERENCES assets (id),
  drm boolean NOT NULL,
  expires_at bigint NOT NULL, created_at bigint NOT NULL, ended_at bigint
);
CREATE INDEX playback_sessions_asset_idx ON playback_sessions (tenant_id, asset_id);

-- Content keys are kept only wrapped by the master key.
CREATE TABLE content_keys (
  tenant_id text NOT NULL REFERENCES tenants (id),
  asset_id text NOT NULL REFERENCES assets (id),
  kid text NOT NULL,
  wrapped_key text NOT NULL,
  created_at bigint NOT NULL,
  PRIMARY KEY (tenant_id, asset_id)
);

-- Ended sessions, read by every media and DRM node; rows past "until" may be deleted.
CREATE TABLE playback_revocations (
  session_id text PRIMARY KEY,
  until bigint NOT NULL
);
CREATE INDEX playback_revocations_until_idx ON playback_revocations (until);

CREATE TABLE telemetry_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id text NOT NULL,
  session_id text NOT NULL,
  asset_id text NOT NULL,
  received_at bigint NOT NULL,
  player_version text,
  event text NOT NULL,
  ts_ms double precision NOT NULL,
  playhead_ms double precision NOT NULL,
  rendition text,
  error_code text,
  startup_ms double precision,
  stall_ms double precision,
  bitrate_kbps double precision,
  extra jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX telemetry_events_session_idx ON telemetry_events (tenant_id, session_id);
`,
  },
  { version: 4, name: "row-level security", sql: rowLevelSecuritySql },
  {
    version: 5,
    name: "deleted assets",
    // A deleted asset's row stays (its upload and playback sessions refer to it, and the app
    // role deletes no tenant row); every read of the repository leaves it out.
    sql: `
ALTER TABLE assets ADD COLUMN deleted_at bigint;
DROP INDEX assets_list_idx;
DROP INDEX assets_status_list_idx;
CREATE INDEX assets_list_idx ON assets (tenant_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX assets_status_list_idx ON assets (tenant_id, status, created_at DESC, id DESC)
  WHERE deleted_at IS NULL;
`,
  },
  { version: 6, name: "idempotency keys", sql: idempotencyKeysSql },
  {
    version: 7,
    name: "webhooks",
    sql: `
-- Deleted webhooks stay (deleted_at): their deliveries refer to them, and the app role deletes nothing.
CREATE TABLE webhooks (
  id text PRIMARY KEY,
  tenant_id text NOT NULL REFERENCES tenants (id),
  url text NOT NULL, events text[] NOT NULL, description text,
  -- Kept as it is: the sender signs with it.
  secret text NOT NULL,
  created_at bigint NOT NULL, deleted_at bigint
);
CREATE INDEX webhooks_tenant_idx ON webhooks (tenant_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;

-- The outbox: a row per event and webhook, written in the transaction of the change.
CREATE TABLE webhook_deliveries (
  id text PRIMARY KEY,
  tenant_id text NOT NULL REFERENCES tenants (id),
  webhook_id text NOT NULL REFERENCES webhooks (id),
  -- The event, its body fixed when it was recorded.
  event_id text NOT NULL, event_type text NOT NULL, payload text NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
  attempts integer NOT NULL, last_status_code integer, next_attempt_at bigint,
  created_at bigint NOT NULL
);
CREATE INDEX webhook_deliveries_webhook_idx
  ON webhook_deliveries (tenant_id, webhook_id, created_at DESC, id DESC);
${tenantOwnedTablesSql(["webhooks", "webhook_deliveries"])}
`,
  },
  { version: 8, name: "idempotency keys per principal", sql: idempotencyPrincipalSql },
  { version: 9, name: "tokens of account mail", sql: emailTokensSql },
  {
    version: 10,
    name: "sessions ended by an account claim",
    sql: `
ALTER TABLE refresh_sessions DROP CONSTRAINT refresh_sessions_revoked_reason_check;
ALTER TABLE refresh_sessions ADD CONSTRAINT refresh_sessions_revoked_reason_check
  CHECK (revoked_reason IN ('logout', 'reuse_detected', 'password_changed', 'account_claimed'));
`,
  },
  {
    version: 11,
    name: "renditions of an asset and when it became playable",
    // An asset ready before this version had every rung made; its renditions are not known here
    // (they are in its master playlist), so it shows none, and its ready_at is unknown.
    sql: `
ALTER TABLE assets ADD COLUMN renditions jsonb NOT NULL DEFAULT '[]'::jsonb;
ALTER TABLE assets ADD COLUMN ready_at bigint;
`,
  },
  {
    version: 12,
    name: "the chunk ledger of long sources",
    // A row per chunk of a unit of renditions; the transaction that sets the last done_at of a
    // unit enqueues its packaging. Rows stay after packaging: the app role deletes no tenant row.
    sql: `
CREATE TABLE asset_chunks (
  tenant_id text NOT NULL REFERENCES tenants (id),
  asset_id text NOT NULL REFERENCES assets (id),
  unit text NOT NULL,
  chunk_index integer NOT NULL,
  chunk_count integer NOT NULL,
  start_ms bigint NOT NULL,
  end_ms bigint,
  done_at bigint,
  PRIMARY KEY (tenant_id, asset_id, unit, chunk_index)
);
${tenantOwnedTablesSql(["asset_chunks"])}
`,
  },
  { version: 13, name: "playback views for analytics, raw event retention", sql: playbackViewsSql },
  {
    version: 14,
    name: "deleted tenants and their retired slugs",
    // A deleted tenant's row stays, status deleted, until the delete-tenant job removes it with
    // every other row of the tenant. Its slug is kept apart as a SHA-256, never to be given again:
    // no tenant_id, nothing that names anyone. Not tenant-owned, so no policy; the app role reads
    // it (signup) and adds to it (deletion), nothing else.
    sql: `
ALTER TABLE tenants DROP CONSTRAINT tenants_status_check;
ALTER TABLE tenants ADD CONSTRAINT tenants_status_check CHECK (status IN ('active', 'suspended', 'deleted'));
CREATE TABLE retired_tenant_slugs (
  slug_sha256 text PRIMARY KEY,
  retired_at bigint NOT NULL
);
DO $$
BEGIN
  EXECUTE format('GRANT SELECT, INSERT ON retired_tenant_slugs TO %I', ${APP_ROLE_SQL});
END $$;
`,
  },
  {
    version: 15,
    name: "static MP4 renditions of an asset",
    sql: `
ALTER TABLE assets ADD COLUMN mp4_support text NOT NULL DEFAULT 'none'
  CHECK (mp4_support IN ('none', 'standard'));
ALTER TABLE assets ADD COLUMN static_renditions jsonb NOT NULL DEFAULT '[]'::jsonb;
`,
  },
  {
    version: 16,
    name: "text tracks of assets",
    // Removed tracks keep their row (deleted_at): the app role deletes no tenant row. Their
    // content is in the object store, under the asset's text-tracks prefix.
    sql: `
CREATE TABLE text_tracks (
  id text PRIMARY KEY,
  tenant_id text NOT NULL REFERENCES tenants (id),
  asset_id text NOT NULL REFERENCES assets (id),
  type text NOT NULL CHECK (type = 'text'),
  language_code text NOT NULL,
  name text NOT NULL,
  closed_captions boolean NOT NULL,
  status text NOT NULL,
  created_at bigint NOT NULL,
  deleted_at bigint
);
CREATE INDEX text_tracks_of_asset ON text_tracks (tenant_id, asset_id, created_at) WHERE deleted_at IS NULL;
${tenantOwnedTablesSql(["text_tracks"])}
`,
  },
  { version: 17, name: "rollups of playback views for analytics", sql: playbackRollupsSql },
  {
    version: 18,
    name: "the sweep of expired email and refresh tokens",
    // As the Idempotency-Key sweep (migration 6): in the sweep's scope the app role sees and
    // deletes rows of any tenant past the expiry the scope names, and nothing else; the indexes
    // find them without reading every token.
    sql: `
CREATE INDEX email_tokens_expiry_idx ON email_tokens (expires_at);
CREATE INDEX refresh_tokens_expiry_idx ON refresh_tokens (expires_at);
${["email_tokens", "refresh_tokens"]
  .map(
    (table) => `CREATE POLICY expired_${table}_read ON ${table} FOR SELECT
  USING (expires_at <= nullif(current_setting('vod.expired_before', true), '')::bigint);
CREATE POLICY expired_${table}_delete ON ${table} FOR DELETE
  USING (expires_at <= nullif(current_setting('vod.expired_before', true), '')::bigint);
`,
  )
  .join("")}DO $$
BEGIN
  EXECUTE format('GRANT DELETE ON email_tokens, refresh_tokens TO %I', ${APP_ROLE_SQL});
END $$;
`,
  },
];

/**
 * Applies the migrations not applied yet, each in its own transaction, on `conn`, which holds the
 * start-up lock (startup-lock.ts).
 */
export const applyMigrations = async (
  conn: Queryable,
  schema: string | undefined,
): Promise<ReadonlyArray<number>> => {
  // The name was checked when the pool was made; search_path already points at it.
  if (schema) await conn.exec(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
  await conn.exec(`CREATE TABLE IF NOT EXISTS vod_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
  )`);
  const { rows } = await conn.query<{ version: number }>("SELECT version FROM vod_migrations");
  const applied = new Set(rows.map((r) => r.version));
  const done: number[] = [];
  for (const migration of migrations) {
    if (applied.has(migration.version)) continue;
    await conn.exec("BEGIN");
    try {
      await conn.exec(migration.sql);
      await conn.query("INSERT INTO vod_migrations (version, name) VALUES ($1, $2)", [
        migration.version,
        migration.name,
      ]);
      await conn.exec("COMMIT");
    } catch (error) {
      await conn.exec("ROLLBACK");
      throw new Error(`migration ${migration.version} (${migration.name}) failed`, { cause: error });
    }
    done.push(migration.version);
  }
  return done;
};

/**
 * Applies the migrations not applied yet, under the start-up lock: processes starting together
 * take turns, and the later ones find the work done. `prepareDatabase` also installs the queue.
 */
export const migrate = (db: SqlDatabase): Promise<ReadonlyArray<number>> =>
  withStartupLock(db, (conn) => applyMigrations(conn, db.schema));

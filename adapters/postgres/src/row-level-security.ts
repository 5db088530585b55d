import { APP_ROLE_SQL } from "./tenancy.js";

/** The tables a tenant owns: each has tenant_id (tenants itself is bound by its id). */
const TENANT_OWNED = [
  "users",
  "identities",
  "refresh_sessions",
  "refresh_tokens",
  "api_keys",
  "assets",
  "upload_sessions",
  "playback_sessions",
  "content_keys",
  "telemetry_events",
] as const;

const TENANT = "current_setting('vod.tenant_id', true)";

/** The isolation policy of one tenant-owned table. */
const isolationSql = (table: string) => `
ALTER TABLE ${table} ENABLE ROW LEVEL SECURITY;
ALTER TABLE ${table} FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON ${table} USING (tenant_id = ${TENANT}) WITH CHECK (tenant_id = ${TENANT});`;

/**
 * For tables a later migration adds: the app role's rights on them (no DELETE, as on the others)
 * and their isolation policy, as migration 4 gave the first ones.
 */
export const tenantOwnedTablesSql = (tables: ReadonlyArray<string>) => `
DO $$
BEGIN
  EXECUTE format('GRANT SELECT, INSERT, UPDATE ON ${tables.join(", ")} TO %I', ${APP_ROLE_SQL});
END $$;
${tables.map(isolationSql).join("")}
`;

/**
 * The schema's app role, made if missing, with the rights migration 4 gave it on the first
 * tables; run in the schema (`current_schema()`). Also what a restore into another database
 * runs, whose role is named after that database.
 */
export const appRoleSql = `
DO $$
DECLARE
  app text := ${APP_ROLE_SQL};
BEGIN
  IF length(app) > 63 THEN
    RAISE EXCEPTION 'the role name % is longer than 63 bytes: use a shorter schema name', app;
  END IF;
  -- Migrations of one schema take turns (advisory lock), so no other start creates it meanwhile.
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = app) THEN
    EXECUTE format('CREATE ROLE %I NOLOGIN NOINHERIT', app);
  END IF;
  IF EXISTS (SELECT FROM pg_roles WHERE rolname = app AND (rolsuper OR rolbypassrls)) THEN
    RAISE EXCEPTION 'role % bypasses row-level security', app;
  END IF;
  -- A superuser may SET ROLE to anyone; any other login (Cloud SQL's cloudsqlsuperuser) must be a
  -- member with the right to SET ROLE. From PostgreSQL 16 on, a CREATEROLE login that creates a
  -- role holds it with ADMIN only, and SET is an option of its own.
  IF current_setting('server_version_num')::int >= 160000 THEN
    IF NOT pg_has_role(current_user, app, 'SET') THEN
      EXECUTE format('GRANT %I TO %I WITH SET TRUE', app, current_user);
    END IF;
  ELSIF NOT pg_has_role(current_user, app, 'MEMBER') THEN
    EXECUTE format('GRANT %I TO %I', app, current_user);
  END IF;
  EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), app);
  EXECUTE format('GRANT SELECT, INSERT, UPDATE ON tenants, ${TENANT_OWNED.join(", ")} TO %I', app);
END $$;
`;

/**
 * Migration 4: row-level security as defence in depth. The adapter runs tenant work as a role of
 * its own (superusers and BYPASSRLS roles would skip the policies), named after the database and
 * the schema so that deployments sharing a cluster do not share it. FORCE binds the tables' owner
 * too, so a statement that forgot to switch role sees no tenant's rows (unless the login is a
 * superuser, which no policy binds). The role gets no DELETE: the application deletes no
 * tenant-owned row.
 */
export const rowLevelSecuritySql = `${appRoleSql}
ALTER TABLE tenants ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenants FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tenants USING (id = ${TENANT}) WITH CHECK (id = ${TENANT});
${TENANT_OWNED.map(isolationSql).join("")}

-- The lookups that discover the tenant: each sees only the rows of the one key it was given.
CREATE POLICY user_by_email ON users FOR SELECT
  USING (lower(email) = lower(current_setting('vod.email', true)));
CREATE POLICY identity_by_subject ON identities FOR SELECT
  USING (provider = current_setting('vod.identity_provider', true)
    AND subject = current_setting('vod.identity_subject', true));
CREATE POLICY api_key_by_hash ON api_keys FOR SELECT
  USING (key_hash = current_setting('vod.api_key_hash', true));
CREATE POLICY refresh_token_by_hash ON refresh_tokens FOR SELECT
  USING (token_hash = current_setting('vod.refresh_token_hash', true));
-- Rotation marks the token used by its hash alone (the row lock decides a race).
CREATE POLICY refresh_token_mark_used ON refresh_tokens FOR UPDATE
  USING (token_hash = current_setting('vod.refresh_token_hash', true))
  WITH CHECK (token_hash = current_setting('vod.refresh_token_hash', true));
-- The expiry sweep lists open sessions past their expiry, then closes each in its tenant.
CREATE POLICY expired_uploads ON upload_sessions FOR SELECT
  USING (status = 'created' AND expires_at <= nullif(current_setting('vod.expired_before', true), '')::bigint);
-- Telemetry batches span tenants: insert only, never read.
CREATE POLICY telemetry_ingest ON telemetry_events FOR INSERT
  WITH CHECK (current_setting('vod.telemetry', true) = 'ingest');
`;

/**
 * Migration 6: Idempotency-Key records, tenant-owned like the rest, shared by every node. The
 * only table the app role may delete from: records past their expiry, of any tenant, in the
 * cleanup's scope (`vod.expired_before`), as the upload expiry sweep reads them.
 */
export const idempotencyKeysSql = `
CREATE TABLE idempotency_keys (
  tenant_id text NOT NULL REFERENCES tenants (id),
  key text NOT NULL,
  fingerprint text NOT NULL,
  -- Null while the first request runs.
  status integer,
  body jsonb,
  locked_until bigint NOT NULL,
  expires_at bigint NOT NULL,
  PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_keys_expiry_idx ON idempotency_keys (expires_at);
${isolationSql("idempotency_keys")}
CREATE POLICY expired_idempotency_keys_read ON idempotency_keys FOR SELECT
  USING (expires_at <= nullif(current_setting('vod.expired_before', true), '')::bigint);
CREATE POLICY expired_idempotency_keys_delete ON idempotency_keys FOR DELETE
  USING (expires_at <= nullif(current_setting('vod.expired_before', true), '')::bigint);
DO $$
BEGIN
  EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency_keys TO %I', ${APP_ROLE_SQL});
END $$;
`;

/**
 * Migration 8: Idempotency-Key records per principal (an API key or a user) within the tenant,
 * their secrets sealed and fingerprints keyed (the core's idempotency.ts). The records written
 * before hold secrets in clear and answer any credential of the tenant: they are emptied, not
 * carried over. They lived 24 hours; a retry of one of them within that time runs again.
 * TRUNCATE, because no policy lets the owner's DELETE see every tenant's rows. And the index
 * the quota's count and the `status=active` list read.
 */
export const idempotencyPrincipalSql = `
TRUNCATE idempotency_keys;
ALTER TABLE idempotency_keys ADD COLUMN principal text NOT NULL;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE idempotency_keys ADD PRIMARY KEY (tenant_id, principal, key);
CREATE INDEX api_keys_active_idx ON api_keys (tenant_id, created_at DESC, id DESC) WHERE revoked_at IS NULL;
`;

/**
 * Migration 9: the tokens of account mail (verification, password reset), tenant-owned. A link
 * is used by its hash alone, before the tenant is known, as a refresh token is rotated: the
 * lookup sees and updates only the row of the one hash it was given.
 */
export const emailTokensSql = `
CREATE TABLE email_tokens (
  token_hash text PRIMARY KEY,
  purpose text NOT NULL CHECK (purpose IN ('verify_email', 'reset_password')),
  tenant_id text NOT NULL REFERENCES tenants (id),
  user_id text NOT NULL REFERENCES users (id),
  email text NOT NULL,
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL,
  used_at bigint
);
CREATE INDEX email_tokens_user_idx ON email_tokens (tenant_id, user_id) WHERE used_at IS NULL;
${tenantOwnedTablesSql(["email_tokens"])}
CREATE POLICY email_token_by_hash ON email_tokens FOR SELECT
  USING (token_hash = current_setting('vod.email_token_hash', true));
CREATE POLICY email_token_use ON email_tokens FOR UPDATE
  USING (token_hash = current_setting('vod.email_token_hash', true))
  WITH CHECK (token_hash = current_setting('vod.email_token_hash', true));
`;

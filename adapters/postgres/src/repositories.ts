import {
  type ApiKey,
  type Asset,
  type AssetChunk,
  Conflict,
  type ContentKey,
  type EmailToken,
  type EnqueueOptions,
  type Identity,
  type JobName,
  type JobTypes,
  type PlaybackSession,
  type RefreshSession,
  type RefreshToken,
  type Repositories,
  StorageError,
  type Tenant,
  type TextTrack,
  type UploadSession,
  type UserRecord,
  type Webhook,
  type WebhookDelivery,
} from "@vod/core";
import { Effect, Option } from "effect";
import type { Queryable } from "./sql.js";
import { inScope, loginScope, lookupScope, type Scope, type ScopedSql, tenantScope } from "./tenancy.js";

const UNIQUE_VIOLATION = "23505";

const isUniqueViolation = (error: unknown) =>
  typeof error === "object" && error !== null && (error as { code?: unknown }).code === UNIQUE_VIOLATION;

const storageError = (cause: unknown) => new StorageError({ message: "database request failed", cause });

/**
 * SQLSTATE class 22, a data exception (22021 a NUL byte, 22P05 an untranslatable character,
 * 22001 a value too long): the request checks should have refused the value, and no retry can
 * make it succeed. A defect (500, logged with its cause), never a retryable storage_error.
 */
const isDataException = (error: unknown) => {
  const code = typeof error === "object" && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === "string" && code.startsWith("22");
};

const attempt = <A, E>(run: () => Promise<A>, onError: (error: unknown) => E): Effect.Effect<A, E> =>
  Effect.tryPromise({ try: run, catch: (error) => error }).pipe(
    Effect.catchAll((error) => (isDataException(error) ? Effect.die(error) : Effect.fail(onError(error)))),
  );

const USER = "id, tenant_id, email, email_verified, name, role, password_hash, created_at";
const SESSION = "id, tenant_id, user_id, created_at, revoked_at, revoked_reason";
const TOKEN = "token_hash, session_id, tenant_id, user_id, created_at, expires_at, used_at";
const EMAIL_TOKEN = "token_hash, purpose, tenant_id, user_id, email, created_at, expires_at, used_at";
const API_KEY =
  "id, tenant_id, name, prefix, scopes, key_hash, last_used_at, expires_at, revoked_at, created_at";
/** A key neither revoked nor expired at the time in parameter `now`. */
const activeKeyAt = (now: string) => `revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${now})`;
const ASSET_COLUMNS = [
  "id",
  "tenant_id",
  "title",
  "status",
  "failure_code",
  "source_width",
  "source_height",
  "source_fps",
  "source_codec",
  "source_duration_ms",
  "source_bitrate_kbps",
  "origin_size_bytes",
  "checksum_sha256",
  "drm_enabled",
  "visibility",
  "published_at",
  "renditions",
  "ready_at",
  "mp4_support",
  "static_renditions",
  "created_at",
] as const satisfies ReadonlyArray<keyof Asset>;
const ASSET = ASSET_COLUMNS.join(", ");
const JSONB_COLUMNS: ReadonlySet<string> = new Set(["renditions", "static_renditions"]);
/** A column's parameter: jsonb columns the drivers read as JSON but write as an array literal. */
const jsonbParam = (column: string, value: unknown) =>
  JSONB_COLUMNS.has(column) ? JSON.stringify(value) : value;
const assetParam = (a: Asset, column: (typeof ASSET_COLUMNS)[number]) => jsonbParam(column, a[column]);
/**
 * What a client changes (PATCH) and the static renditions' list; `update` writes the rest, but
 * for the keys and created_at.
 */
const ASSET_DETAIL_COLUMNS = [
  "title",
  "visibility",
  "published_at",
  "mp4_support",
  "static_renditions",
] as const satisfies ReadonlyArray<keyof Asset>;
const ASSET_STATE_COLUMNS = ASSET_COLUMNS.filter(
  (c) =>
    c !== "id" &&
    c !== "tenant_id" &&
    c !== "created_at" &&
    !(ASSET_DETAIL_COLUMNS as ReadonlyArray<string>).includes(c),
);
const UPLOAD = [
  "id",
  "tenant_id",
  "asset_id",
  "status",
  "part_size",
  "part_count",
  "size_bytes",
  "sha256",
  "expires_at",
  "created_at",
  "completed_at",
  "completed_parts",
].join(", ");

const CHUNK = "tenant_id, asset_id, unit, chunk_index, chunk_count, start_ms, end_ms, done_at";
const TEXT_TRACK =
  "id, tenant_id, asset_id, type, language_code, name, closed_captions, status, created_at, deleted_at";
const WEBHOOK = "id, tenant_id, url, events, description, secret, created_at, deleted_at";
const DELIVERY =
  "id, tenant_id, webhook_id, event_id, event_type, payload, status, attempts, last_status_code, next_attempt_at, created_at";

/** Enqueues a job on a connection or transaction; absent where this process has no queue. */
export type Enqueue = (
  sql: Queryable,
  name: JobName,
  data: JobTypes[JobName],
  options?: EnqueueOptions,
) => Promise<void>;

/** The hex SHA-256 of a slug, as retired_tenant_slugs keeps it (the tombstone names no one). */
const SLUG_SHA256 = (slug: string) => `encode(sha256(convert_to(${slug}, 'UTF8')), 'hex')`;

/** The schema's tables with a tenant_id column: a table a later migration adds is purged too. */
const TENANT_TABLES = `
SELECT c.relname AS name FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
  AND a.attname = 'tenant_id' AND NOT a.attisdropped`;

/** Foreign keys between the schema's tables: a referencing row goes before the row it refers to. */
const REFERENCES = `
SELECT child.relname AS child, parent.relname AS parent FROM pg_constraint k
JOIN pg_class child ON child.oid = k.conrelid JOIN pg_class parent ON parent.oid = k.confrelid
WHERE k.contype = 'f' AND k.connamespace = current_schema()::regnamespace`;

/** The tables in an order in which no row is deleted while a row of another table refers to it. */
const deletionOrder = (
  tables: ReadonlyArray<string>,
  references: ReadonlyArray<{ readonly child: string; readonly parent: string }>,
): ReadonlyArray<string> => {
  const left = new Set(tables);
  const order: string[] = [];
  while (left.size > 0) {
    const free = [...left].filter(
      (table) => !references.some((r) => r.parent === table && r.child !== table && left.has(r.child)),
    );
    // A cycle of references (none in our schema): the rest in any order, and the database says.
    const next = free.length > 0 ? free : [...left];
    for (const table of next.sort()) {
      order.push(table);
      left.delete(table);
    }
  }
  return order;
};

const placeholders = (n: number, from = 1) => Array.from({ length: n }, (_, i) => `$${i + from}`).join(", ");

/** The INSERT of `record` into `table`, its values in the order `columns` (as the SQL lists them) names. */
const insertOf = <R extends object>(table: string, columns: string, record: R) => {
  const names = columns.split(", ") as Array<keyof R>;
  return [
    `INSERT INTO ${table} (${columns}) VALUES (${placeholders(names.length)})`,
    names.map((name) => record[name]),
  ] as const;
};

/**
 * The core's repositories over one connection or transaction. Rows come back in the domain's
 * own shape (the columns are named as the fields), so no mapping layer is needed. Each statement
 * names its scope (tenancy.ts): the tenant whose rows it touches, or the one key of a lookup that
 * discovers the tenant; the row-level security policies hold it to that.
 */
export const repositoriesOver = (sql: ScopedSql, enqueue?: Enqueue): Repositories => {
  const run = <R>(scope: Scope, text: string, params: ReadonlyArray<unknown> = []) =>
    attempt(() => sql.query<R>(scope, text, params), storageError);
  const one = <R>(scope: Scope, text: string, params: ReadonlyArray<unknown>) =>
    Effect.map(run<R>(scope, text, params), (r) => Option.fromNullable(r.rows[0]));
  /** The tenant's row of `table` with this id (and `also` true), if any. */
  /** The tenant's row of `table` with this id (and `also` true), if any; the text built once. */
  const byId = <R>(table: string, columns: string, also = "") => {
    const text = `SELECT ${columns} FROM ${table} WHERE tenant_id = $1 AND id = $2${also}`;
    return (tenantId: string, id: string) => one<R>(tenantScope(tenantId), text, [tenantId, id]);
  };
  const write = (scope: Scope, text: string, params: ReadonlyArray<unknown>) =>
    Effect.asVoid(run(scope, text, params));
  /**
   * Up to `limit` rows of `table` past their expiry, of any tenant: the sweep's scope sees and
   * deletes only rows that expired before `vod.expired_before` (migration 18).
   */
  const deleteExpiredFrom = (table: string, before: number, limit: number) =>
    Effect.map(
      run(
        lookupScope({ "vod.expired_before": String(before) }),
        `DELETE FROM ${table} WHERE ctid IN (SELECT ctid FROM ${table} WHERE expires_at <= $1 LIMIT $2)`,
        [before, limit],
      ),
      (r) => r.rowCount,
    );
  /** The row a lookup that discovers the tenant finds by its one key (a hash), in that key's scope. */
  const byKey =
    <R>(setting: string, text: string) =>
    (key: string) =>
      one<R>(lookupScope({ [setting]: key }), text, [key]);
  /** Sets one column of the tenant's row of `table` with this id (where `also` holds). */
  const setById = (table: string, column: string, also = "") => {
    const text = `UPDATE ${table} SET ${column} = $3 WHERE tenant_id = $1 AND id = $2${also}`;
    return (tenantId: string, id: string, value: unknown) =>
      write(tenantScope(tenantId), text, [tenantId, id, value]);
  };
  /** Whether the statement changed exactly one row: of racing conditional updates, one wins. */
  const changedOne = (scope: Scope, text: string, params: ReadonlyArray<unknown>) =>
    Effect.map(run(scope, text, params), (r) => r.rowCount === 1);
  const insertOrConflict = (scope: Scope, text: string, params: ReadonlyArray<unknown>, message: string) =>
    attempt(
      () => sql.query(scope, text, params),
      (error) => (isUniqueViolation(error) ? new Conflict({ message }) : storageError(error)),
    ).pipe(Effect.asVoid);

  return {
    tenants: {
      // A retired slug inserts nothing; a taken one violates the unique index: both a Conflict.
      insert: (t) =>
        attempt(
          () =>
            sql.query(
              tenantScope(t.id),
              `INSERT INTO tenants (id, slug, name, plan, status, created_at)
               SELECT $1, $2, $3, $4, $5, $6 WHERE NOT EXISTS
                 (SELECT FROM retired_tenant_slugs WHERE slug_sha256 = ${SLUG_SHA256("$2")})`,
              [t.id, t.slug, t.name, t.plan, t.status, t.created_at],
            ),
          (error) =>
            isUniqueViolation(error)
              ? new Conflict({ message: "the tenant slug is taken" })
              : storageError(error),
        ).pipe(
          Effect.flatMap((r) =>
            r.rowCount === 1
              ? Effect.void
              : Effect.fail(new Conflict({ message: "the tenant slug is retired" })),
          ),
        ),
      markDeleted: (id, at) =>
        Effect.map(
          run(
            tenantScope(id),
            `WITH deleted AS (
               UPDATE tenants SET status = 'deleted' WHERE id = $1 AND status <> 'deleted' RETURNING slug
             )
             INSERT INTO retired_tenant_slugs (slug_sha256, retired_at)
             SELECT ${SLUG_SHA256("slug")}, $2 FROM deleted
             ON CONFLICT (slug_sha256) DO NOTHING
             RETURNING 1`,
            [id, at],
          ),
          (r) => r.rowCount === 1,
        ),
      purge: (id) =>
        Effect.gen(function* () {
          // As the tables' owner (the app role deletes no tenant row), held to the tenant by the
          // policies all the same.
          const scope: Scope = { role: "login", settings: { "vod.tenant_id": id } };
          const { rows: tables } = yield* run<{ name: string }>(scope, TENANT_TABLES);
          const { rows: references } = yield* run<{ child: string; parent: string }>(scope, REFERENCES);
          for (const table of deletionOrder(
            tables.map((t) => t.name),
            references,
          ))
            yield* write(scope, `DELETE FROM "${table}" WHERE tenant_id = $1`, [id]);
          yield* write(scope, "DELETE FROM tenants WHERE id = $1", [id]);
        }),
      get: (id) =>
        one<Tenant>(
          tenantScope(id),
          "SELECT id, slug, name, plan, status, created_at FROM tenants WHERE id = $1",
          [id],
        ),
      setStatus: (id, status) =>
        write(tenantScope(id), "UPDATE tenants SET status = $2 WHERE id = $1", [id, status]),
      // NO KEY UPDATE: it makes lockers take turns, yet leaves the KEY SHARE lock that inserting
      // any row referring to the tenant takes free, so the tenant's other writes go on meanwhile.
      lock: (id) => write(tenantScope(id), "SELECT 1 FROM tenants WHERE id = $1 FOR NO KEY UPDATE", [id]),
    },
    users: {
      insert: (u) =>
        insertOrConflict(
          tenantScope(u.tenant_id),
          `INSERT INTO users (${USER}) VALUES (${placeholders(8)})`,
          [u.id, u.tenant_id, u.email, u.email_verified, u.name, u.role, u.password_hash, u.created_at],
          "an account with this email already exists",
        ),
      get: byId<UserRecord>("users", USER),
      findByEmail: (email) =>
        one<UserRecord>(
          lookupScope({ "vod.email": email.trim() }),
          `SELECT ${USER} FROM users WHERE lower(email) = lower($1)`,
          [email.trim()],
        ),
      setPasswordHash: setById("users", "password_hash"),
      setEmailVerified: setById("users", "email_verified"),
    },
    identities: {
      insert: (i) =>
        insertOrConflict(
          tenantScope(i.tenant_id),
          "INSERT INTO identities (provider, subject, user_id, tenant_id, created_at) VALUES ($1, $2, $3, $4, $5)",
          [i.provider, i.subject, i.user_id, i.tenant_id, i.created_at],
          "this identity is linked to another account",
        ),
      find: (provider, subject) =>
        one<Identity>(
          lookupScope({ "vod.identity_provider": provider, "vod.identity_subject": subject }),
          "SELECT provider, subject, user_id, tenant_id, created_at FROM identities WHERE provider = $1 AND subject = $2",
          [provider, subject],
        ),
    },
    refreshSessions: {
      insertSession: (s) => write(tenantScope(s.tenant_id), ...insertOf("refresh_sessions", SESSION, s)),
      getSession: byId<RefreshSession>("refresh_sessions", SESSION),
      revokeSession: (tenantId, id, at, reason) =>
        write(
          tenantScope(tenantId),
          `UPDATE refresh_sessions SET revoked_at = $3, revoked_reason = $4
           WHERE tenant_id = $1 AND id = $2 AND revoked_at IS NULL`,
          [tenantId, id, at, reason],
        ),
      revokeUserSessions: (tenantId, userId, exceptSessionId, at, reason) =>
        write(
          tenantScope(tenantId),
          `UPDATE refresh_sessions SET revoked_at = $4, revoked_reason = $5
           WHERE tenant_id = $1 AND user_id = $2 AND ($3::text IS NULL OR id <> $3) AND revoked_at IS NULL`,
          [tenantId, userId, exceptSessionId, at, reason],
        ),
      insertToken: (t) => write(tenantScope(t.tenant_id), ...insertOf("refresh_tokens", TOKEN, t)),
      findToken: byKey<RefreshToken>(
        "vod.refresh_token_hash",
        `SELECT ${TOKEN} FROM refresh_tokens WHERE token_hash = $1`,
      ),
      // The row lock taken by UPDATE makes a concurrent second call wait, then find used_at set.
      markTokenUsed: (hash, at) =>
        changedOne(
          lookupScope({ "vod.refresh_token_hash": hash }),
          "UPDATE refresh_tokens SET used_at = $2 WHERE token_hash = $1 AND used_at IS NULL",
          [hash, at],
        ),
      deleteTokensExpired: (before, limit) => deleteExpiredFrom("refresh_tokens", before, limit),
    },
    emailTokens: {
      insert: (t) => write(tenantScope(t.tenant_id), ...insertOf("email_tokens", EMAIL_TOKEN, t)),
      // The row lock taken by UPDATE makes a concurrent second call wait, then find used_at set.
      // RETURNING answers the row as updated; the token is answered as it was, unused.
      use: (hash, purpose, at) =>
        Effect.map(
          one<EmailToken>(
            lookupScope({ "vod.email_token_hash": hash }),
            `UPDATE email_tokens SET used_at = $3
             WHERE token_hash = $1 AND purpose = $2 AND used_at IS NULL AND expires_at > $3
             RETURNING ${EMAIL_TOKEN}`,
            [hash, purpose, at],
          ),
          Option.map((t) => ({ ...t, used_at: null })),
        ),
      useAllOfUser: (tenantId, userId, purpose, at) =>
        write(
          tenantScope(tenantId),
          `UPDATE email_tokens SET used_at = $4
           WHERE tenant_id = $1 AND user_id = $2 AND purpose = $3 AND used_at IS NULL`,
          [tenantId, userId, purpose, at],
        ),
      deleteExpired: (before, limit) => deleteExpiredFrom("email_tokens", before, limit),
    },
    apiKeys: {
      insert: (k) => write(tenantScope(k.tenant_id), ...insertOf("api_keys", API_KEY, k)),
      get: byId<ApiKey>("api_keys", API_KEY),
      findByHash: byKey<ApiKey>("vod.api_key_hash", `SELECT ${API_KEY} FROM api_keys WHERE key_hash = $1`),
      list: (tenantId, limit, filter) => {
        const status = filter?.status;
        const where =
          status === "active"
            ? ` AND ${activeKeyAt("$3")}`
            : status === "revoked"
              ? " AND revoked_at IS NOT NULL"
              : "";
        return Effect.map(
          run<ApiKey>(
            tenantScope(tenantId),
            `SELECT ${API_KEY} FROM api_keys WHERE tenant_id = $1${where}
             ORDER BY created_at DESC, id DESC LIMIT $2`,
            status === "active" ? [tenantId, limit, filter?.now] : [tenantId, limit],
          ),
          (r) => r.rows,
        );
      },
      countActive: (tenantId, now) =>
        Effect.map(
          run<{ active: number }>(
            tenantScope(tenantId),
            `SELECT count(*)::int AS active FROM api_keys WHERE tenant_id = $1 AND ${activeKeyAt("$2")}`,
            [tenantId, now],
          ),
          (r) => r.rows[0]?.active ?? 0,
        ),
      revoke: setById("api_keys", "revoked_at", " AND revoked_at IS NULL"),
      revokeAll: (tenantId, at) =>
        Effect.map(
          run(
            tenantScope(tenantId),
            "UPDATE api_keys SET revoked_at = $2 WHERE tenant_id = $1 AND revoked_at IS NULL",
            [tenantId, at],
          ),
          (r) => r.rowCount,
        ),
      touch: setById("api_keys", "last_used_at"),
    },
    assets: {
      insert: (a) =>
        write(
          tenantScope(a.tenant_id),
          `INSERT INTO assets (${ASSET}) VALUES (${placeholders(ASSET_COLUMNS.length)})`,
          ASSET_COLUMNS.map((c) => assetParam(a, c)),
        ),
      get: byId<Asset>("assets", ASSET, " AND deleted_at IS NULL"),
      list: (tenantId, { status, limit, after }) => {
        const params: unknown[] = [tenantId];
        let where = "tenant_id = $1 AND deleted_at IS NULL";
        if (status !== undefined) {
          params.push(status);
          where += ` AND status = $${params.length}`;
        }
        if (after !== undefined) {
          params.push(after.created_at, after.id);
          // A row comparison the (tenant_id[, status], created_at DESC, id DESC) index serves.
          where += ` AND (created_at, id) < ($${params.length - 1}, $${params.length})`;
        }
        params.push(limit);
        return Effect.map(
          run<Asset>(
            tenantScope(tenantId),
            `SELECT ${ASSET} FROM assets WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
            params,
          ),
          (r) => r.rows,
        );
      },
      update: (a) =>
        write(
          tenantScope(a.tenant_id),
          `UPDATE assets SET ${ASSET_STATE_COLUMNS.map((c, i) => `${c} = $${i + 3}`).join(", ")}
           WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL`,
          [a.tenant_id, a.id, ...ASSET_STATE_COLUMNS.map((c) => assetParam(a, c))],
        ),
      updateDetails: (tenantId, id, details) => {
        const columns = ASSET_DETAIL_COLUMNS.filter((c) => details[c] !== undefined);
        // Nothing to change still answers the stored asset (a PATCH of `{}`).
        const set = columns.length === 0 ? "id = id" : columns.map((c, i) => `${c} = $${i + 3}`).join(", ");
        return one<Asset>(
          tenantScope(tenantId),
          `UPDATE assets SET ${set} WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL RETURNING ${ASSET}`,
          [tenantId, id, ...columns.map((c) => jsonbParam(c, details[c]))],
        );
      },
      remove: (tenantId, id, at) =>
        changedOne(
          tenantScope(tenantId),
          "UPDATE assets SET deleted_at = $3 WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL",
          [tenantId, id, at],
        ),
    },
    uploads: {
      insert: (u) =>
        insertOrConflict(
          tenantScope(u.tenant_id),
          `INSERT INTO upload_sessions (${UPLOAD}) VALUES (${placeholders(11)}, $12::jsonb)`,
          [
            u.id,
            u.tenant_id,
            u.asset_id,
            u.status,
            u.part_size,
            u.part_count,
            u.size_bytes,
            u.sha256,
            u.expires_at,
            u.created_at,
            u.completed_at,
            u.completed_parts === null ? null : JSON.stringify(u.completed_parts),
          ],
          "an upload is already in progress for this asset",
        ),
      get: byId<UploadSession>("upload_sessions", UPLOAD),
      findOpen: (tenantId, assetId) =>
        one<UploadSession>(
          tenantScope(tenantId),
          `SELECT ${UPLOAD} FROM upload_sessions WHERE tenant_id = $1 AND asset_id = $2 AND status = 'created'`,
          [tenantId, assetId],
        ),
      close: (tenantId, id, status) =>
        changedOne(
          tenantScope(tenantId),
          "UPDATE upload_sessions SET status = $3 WHERE tenant_id = $1 AND id = $2 AND status = 'created'",
          [tenantId, id, status],
        ),
      complete: (tenantId, id, at, parts) =>
        changedOne(
          tenantScope(tenantId),
          `UPDATE upload_sessions SET status = 'completed', completed_at = $3, completed_parts = $4::jsonb
             WHERE tenant_id = $1 AND id = $2 AND status = 'created'`,
          [tenantId, id, at, JSON.stringify(parts)],
        ),
      listOpen: (tenantId, limit) =>
        Effect.map(
          run<UploadSession>(
            tenantScope(tenantId),
            `SELECT ${UPLOAD} FROM upload_sessions WHERE tenant_id = $1 AND status = 'created' LIMIT $2`,
            [tenantId, limit],
          ),
          (r) => r.rows,
        ),
      listExpired: (now, limit) =>
        Effect.map(
          run<UploadSession>(
            lookupScope({ "vod.expired_before": String(now) }),
            `SELECT ${UPLOAD} FROM upload_sessions WHERE status = 'created' AND expires_at <= $1
             ORDER BY expires_at LIMIT $2`,
            [now, limit],
          ),
          (r) => r.rows,
        ),
    },
    playbackSessions: {
      insert: (p) =>
        write(
          tenantScope(p.tenant_id),
          "INSERT INTO playback_sessions (id, tenant_id, asset_id, drm, expires_at, created_at, ended_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
          [p.id, p.tenant_id, p.asset_id, p.drm, p.expires_at, p.created_at, p.ended_at],
        ),
      get: byId<PlaybackSession>(
        "playback_sessions",
        "id, tenant_id, asset_id, drm, expires_at, created_at, ended_at",
      ),
      end: setById("playback_sessions", "ended_at", " AND ended_at IS NULL"),
      endForAsset: (tenantId, assetId, at, expiringAfter) =>
        Effect.zipRight(
          write(
            tenantScope(tenantId),
            "UPDATE playback_sessions SET ended_at = $3 WHERE tenant_id = $1 AND asset_id = $2 AND ended_at IS NULL",
            [tenantId, assetId, at],
          ),
          Effect.map(
            run<PlaybackSession>(
              tenantScope(tenantId),
              `SELECT id, tenant_id, asset_id, drm, expires_at, created_at, ended_at FROM playback_sessions
               WHERE tenant_id = $1 AND asset_id = $2 AND expires_at > $3`,
              [tenantId, assetId, expiringAfter],
            ),
            (r) => r.rows,
          ),
        ),
    },
    idempotencyKeys: {
      // One statement decides a race: the insert, or the takeover of an expired record or of a
      // running one whose lock ended, returns a row; a live record returns none and is read.
      claim: (tenantId, principal, key, fingerprint, { now, lockedUntil, expiresAt }) =>
        Effect.gen(function* () {
          const claimed = yield* run(
            tenantScope(tenantId),
            `INSERT INTO idempotency_keys AS k
               (tenant_id, principal, key, fingerprint, status, body, locked_until, expires_at)
             VALUES ($1, $2, $3, $4, NULL, NULL, $6, $7)
             ON CONFLICT (tenant_id, principal, key) DO UPDATE
               SET fingerprint = EXCLUDED.fingerprint, status = NULL, body = NULL,
                   locked_until = EXCLUDED.locked_until, expires_at = EXCLUDED.expires_at
               WHERE k.expires_at <= $5 OR (k.status IS NULL AND k.locked_until <= $5)
             RETURNING 1`,
            [tenantId, principal, key, fingerprint, now, lockedUntil, expiresAt],
          );
          if (claimed.rowCount === 1) return { _tag: "Claimed" } as const;
          const held = yield* one<{ fingerprint: string; status: number | null; body: unknown }>(
            tenantScope(tenantId),
            `SELECT fingerprint, status, body FROM idempotency_keys
             WHERE tenant_id = $1 AND principal = $2 AND key = $3`,
            [tenantId, principal, key],
          );
          // Gone between the two statements (the cleanup): as good as running, the client retries.
          if (Option.isNone(held)) return { _tag: "Running", fingerprint } as const;
          const { status, body } = held.value;
          return status === null
            ? ({ _tag: "Running", fingerprint: held.value.fingerprint } as const)
            : ({ _tag: "Done", fingerprint: held.value.fingerprint, response: { status, body } } as const);
        }),
      complete: (tenantId, principal, key, fingerprint, response) =>
        write(
          tenantScope(tenantId),
          `UPDATE idempotency_keys SET status = $5, body = $6::jsonb
           WHERE tenant_id = $1 AND principal = $2 AND key = $3 AND fingerprint = $4 AND status IS NULL`,
          [tenantId, principal, key, fingerprint, response.status, JSON.stringify(response.body)],
        ),
      release: (tenantId, principal, key, fingerprint) =>
        write(
          tenantScope(tenantId),
          `DELETE FROM idempotency_keys
           WHERE tenant_id = $1 AND principal = $2 AND key = $3 AND fingerprint = $4 AND status IS NULL`,
          [tenantId, principal, key, fingerprint],
        ),
      deleteExpired: (now, limit) =>
        Effect.map(
          run(
            lookupScope({ "vod.expired_before": String(now) }),
            `DELETE FROM idempotency_keys WHERE ctid IN (
               SELECT ctid FROM idempotency_keys WHERE expires_at <= $1 LIMIT $2)`,
            [now, limit],
          ),
          (r) => r.rowCount,
        ),
    },
    chunks: {
      // Of two runs recording one asset's ledger, the second conflicts on every row and inserts none.
      insertAll: (chunks) => {
        const [any] = chunks;
        if (any === undefined) return Effect.succeed(false);
        const columns = CHUNK.split(", ").length;
        const rows = chunks.map((_, i) => `(${placeholders(columns, i * columns + 1)})`);
        const values = chunks.flatMap((c) => CHUNK.split(", ").map((name) => c[name as keyof AssetChunk]));
        return Effect.map(
          run(
            tenantScope(any.tenant_id),
            `INSERT INTO asset_chunks (${CHUNK}) VALUES ${rows.join(", ")} ON CONFLICT DO NOTHING`,
            values,
          ),
          (r) => (r.rowCount ?? 0) > 0,
        );
      },
      list: (tenantId, assetId) =>
        Effect.map(
          run<AssetChunk>(
            tenantScope(tenantId),
            `SELECT ${CHUNK} FROM asset_chunks WHERE tenant_id = $1 AND asset_id = $2 ORDER BY unit, chunk_index`,
            [tenantId, assetId],
          ),
          (r) => r.rows,
        ),
      // The unit's rows are locked first, in one order: a racing call waits for this transaction,
      // and its count (a statement of its own, a fresh snapshot) then sees this one's mark.
      markDone: (tenantId, assetId, unit, index, at) => {
        const scope = tenantScope(tenantId);
        const key = [tenantId, assetId, unit];
        return Effect.gen(function* () {
          yield* run(
            scope,
            `SELECT chunk_index FROM asset_chunks WHERE tenant_id = $1 AND asset_id = $2 AND unit = $3
             ORDER BY chunk_index FOR UPDATE`,
            key,
          );
          const marked = yield* run(
            scope,
            `UPDATE asset_chunks SET done_at = $5
             WHERE tenant_id = $1 AND asset_id = $2 AND unit = $3 AND chunk_index = $4 AND done_at IS NULL`,
            [...key, index, at],
          );
          const left = yield* run<{ left: number }>(
            scope,
            `SELECT count(*)::int AS left FROM asset_chunks
             WHERE tenant_id = $1 AND asset_id = $2 AND unit = $3 AND done_at IS NULL`,
            key,
          );
          return { marked: marked.rowCount === 1, left: left.rows[0]?.left ?? 0 };
        });
      },
    },
    contentKeys: {
      // ON CONFLICT keeps the first key; the SELECT after it answers whichever is stored.
      insertIfAbsent: (k) =>
        Effect.flatMap(
          run(
            tenantScope(k.tenant_id),
            `INSERT INTO content_keys (tenant_id, asset_id, kid, wrapped_key, created_at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (tenant_id, asset_id) DO NOTHING`,
            [k.tenant_id, k.asset_id, k.kid, k.wrapped_key, k.created_at],
          ),
          () =>
            Effect.map(
              one<ContentKey>(
                tenantScope(k.tenant_id),
                "SELECT tenant_id, asset_id, kid, wrapped_key, created_at FROM content_keys WHERE tenant_id = $1 AND asset_id = $2",
                [k.tenant_id, k.asset_id],
              ),
              Option.getOrElse(() => k),
            ),
        ),
      get: (tenantId, assetId) =>
        one<ContentKey>(
          tenantScope(tenantId),
          "SELECT tenant_id, asset_id, kid, wrapped_key, created_at FROM content_keys WHERE tenant_id = $1 AND asset_id = $2",
          [tenantId, assetId],
        ),
    },
    textTracks: {
      insert: (t) => {
        const [text, values] = insertOf("text_tracks", TEXT_TRACK, t);
        return write(tenantScope(t.tenant_id), text, values);
      },
      get: (tenantId, assetId, id) =>
        one<TextTrack>(
          tenantScope(tenantId),
          `SELECT ${TEXT_TRACK} FROM text_tracks
           WHERE tenant_id = $1 AND asset_id = $2 AND id = $3 AND deleted_at IS NULL`,
          [tenantId, assetId, id],
        ),
      list: (tenantId, assetId) =>
        Effect.map(
          run<TextTrack>(
            tenantScope(tenantId),
            `SELECT ${TEXT_TRACK} FROM text_tracks
             WHERE tenant_id = $1 AND asset_id = $2 AND deleted_at IS NULL ORDER BY created_at, id`,
            [tenantId, assetId],
          ),
          (r) => r.rows,
        ),
      count: (tenantId, assetId) =>
        Effect.map(
          run<{ live: number }>(
            tenantScope(tenantId),
            `SELECT count(*)::int AS live FROM text_tracks
             WHERE tenant_id = $1 AND asset_id = $2 AND deleted_at IS NULL`,
            [tenantId, assetId],
          ),
          (r) => r.rows[0]?.live ?? 0,
        ),
      remove: (tenantId, assetId, id, at) =>
        changedOne(
          tenantScope(tenantId),
          `UPDATE text_tracks SET deleted_at = $4
           WHERE tenant_id = $1 AND asset_id = $2 AND id = $3 AND deleted_at IS NULL`,
          [tenantId, assetId, id, at],
        ),
    },
    webhooks: {
      insert: (w) =>
        write(tenantScope(w.tenant_id), `INSERT INTO webhooks (${WEBHOOK}) VALUES (${placeholders(8)})`, [
          w.id,
          w.tenant_id,
          w.url,
          w.events,
          w.description,
          w.secret,
          w.created_at,
          w.deleted_at,
        ]),
      get: byId<Webhook>("webhooks", WEBHOOK, " AND deleted_at IS NULL"),
      list: (tenantId, limit) =>
        Effect.map(
          run<Webhook>(
            tenantScope(tenantId),
            `SELECT ${WEBHOOK} FROM webhooks WHERE tenant_id = $1 AND deleted_at IS NULL
             ORDER BY created_at DESC, id DESC LIMIT $2`,
            [tenantId, limit],
          ),
          (r) => r.rows,
        ),
      count: (tenantId) =>
        Effect.map(
          run<{ live: number }>(
            tenantScope(tenantId),
            "SELECT count(*)::int AS live FROM webhooks WHERE tenant_id = $1 AND deleted_at IS NULL",
            [tenantId],
          ),
          (r) => r.rows[0]?.live ?? 0,
        ),
      listSubscribed: (tenantId, type) =>
        Effect.map(
          run<Webhook>(
            tenantScope(tenantId),
            `SELECT ${WEBHOOK} FROM webhooks WHERE tenant_id = $1 AND deleted_at IS NULL
             AND events && ARRAY['*', $2]::text[]`,
            [tenantId, type],
          ),
          (r) => r.rows,
        ),
      remove: (tenantId, id, at) =>
        Effect.map(
          run(
            tenantScope(tenantId),
            "UPDATE webhooks SET deleted_at = $3 WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL",
            [tenantId, id, at],
          ),
          (r) => r.rowCount === 1,
        ),
      removeAll: (tenantId, at) =>
        Effect.map(
          run(
            tenantScope(tenantId),
            "UPDATE webhooks SET deleted_at = $2 WHERE tenant_id = $1 AND deleted_at IS NULL",
            [tenantId, at],
          ),
          (r) => r.rowCount,
        ),
    },
    webhookDeliveries: {
      insert: (d) =>
        write(
          tenantScope(d.tenant_id),
          `INSERT INTO webhook_deliveries (${DELIVERY}) VALUES (${placeholders(11)})`,
          [
            d.id,
            d.tenant_id,
            d.webhook_id,
            d.event_id,
            d.event_type,
            d.payload,
            d.status,
            d.attempts,
            d.last_status_code,
            d.next_attempt_at,
            d.created_at,
          ],
        ),
      get: byId<WebhookDelivery>("webhook_deliveries", DELIVERY),
      listByWebhook: (tenantId, webhookId, limit) =>
        Effect.map(
          run<WebhookDelivery>(
            tenantScope(tenantId),
            `SELECT ${DELIVERY} FROM webhook_deliveries WHERE tenant_id = $1 AND webhook_id = $2
             ORDER BY created_at DESC, id DESC LIMIT $3`,
            [tenantId, webhookId, limit],
          ),
          (r) => r.rows,
        ),
      recordAttempt: (tenantId, id, attemptsBefore, a) =>
        Effect.map(
          run(
            tenantScope(tenantId),
            `UPDATE webhook_deliveries SET status = $4, attempts = $5, last_status_code = $6, next_attempt_at = $7
             WHERE tenant_id = $1 AND id = $2 AND status = 'pending' AND attempts = $3`,
            [tenantId, id, attemptsBefore, a.status, a.attempts, a.last_status_code, a.next_attempt_at],
          ),
          (r) => r.rowCount === 1,
        ),
    },
    jobs: {
      enqueue: (name, data, options) =>
        enqueue
          ? Effect.tryPromise({
              try: () => enqueue(inScope(sql, loginScope), name, data, options),
              catch: storageError,
            })
          : Effect.fail(new StorageError({ message: "no job queue is configured in this process" })),
    },
  };
};

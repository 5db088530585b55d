import { createHash } from "node:crypto";
import {
  type Asset,
  apiKeyStatus,
  Conflict,
  type IdempotencyClaim,
  normalizeEmail,
  type PlaybackSession,
  type Repositories,
  type Storage,
  subscribes,
  type Webhook,
} from "@vod/core";
import { Effect, Exit, Option } from "effect";
import { emptyState, type MemoryState, restore, snapshot } from "./state.js";

const byNewest = (a: { created_at: number; id: string }, b: { created_at: number; id: string }) =>
  b.created_at - a.created_at || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);

const isAfter = (row: { created_at: number; id: string }, key: { created_at: number; id: string }) =>
  row.created_at < key.created_at || (row.created_at === key.created_at && row.id < key.id);

const get = <V>(map: Map<string, V>, key: string) => Effect.sync(() => Option.fromNullable(map.get(key)));
const ofTenant =
  <V extends { tenant_id: string }>(tenantId: string) =>
  (o: Option.Option<V>) =>
    Option.filter(o, (v) => v.tenant_id === tenantId);

/** Deletes up to `limit` entries that expired at or before `before`; answers how many. */
const deleteExpiredOf = <V extends { expires_at: number }>(
  map: Map<string, V>,
  before: number,
  limit: number,
) => {
  let deleted = 0;
  for (const [key, value] of map) {
    if (deleted >= limit) break;
    if (value.expires_at <= before) {
      map.delete(key);
      deleted++;
    }
  }
  return deleted;
};

/** The map key of an Idempotency-Key record: JSON, so that no two owners' keys read alike. */
const idempotencyId = (tenantId: string, principal: string, key: string) =>
  JSON.stringify([tenantId, principal, key]);

/** The asset's tracks not removed, oldest first. */
const liveTracks = (s: MemoryState, tenantId: string, assetId: string) =>
  [...s.textTracks.values()]
    .filter((t) => t.tenant_id === tenantId && t.asset_id === assetId && t.deleted_at === null)
    .sort((a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));

/** Repositories straight over the state; `memoryStorage` adds locking and transactions. */
let jobCounter = 0;

/** A retired slug is kept as its SHA-256 only: the tombstone names no one. */
const slugHash = (slug: string) => createHash("sha256").update(slug).digest("hex");

/**
 * The maps a tenant's rows live in, besides `tenants`: every record map but the queue's jobs
 * (ids in a job's data, as in any queue) and the indexes, which are rebuilt after a purge. A map
 * added to the state is purged without a change here.
 */
const NOT_TENANT_ROWS: ReadonlySet<keyof MemoryState> = new Set([
  "tenants",
  "jobs",
  "retiredSlugs",
  "usersByEmail",
  "apiKeysByHash",
]);

/** Whether a record of any map belongs to the tenant: its tenant_id (tenantId for idempotency records). */
const ownedBy = (record: unknown, tenantId: string) =>
  typeof record === "object" &&
  record !== null &&
  ((record as { tenant_id?: unknown }).tenant_id === tenantId ||
    (record as { tenantId?: unknown }).tenantId === tenantId);

const purgeTenant = (s: MemoryState, tenantId: string) => {
  for (const [name, map] of Object.entries(s) as Array<[keyof MemoryState, Map<unknown, unknown>]>) {
    if (NOT_TENANT_ROWS.has(name)) continue;
    for (const [key, record] of map) if (ownedBy(record, tenantId)) map.delete(key);
  }
  for (const [email, userId] of s.usersByEmail) if (!s.users.has(userId)) s.usersByEmail.delete(email);
  for (const [hash, keyId] of s.apiKeysByHash) if (!s.apiKeys.has(keyId)) s.apiKeysByHash.delete(hash);
  s.tenants.delete(tenantId);
};

const repositoriesOver = (s: MemoryState): Repositories => ({
  tenants: {
    insert: (tenant) =>
      Effect.suspend(() => {
        const taken =
          s.retiredSlugs.has(slugHash(tenant.slug)) ||
          [...s.tenants.values()].some((t) => t.slug === tenant.slug);
        if (taken) return Effect.fail(new Conflict({ message: "the tenant slug is taken" }));
        s.tenants.set(tenant.id, tenant);
        return Effect.void;
      }),
    get: (id) => get(s.tenants, id),
    markDeleted: (id, _at) =>
      Effect.sync(() => {
        const tenant = s.tenants.get(id);
        if (tenant === undefined || tenant.status === "deleted") return false;
        s.tenants.set(id, { ...tenant, status: "deleted" });
        s.retiredSlugs.add(slugHash(tenant.slug));
        return true;
      }),
    purge: (id) => Effect.sync(() => purgeTenant(s, id)),
    setStatus: (id, status) =>
      Effect.sync(() => {
        const tenant = s.tenants.get(id);
        if (tenant) s.tenants.set(id, { ...tenant, status });
      }),
    // A transaction holds the storage's one lock throughout: nothing else runs meanwhile.
    lock: () => Effect.void,
  },
  users: {
    insert: (user) =>
      Effect.suspend(() => {
        const email = normalizeEmail(user.email);
        if (s.usersByEmail.has(email))
          return Effect.fail(new Conflict({ message: "an account with this email already exists" }));
        s.users.set(user.id, user);
        s.usersByEmail.set(email, user.id);
        return Effect.void;
      }),
    get: (tenantId, id) => Effect.map(get(s.users, id), ofTenant(tenantId)),
    findByEmail: (email) =>
      Effect.sync(() => {
        const id = s.usersByEmail.get(normalizeEmail(email));
        return Option.fromNullable(id === undefined ? undefined : s.users.get(id));
      }),
    setPasswordHash: (tenantId, id, passwordHash) =>
      Effect.sync(() => {
        const user = s.users.get(id);
        if (user?.tenant_id === tenantId) s.users.set(id, { ...user, password_hash: passwordHash });
      }),
    setEmailVerified: (tenantId, id, verified) =>
      Effect.sync(() => {
        const user = s.users.get(id);
        if (user?.tenant_id === tenantId) s.users.set(id, { ...user, email_verified: verified });
      }),
  },
  identities: {
    insert: (identity) =>
      Effect.suspend(() => {
        const key = `${identity.provider}:${identity.subject}`;
        if (s.identities.has(key))
          return Effect.fail(new Conflict({ message: "this identity is linked to another account" }));
        s.identities.set(key, identity);
        return Effect.void;
      }),
    find: (provider, subject) => get(s.identities, `${provider}:${subject}`),
  },
  refreshSessions: {
    insertSession: (session) => Effect.sync(() => void s.refreshSessions.set(session.id, session)),
    getSession: (tenantId, id) => Effect.map(get(s.refreshSessions, id), ofTenant(tenantId)),
    revokeSession: (tenantId, id, at, reason) =>
      Effect.sync(() => {
        const session = s.refreshSessions.get(id);
        if (session?.tenant_id === tenantId && session.revoked_at === null)
          s.refreshSessions.set(id, { ...session, revoked_at: at, revoked_reason: reason });
      }),
    revokeUserSessions: (tenantId, userId, exceptSessionId, at, reason) =>
      Effect.sync(() => {
        for (const session of s.refreshSessions.values())
          if (
            session.tenant_id === tenantId &&
            session.user_id === userId &&
            session.id !== exceptSessionId &&
            session.revoked_at === null
          )
            s.refreshSessions.set(session.id, { ...session, revoked_at: at, revoked_reason: reason });
      }),
    insertToken: (token) => Effect.sync(() => void s.refreshTokens.set(token.token_hash, token)),
    findToken: (hash) => get(s.refreshTokens, hash),
    markTokenUsed: (hash, at) =>
      Effect.sync(() => {
        const token = s.refreshTokens.get(hash);
        if (!token || token.used_at !== null) return false;
        s.refreshTokens.set(hash, { ...token, used_at: at });
        return true;
      }),
    deleteTokensExpired: (before, limit) =>
      Effect.sync(() => deleteExpiredOf(s.refreshTokens, before, limit)),
  },
  emailTokens: {
    insert: (token) => Effect.sync(() => void s.emailTokens.set(token.token_hash, token)),
    use: (hash, purpose, at) =>
      Effect.sync(() => {
        const token = s.emailTokens.get(hash);
        if (!token || token.purpose !== purpose || token.used_at !== null || token.expires_at <= at)
          return Option.none();
        s.emailTokens.set(hash, { ...token, used_at: at });
        return Option.some(token);
      }),
    useAllOfUser: (tenantId, userId, purpose, at) =>
      Effect.sync(() => {
        for (const token of s.emailTokens.values())
          if (
            token.tenant_id === tenantId &&
            token.user_id === userId &&
            token.purpose === purpose &&
            token.used_at === null
          )
            s.emailTokens.set(token.token_hash, { ...token, used_at: at });
      }),
    deleteExpired: (before, limit) => Effect.sync(() => deleteExpiredOf(s.emailTokens, before, limit)),
  },
  apiKeys: {
    insert: (key) =>
      Effect.sync(() => {
        s.apiKeys.set(key.id, key);
        s.apiKeysByHash.set(key.key_hash, key.id);
      }),
    get: (tenantId, id) => Effect.map(get(s.apiKeys, id), ofTenant(tenantId)),
    findByHash: (hash) =>
      Effect.sync(() => {
        const id = s.apiKeysByHash.get(hash);
        return Option.fromNullable(id === undefined ? undefined : s.apiKeys.get(id));
      }),
    list: (tenantId, limit, filter) =>
      Effect.sync(() =>
        [...s.apiKeys.values()]
          .filter(
            (k) =>
              k.tenant_id === tenantId &&
              (filter?.status === undefined || apiKeyStatus(k, filter.now) === filter.status),
          )
          .sort(byNewest)
          .slice(0, limit),
      ),
    countActive: (tenantId, now) =>
      Effect.sync(() => {
        let active = 0;
        for (const k of s.apiKeys.values())
          if (k.tenant_id === tenantId && apiKeyStatus(k, now) === "active") active++;
        return active;
      }),
    revoke: (tenantId, id, at) =>
      Effect.sync(() => {
        const key = s.apiKeys.get(id);
        if (key?.tenant_id === tenantId && key.revoked_at === null)
          s.apiKeys.set(id, { ...key, revoked_at: at });
      }),
    revokeAll: (tenantId, at) =>
      Effect.sync(() => {
        let revoked = 0;
        for (const key of s.apiKeys.values())
          if (key.tenant_id === tenantId && key.revoked_at === null) {
            s.apiKeys.set(key.id, { ...key, revoked_at: at });
            revoked += 1;
          }
        return revoked;
      }),
    touch: (tenantId, id, at) =>
      Effect.sync(() => {
        const key = s.apiKeys.get(id);
        if (key?.tenant_id === tenantId) s.apiKeys.set(id, { ...key, last_used_at: at });
      }),
  },
  assets: {
    insert: (asset) => Effect.sync(() => void s.assets.set(asset.id, asset)),
    get: (tenantId, id) => Effect.map(get(s.assets, id), ofTenant(tenantId)),
    list: (tenantId, { status, limit, after }) =>
      Effect.sync(() => {
        const rows: Asset[] = [];
        for (const a of s.assets.values())
          if (
            a.tenant_id === tenantId &&
            (status === undefined || a.status === status) &&
            (!after || isAfter(a, after))
          )
            rows.push(a);
        return rows.sort(byNewest).slice(0, limit);
      }),
    update: (asset) =>
      Effect.sync(() => {
        const stored = s.assets.get(asset.id);
        if (stored?.tenant_id === asset.tenant_id) {
          const { title, visibility, published_at, mp4_support, static_renditions } = stored;
          s.assets.set(asset.id, {
            ...asset,
            title,
            visibility,
            published_at,
            mp4_support,
            static_renditions,
          });
        }
      }),
    updateDetails: (tenantId, id, details) =>
      Effect.sync(() => {
        const stored = s.assets.get(id);
        if (stored?.tenant_id !== tenantId) return Option.none();
        const updated = { ...stored, ...details };
        s.assets.set(id, updated);
        return Option.some(updated);
      }),
    // Gone from the map: nothing else refers to an asset by reference here.
    remove: (tenantId, id) =>
      Effect.sync(() => s.assets.get(id)?.tenant_id === tenantId && s.assets.delete(id)),
  },
  uploads: {
    insert: (session) =>
      Effect.suspend(() => {
        for (const other of s.uploads.values())
          if (other.asset_id === session.asset_id && other.status === "created")
            return Effect.fail(new Conflict({ message: "an upload is already in progress for this asset" }));
        s.uploads.set(session.id, session);
        return Effect.void;
      }),
    get: (tenantId, id) => Effect.map(get(s.uploads, id), ofTenant(tenantId)),
    findOpen: (tenantId, assetId) =>
      Effect.sync(() =>
        Option.fromNullable(
          [...s.uploads.values()].find(
            (u) => u.tenant_id === tenantId && u.asset_id === assetId && u.status === "created",
          ),
        ),
      ),
    close: (tenantId, id, status) =>
      Effect.sync(() => {
        const session = s.uploads.get(id);
        if (session?.tenant_id !== tenantId || session.status !== "created") return false;
        s.uploads.set(id, { ...session, status });
        return true;
      }),
    complete: (tenantId, id, at, parts) =>
      Effect.sync(() => {
        const session = s.uploads.get(id);
        if (session?.tenant_id !== tenantId || session.status !== "created") return false;
        s.uploads.set(id, { ...session, status: "completed", completed_at: at, completed_parts: parts });
        return true;
      }),
    listOpen: (tenantId, limit) =>
      Effect.sync(() =>
        [...s.uploads.values()]
          .filter((u) => u.tenant_id === tenantId && u.status === "created")
          .slice(0, limit),
      ),
    listExpired: (now, limit) =>
      Effect.sync(() =>
        [...s.uploads.values()]
          .filter((u) => u.status === "created" && u.expires_at <= now)
          .sort((a, b) => a.expires_at - b.expires_at)
          .slice(0, limit),
      ),
  },
  playbackSessions: {
    insert: (session) => Effect.sync(() => void s.playbackSessions.set(session.id, session)),
    get: (tenantId, id) => Effect.map(get(s.playbackSessions, id), ofTenant(tenantId)),
    end: (tenantId, id, at) =>
      Effect.sync(() => {
        const session = s.playbackSessions.get(id);
        if (session?.tenant_id === tenantId && session.ended_at === null)
          s.playbackSessions.set(id, { ...session, ended_at: at });
      }),
    endForAsset: (tenantId, assetId, at, expiringAfter) =>
      Effect.sync(() => {
        const live: PlaybackSession[] = [];
        for (const session of s.playbackSessions.values()) {
          if (session.tenant_id !== tenantId || session.asset_id !== assetId) continue;
          const ended = session.ended_at === null ? { ...session, ended_at: at } : session;
          if (ended !== session) s.playbackSessions.set(session.id, ended);
          if (ended.expires_at > expiringAfter) live.push(ended);
        }
        return live;
      }),
  },
  idempotencyKeys: {
    claim: (tenantId, principal, key, fingerprint, { now, lockedUntil, expiresAt }) =>
      Effect.sync((): IdempotencyClaim => {
        const id = idempotencyId(tenantId, principal, key);
        const held = s.idempotencyKeys.get(id);
        if (held && held.expiresAt > now && (held.response !== null || held.lockedUntil > now))
          return held.response === null
            ? { _tag: "Running", fingerprint: held.fingerprint }
            : { _tag: "Done", fingerprint: held.fingerprint, response: held.response };
        s.idempotencyKeys.set(id, {
          tenantId,
          principal,
          key,
          fingerprint,
          response: null,
          lockedUntil,
          expiresAt,
        });
        return { _tag: "Claimed" };
      }),
    complete: (tenantId, principal, key, fingerprint, response) =>
      Effect.sync(() => {
        const id = idempotencyId(tenantId, principal, key);
        const held = s.idempotencyKeys.get(id);
        if (held?.fingerprint === fingerprint && held.response === null)
          s.idempotencyKeys.set(id, { ...held, response });
      }),
    release: (tenantId, principal, key, fingerprint) =>
      Effect.sync(() => {
        const id = idempotencyId(tenantId, principal, key);
        const held = s.idempotencyKeys.get(id);
        if (held?.fingerprint === fingerprint && held.response === null) s.idempotencyKeys.delete(id);
      }),
    deleteExpired: (now, limit) =>
      Effect.sync(() => {
        let deleted = 0;
        for (const [id, record] of s.idempotencyKeys) {
          if (deleted >= limit) break;
          if (record.expiresAt <= now && s.idempotencyKeys.delete(id)) deleted++;
        }
        return deleted;
      }),
  },
  chunks: {
    insertAll: (chunks) =>
      Effect.sync(() => {
        const [any] = chunks;
        if (any === undefined) return false;
        const recorded = [...s.chunks.values()].some(
          (c) => c.tenant_id === any.tenant_id && c.asset_id === any.asset_id,
        );
        if (recorded) return false;
        for (const c of chunks)
          s.chunks.set(JSON.stringify([c.tenant_id, c.asset_id, c.unit, c.chunk_index]), c);
        return true;
      }),
    list: (tenantId, assetId) =>
      Effect.sync(() =>
        [...s.chunks.values()]
          .filter((c) => c.tenant_id === tenantId && c.asset_id === assetId)
          .sort((a, b) => a.unit.localeCompare(b.unit) || a.chunk_index - b.chunk_index),
      ),
    // A transaction holds the storage's one lock throughout, so racing calls take turns.
    markDone: (tenantId, assetId, unit, index, at) =>
      Effect.sync(() => {
        const id = JSON.stringify([tenantId, assetId, unit, index]);
        const chunk = s.chunks.get(id);
        const marked = chunk !== undefined && chunk.done_at === null;
        if (marked) s.chunks.set(id, { ...chunk, done_at: at });
        let left = 0;
        for (const c of s.chunks.values())
          if (c.tenant_id === tenantId && c.asset_id === assetId && c.unit === unit && c.done_at === null)
            left++;
        return { marked, left };
      }),
  },
  textTracks: {
    insert: (track) => Effect.sync(() => void s.textTracks.set(track.id, track)),
    get: (tenantId, assetId, id) =>
      Effect.sync(() =>
        Option.fromNullable(s.textTracks.get(id)).pipe(
          Option.filter((t) => t.tenant_id === tenantId && t.asset_id === assetId && t.deleted_at === null),
        ),
      ),
    list: (tenantId, assetId) => Effect.sync(() => liveTracks(s, tenantId, assetId)),
    count: (tenantId, assetId) => Effect.sync(() => liveTracks(s, tenantId, assetId).length),
    remove: (tenantId, assetId, id, at) =>
      Effect.sync(() => {
        const track = s.textTracks.get(id);
        if (!track || track.tenant_id !== tenantId || track.asset_id !== assetId || track.deleted_at !== null)
          return false;
        s.textTracks.set(id, { ...track, deleted_at: at });
        return true;
      }),
  },
  contentKeys: {
    insertIfAbsent: (key) =>
      Effect.sync(() => {
        const id = `${key.tenant_id}/${key.asset_id}`;
        const existing = s.contentKeys.get(id);
        if (existing) return existing;
        s.contentKeys.set(id, key);
        return key;
      }),
    get: (tenantId, assetId) => get(s.contentKeys, `${tenantId}/${assetId}`),
  },
  webhooks: {
    insert: (webhook) => Effect.sync(() => void s.webhooks.set(webhook.id, webhook)),
    get: (tenantId, id) =>
      Effect.map(get(s.webhooks, id), (o) =>
        Option.filter(ofTenant<Webhook>(tenantId)(o), (w) => w.deleted_at === null),
      ),
    list: (tenantId, limit) =>
      Effect.sync(() =>
        [...s.webhooks.values()]
          .filter((w) => w.tenant_id === tenantId && w.deleted_at === null)
          .sort(byNewest)
          .slice(0, limit),
      ),
    count: (tenantId) =>
      Effect.sync(() => {
        let live = 0;
        for (const w of s.webhooks.values()) if (w.tenant_id === tenantId && w.deleted_at === null) live++;
        return live;
      }),
    listSubscribed: (tenantId, type) =>
      Effect.sync(() =>
        [...s.webhooks.values()].filter(
          (w) => w.tenant_id === tenantId && w.deleted_at === null && subscribes(w, type),
        ),
      ),
    remove: (tenantId, id, at) =>
      Effect.sync(() => {
        const webhook = s.webhooks.get(id);
        if (webhook?.tenant_id !== tenantId || webhook.deleted_at !== null) return false;
        s.webhooks.set(id, { ...webhook, deleted_at: at });
        return true;
      }),
    removeAll: (tenantId, at) =>
      Effect.sync(() => {
        let removed = 0;
        for (const webhook of s.webhooks.values())
          if (webhook.tenant_id === tenantId && webhook.deleted_at === null) {
            s.webhooks.set(webhook.id, { ...webhook, deleted_at: at });
            removed += 1;
          }
        return removed;
      }),
  },
  webhookDeliveries: {
    insert: (delivery) => Effect.sync(() => void s.webhookDeliveries.set(delivery.id, delivery)),
    get: (tenantId, id) => Effect.map(get(s.webhookDeliveries, id), ofTenant(tenantId)),
    listByWebhook: (tenantId, webhookId, limit) =>
      Effect.sync(() =>
        [...s.webhookDeliveries.values()]
          .filter((d) => d.tenant_id === tenantId && d.webhook_id === webhookId)
          .sort(byNewest)
          .slice(0, limit),
      ),
    recordAttempt: (tenantId, id, attemptsBefore, attempt) =>
      Effect.sync(() => {
        const delivery = s.webhookDeliveries.get(id);
        if (
          delivery?.tenant_id !== tenantId ||
          delivery.status !== "pending" ||
          delivery.attempts !== attemptsBefore
        )
          return false;
        s.webhookDeliveries.set(id, { ...delivery, ...attempt });
        return true;
      }),
  },
  jobs: {
    enqueue: (name, data, options) =>
      Effect.sync(() => {
        const id = `job_${++jobCounter}_${Date.now().toString(36)}`;
        s.jobs.set(id, {
          id,
          name,
          data,
          state: "queued",
          attempts: 0,
          runAfter: options?.delayMs ? Date.now() + options.delayMs : 0,
          priority: options?.priority ?? 0,
          leaseUntil: 0,
          lastError: null,
        });
      }),
  },
});

type AnyFn = (...args: never[]) => Effect.Effect<unknown, unknown>;

/** Wraps every repository method so it runs under `lock`. */
const locked = (repos: Repositories, lock: Effect.Semaphore): Repositories =>
  Object.fromEntries(
    Object.entries(repos).map(([name, repo]) => [
      name,
      Object.fromEntries(
        Object.entries(repo as Record<string, AnyFn>).map(([method, fn]) => [
          method,
          (...args: never[]) => lock.withPermits(1)(fn(...args)),
        ]),
      ),
    ]),
  ) as unknown as Repositories;

/**
 * The key of a storage's records: its job queue runs the jobs they hold, and the test-only backdoor
 * reads them. Not exported from the package root, so production code reaches them only by the ports.
 */
export const memoryState: unique symbol = Symbol("memoryState");

export interface MemoryStorage extends Storage {
  readonly [memoryState]: MemoryState;
}

/**
 * Storage in process memory. Calls are serialized by one lock, and a transaction holds it
 * throughout, so transactions are serializable; a failed one is rolled back from a snapshot.
 */
export const memoryStorage = (state: MemoryState = emptyState()): MemoryStorage => {
  const lock = Effect.unsafeMakeSemaphore(1);
  const raw = repositoriesOver(state);
  return {
    [memoryState]: state,
    ...locked(raw, lock),
    transaction: (work) =>
      lock.withPermits(1)(
        Effect.suspend(() => {
          const before = snapshot(state);
          return Effect.onExit(work(raw), (exit) =>
            Effect.sync(() => Exit.isFailure(exit) && restore(state, before)),
          );
        }),
      ),
  };
};

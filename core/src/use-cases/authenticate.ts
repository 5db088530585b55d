import { Effect, Option } from "effect";
import { type ApiKey, apiKeyStatus, KEY_TAG, shouldTouch } from "../domain/api-key.js";
import { TenantId } from "../domain/ids.js";
import { includesScope, type Role, type Scope, scopeOfRole } from "../domain/scope.js";
import type { Tenant } from "../domain/tenant.js";
import { publicUser, type User } from "../domain/user.js";
import { Forbidden, type StorageError, Unauthorized } from "../errors.js";
import type { Revocation } from "../ports/revocation-store.js";
import type { VodPorts } from "../tokens.js";
import { localRevocationFeed } from "./revocations.js";
import { constantTimeEqual, sha256Hex } from "./support.js";

export type Principal =
  | {
      readonly kind: "user";
      readonly tenant: Tenant;
      readonly user: User;
      readonly role: Role;
      readonly scope: Scope;
      /** The refresh session (token family) the access token belongs to. */
      readonly sessionId: string;
    }
  | { readonly kind: "api_key"; readonly tenant: Tenant; readonly keyId: string; readonly scope: Scope };

export type PrincipalKind = Principal["kind"];

/** The credentials of a request, as the client sent them. */
export interface Credentials {
  /** The token after `Bearer ` in the Authorization header. */
  readonly bearer?: string | undefined;
  /** The X-API-Key header. */
  readonly apiKey?: string | undefined;
}

/** What the operation asks of its caller. */
export interface Requirement {
  readonly scope: Scope;
  /** Which kinds of credential may call it; both when absent. */
  readonly kinds?: ReadonlyArray<PrincipalKind>;
}

const unauthorized = (message: string) => new Unauthorized({ message });

/** The access token claims the core signs and reads. */
export interface AccessClaims {
  readonly sub: string;
  readonly tid: string;
  readonly sid: string;
}

/**
 * How long a node reuses what a credential resolved to (key, session, user, tenant) without
 * asking the database again. A revocation, logout or suspension is told to every node at once
 * (the revocation feed); this bound is what heals a node that missed the message.
 */
export const CREDENTIAL_CACHE_MS = 60_000;
/** Principals a node keeps at most; the oldest goes first. */
const CREDENTIAL_CACHE_ENTRIES = 10_000;

/** Sets `key` as the newest entry of `map`, dropping the oldest past the cap (insertion order). */
const putBounded = <K, V>(map: Map<K, V>, key: K, value: V) => {
  map.delete(key);
  map.set(key, value);
  if (map.size > CREDENTIAL_CACHE_ENTRIES) {
    const oldest = map.keys().next();
    if (!oldest.done) map.delete(oldest.value);
  }
};

interface Cached {
  readonly principal: Principal;
  readonly at: number;
  /** For a key: its record, whose expiry and last use are checked on every request. */
  apiKey?: ApiKey;
  /** For an access token: when it expires (epoch ms), checked on every request. */
  readonly expiresAt?: number;
}

const concerns = (principal: Principal, revocation: Revocation): boolean => {
  switch (revocation.kind) {
    case "tenant":
      return principal.tenant.id === revocation.id;
    case "api_key":
      return principal.kind === "api_key" && principal.keyId === revocation.id;
    case "refresh_session":
      return principal.kind === "user" && principal.sessionId === revocation.id;
    case "user":
      return principal.kind === "user" && principal.user.id === revocation.id;
    default:
      return false;
  }
};

/** Whether a tenant may be served: active, suspended, or gone (deleted, or never there). */
export type TenantStanding = "active" | "suspended" | "gone";
const STANDINGS = {
  active: Effect.succeed("active"),
  suspended: Effect.succeed("suspended"),
  gone: Effect.succeed("gone"),
} as const satisfies Record<TenantStanding, Effect.Effect<TenantStanding>>;

/**
 * Who is calling, resolved once per credential and node and then served from memory, and
 * `forget`, which every change that could refuse a cached credential goes through: it drops the
 * entries here at once and tells every other node through the revocation feed. The database
 * stays the truth: an entry lives at most `maxAgeMs`, so a message lost on the feed heals.
 */
export const makeCredentials = (
  {
    clock,
    storage,
    tokenSigner,
    revocationFeed,
  }: Pick<VodPorts, "clock" | "storage" | "tokenSigner" | "revocationFeed">,
  maxAgeMs = CREDENTIAL_CACHE_MS,
) => {
  const feed = revocationFeed ?? localRevocationFeed();
  const cache = new Map<string, Cached>();
  // Bumped by every revocation heard: a look-up that started before one does not cache its answer,
  // which the database may have given before the revocation committed.
  let generation = 0;

  // Whether each tenant is active, for what a tenant's playback tokens and part URLs do: they
  // carry the tenant's id, not a principal, and are checked on every segment and part.
  const tenantStatuses = new Map<string, { readonly standing: TenantStanding; readonly at: number }>();

  const drop = (revocation: Revocation) => {
    if (revocation.kind === "playback_session") return;
    generation += 1;
    if (revocation.kind === "tenant") tenantStatuses.delete(revocation.id);
    for (const [key, entry] of cache) if (concerns(entry.principal, revocation)) cache.delete(key);
  };
  feed.watch(drop);

  const fresh = (key: string, now: number): Cached | undefined => {
    const entry = cache.get(key);
    if (entry === undefined) return undefined;
    if (now - entry.at < maxAgeMs && now >= entry.at) return entry;
    cache.delete(key);
    return undefined;
  };
  const remember = (key: string, entry: Cached, since: number) => {
    if (since === generation) putBounded(cache, key, entry);
  };

  /** Drops what this node cached of the revocation's subject, then tells every node. */
  const forget = (revocation: Revocation): Effect.Effect<void> =>
    Effect.zipRight(
      Effect.sync(() => drop(revocation)),
      feed.publish(revocation),
    );

  const activeTenant = (tenantId: TenantId): Effect.Effect<Tenant, Unauthorized | Forbidden | StorageError> =>
    Effect.flatMap(
      storage.tenants.get(tenantId),
      (tenant): Effect.Effect<Tenant, Unauthorized | Forbidden> =>
        Option.isNone(tenant) || tenant.value.status === "deleted"
          ? Effect.fail(unauthorized("credential is no longer valid"))
          : tenant.value.status === "suspended"
            ? Effect.fail(new Forbidden({ message: "tenant is suspended" }))
            : Effect.succeed(tenant.value),
    );

  /**
   * Whether the tenant may be served (active), is suspended, or is gone (deleted, or not there):
   * what the playback token check and the part upload URLs ask on every request, so answered
   * from memory for at most `maxAgeMs` and dropped at once when the feed tells of a change to
   * the tenant.
   */
  const tenantIsActive = (tenantId: TenantId): Effect.Effect<TenantStanding, StorageError> => {
    const now = clock.now();
    const cached = tenantStatuses.get(tenantId);
    if (cached !== undefined && now - cached.at < maxAgeMs && now >= cached.at)
      return STANDINGS[cached.standing];
    const since = generation;
    return Effect.map(storage.tenants.get(tenantId), (tenant) => {
      const standing: TenantStanding =
        Option.isNone(tenant) || tenant.value.status === "deleted"
          ? "gone"
          : tenant.value.status === "active"
            ? "active"
            : "suspended";
      if (since === generation) putBounded(tenantStatuses, tenantId, { standing, at: now });
      return standing;
    });
  };

  /** last_used_at at most once a minute per key and node; the cached record remembers it. */
  const touched = (entry: Cached, apiKey: ApiKey, now: number) =>
    shouldTouch(apiKey, now)
      ? Effect.tap(storage.apiKeys.touch(apiKey.tenant_id, apiKey.id, now), () =>
          Effect.sync(() => {
            entry.apiKey = { ...apiKey, last_used_at: now };
          }),
        )
      : Effect.void;

  const byApiKey = (key: string): Effect.Effect<Principal, Unauthorized | Forbidden | StorageError> =>
    Effect.suspend(() => {
      const hash = sha256Hex(key);
      const now = clock.now();
      const cacheKey = `k:${hash}`;
      const cached = fresh(cacheKey, now);
      if (cached?.apiKey !== undefined) {
        const status = apiKeyStatus(cached.apiKey, now);
        if (status !== "active") return Effect.fail(unauthorized(`API key is ${status}`));
        return Effect.as(touched(cached, cached.apiKey, now), cached.principal);
      }
      const since = generation;
      return Effect.gen(function* () {
        const found = yield* storage.apiKeys.findByHash(hash);
        if (Option.isNone(found) || !constantTimeEqual(found.value.key_hash, hash))
          return yield* Effect.fail(unauthorized("invalid API key"));
        const apiKey = found.value;
        const status = apiKeyStatus(apiKey, now);
        if (status !== "active") return yield* Effect.fail(unauthorized(`API key is ${status}`));
        const tenant = yield* activeTenant(apiKey.tenant_id);
        const principal: Principal = {
          kind: "api_key",
          tenant,
          keyId: apiKey.id,
          scope: apiKey.scopes[0] ?? "read",
        };
        const entry: Cached = { principal, at: now, apiKey };
        remember(cacheKey, entry, since);
        yield* touched(entry, apiKey, now);
        return principal;
      });
    });

  const byBearer = (token: string): Effect.Effect<Principal, Unauthorized | Forbidden | StorageError> =>
    Effect.suspend(() => {
      const now = clock.now();
      // Keyed by the token itself: its signature, issuer and audience were checked when it was
      // cached and cannot change; its expiry is checked on every request.
      // An API key is never an access token; whoever sends one here meant the other header.
      if (token.startsWith(`${KEY_TAG}_`))
        return Effect.fail(
          unauthorized("invalid access token: this is an API key, which goes in the X-API-Key header"),
        );
      const cacheKey = `a:${token}`;
      const cached = fresh(cacheKey, now);
      if (cached?.expiresAt !== undefined && now < cached.expiresAt) return Effect.succeed(cached.principal);
      const since = generation;
      return Effect.gen(function* () {
        const verified = yield* Effect.mapError(tokenSigner.verify("access", token, { now }), (rejected) =>
          unauthorized(rejected.reason === "expired" ? "access token expired" : "invalid access token"),
        );
        const { sub, sid } = verified.claims;
        if (typeof sub !== "string" || typeof verified.claims.tid !== "string" || typeof sid !== "string")
          return yield* Effect.fail(unauthorized("invalid access token"));
        // A claim of a token this platform signed: the tenant it was issued in.
        const tid = TenantId(verified.claims.tid);
        const session = yield* storage.refreshSessions.getSession(tid, sid);
        if (Option.isNone(session) || session.value.revoked_at !== null)
          return yield* Effect.fail(unauthorized("session has ended"));
        const user = yield* storage.users.get(tid, sub);
        if (Option.isNone(user)) return yield* Effect.fail(unauthorized("credential is no longer valid"));
        const tenant = yield* activeTenant(tid);
        const role = user.value.role;
        const principal: Principal = {
          kind: "user",
          tenant,
          user: publicUser(user.value),
          role,
          scope: scopeOfRole(role),
          sessionId: sid,
        };
        remember(cacheKey, { principal, at: now, expiresAt: verified.exp * 1000 }, since);
        return principal;
      });
    });

  /** Who is calling. An API key wins when both credentials are sent. */
  const authenticate = (credentials: Credentials) =>
    credentials.apiKey !== undefined
      ? byApiKey(credentials.apiKey)
      : credentials.bearer !== undefined
        ? byBearer(credentials.bearer)
        : Effect.fail(unauthorized("missing credentials: send Authorization: Bearer <token> or X-API-Key"));

  return { authenticate, forget, tenantIsActive };
};

/** Whether a tenant may be served: see `makeCredentials`. */
export type TenantIsActive = ReturnType<typeof makeCredentials>["tenantIsActive"];

/** What a suspended tenant's playback token, licence token or part URL is answered. */
export const tenantSuspended = () => new Forbidden({ message: "tenant is suspended" });

/**
 * Refuses what a tenant that is not active signed (a playback token, a licence token, a part
 * URL): a suspended tenant's with `suspended`, a deleted tenant's as a revoked credential (401).
 */
export const refuseUnlessActive = (
  standing: TenantStanding,
  suspended: () => Forbidden | Unauthorized = tenantSuspended,
): Effect.Effect<void, Forbidden | Unauthorized> =>
  standing === "active"
    ? Effect.void
    : Effect.fail(
        standing === "gone" ? new Unauthorized({ message: "tenant has been deleted" }) : suspended(),
      );

/** What use cases that end or change a credential call to have every node drop it. */
export type Forget = ReturnType<typeof makeCredentials>["forget"];

/** Why the principal may not call what needs `requirement`: not of an allowed kind, or short of the scope. */
export const refusal = (principal: Principal, requirement: Requirement): Forbidden | undefined => {
  if (requirement.kinds !== undefined && !requirement.kinds.includes(principal.kind))
    return new Forbidden({ message: `this operation needs a ${requirement.kinds.join(" or ")} credential` });
  if (!includesScope(principal.scope, requirement.scope))
    return new Forbidden({ message: `this operation needs the ${requirement.scope} scope` });
  return undefined;
};

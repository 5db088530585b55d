import { Data, Effect, Option } from "effect";
import type { VodConfig } from "../config.js";
import type { TenantId } from "../domain/ids.js";
import { type RevokedReason, refreshTokenState } from "../domain/refresh-session.js";
import { defaultTenantName, slugify, type Tenant } from "../domain/tenant.js";
import { publicUser, type User, type UserRecord } from "../domain/user.js";
import {
  Conflict,
  Forbidden,
  InvalidRequest,
  type NotFound,
  type StorageError,
  Unauthorized,
} from "../errors.js";
import type { VerifiedIdentity } from "../ports/identity-verifier.js";
import type { Repositories } from "../ports/repositories.js";
import type { Requests, Resources } from "../schema/index.js";
import type { VodPorts } from "../tokens.js";
import type { AccessClaims, Forget, Principal } from "./authenticate.js";
import { proveEmail } from "./email-proof.js";
import { makeFailedLogins } from "./failed-logins.js";
import { limitAuthByIp as limitByIp, randomBase36, randomBase62, sha256Hex } from "./support.js";

type SignupInput = typeof Requests.SignupBody.Type;
type LoginInput = typeof Requests.LoginBody.Type;
type PasswordChangeInput = typeof Requests.PasswordChangeBody.Type;
type DeleteTenantInput = typeof Requests.DeleteTenantBody.Type;

/** The slug drawn for a new tenant is taken, or was a deleted tenant's: another is drawn. */
class SlugTaken extends Data.TaggedError("SlugTaken") {}
const SLUG_DRAWS = 3;

export interface SignedIn extends Resources.Tokens {
  readonly user: User;
}

/** How long after a sign-in its access tokens may delete the tenant without a password. */
export const FRESH_SIGN_IN_MS = 5 * 60 * 1000;

/**
 * How long an expired refresh token is kept: within it a client presenting it is told
 * "refresh token expired" (and knows to sign in again) rather than "invalid refresh token".
 * An expired email link answers as an unknown one, so those go at expiry.
 */
export const EXPIRED_REFRESH_TOKEN_KEPT_MS = 7 * 24 * 60 * 60 * 1000;

/** Rows per delete of the token sweep, so that no one statement holds locks for long. */
const SWEEP_CHUNK = 1_000;

export const makeAccounts = (
  ports: VodPorts,
  config: VodConfig,
  forget: Forget,
  removeTenant: (tenantId: TenantId) => Effect.Effect<unknown, NotFound | StorageError>,
) => {
  const { clock, ids, storage, passwordHasher, tokenSigner, identityVerifier } = ports;
  const failedLogins = makeFailedLogins(ports, config);

  // Login answers "no such user" after as much hashing work as "wrong password" would cost.
  const dummyHash = Effect.runSync(Effect.cached(passwordHasher.hash("not-a-real-password-0000")));

  const newTenant = (name: string, now: number): Tenant => ({
    id: ids.id("tenant"),
    slug: `${slugify(name)}-${randomBase36(ids, 6)}`,
    name,
    plan: "free",
    status: "active",
    created_at: now,
  });

  /** Opens a new refresh session (token family) with its first pair. */
  const openSession = (tx: Repositories, user: User, now: number) =>
    Effect.gen(function* () {
      const sessionId = ids.id("session");
      yield* tx.refreshSessions.insertSession({
        id: sessionId,
        tenant_id: user.tenant_id,
        user_id: user.id,
        created_at: now,
        revoked_at: null,
        revoked_reason: null,
      });
      return yield* issuePair(tx, user, sessionId, now);
    });

  /** Revokes a refresh session and drops what credential caches hold of it, so its tokens stop at once. */
  const revokeSession = (
    session: { readonly tenant_id: TenantId; readonly session_id: string },
    now: number,
    reason: RevokedReason,
  ) =>
    Effect.gen(function* () {
      yield* storage.refreshSessions.revokeSession(session.tenant_id, session.session_id, now, reason);
      yield* forget({ kind: "refresh_session", id: session.session_id });
    });

  /** A new access token and refresh token in an existing session. */
  const issuePair = (tx: Repositories, user: User, sessionId: string, now: number) =>
    Effect.gen(function* () {
      const refreshToken = `vrt_${randomBase62(ids, 43)}`;
      yield* tx.refreshSessions.insertToken({
        token_hash: sha256Hex(refreshToken),
        session_id: sessionId,
        tenant_id: user.tenant_id,
        user_id: user.id,
        created_at: now,
        expires_at: now + config.refreshTokenTtlMs,
        used_at: null,
      });
      const claims: AccessClaims & Record<string, string> = {
        sub: user.id,
        tid: user.tenant_id,
        sid: sessionId,
      };
      const accessToken = yield* tokenSigner.sign("access", claims, {
        issuedAt: now,
        expiresAt: now + config.accessTokenTtlSeconds * 1000,
      });
      return {
        access_token: accessToken,
        refresh_token: refreshToken,
        token_type: "bearer" as const,
        expires_in: config.accessTokenTtlSeconds,
      };
    });

  const limitAuthByIp = (clientIp: string) => limitByIp(ports, config, clientIp);

  const requireActiveTenant = (tenantId: TenantId) =>
    Effect.flatMap(
      storage.tenants.get(tenantId),
      (tenant): Effect.Effect<Tenant, Unauthorized | Forbidden> =>
        Option.isSome(tenant) && tenant.value.status === "active"
          ? Effect.succeed(tenant.value)
          : Option.isNone(tenant) || tenant.value.status === "deleted"
            ? Effect.fail(new Unauthorized({ message: "account no longer exists" }))
            : Effect.fail(new Forbidden({ message: "tenant is suspended" })),
    );

  /** A new tenant with its owner, and a first session: one transaction. */
  const createAccount = (input: {
    email: string;
    emailVerified: boolean;
    passwordHash: string | null;
    name: string | null;
    tenantName: string;
    identity?: VerifiedIdentity;
  }) =>
    Effect.retry(
      Effect.suspend(() => createAccountOnce(input)),
      { while: (e) => e._tag === "SlugTaken", times: SLUG_DRAWS - 1 },
    ).pipe(
      Effect.catchTag("SlugTaken", () =>
        Effect.fail(new Conflict({ message: "no free tenant slug was found; try again" })),
      ),
    );

  const createAccountOnce = (input: Parameters<typeof createAccount>[0]) =>
    Effect.gen(function* () {
      const now = clock.now();
      const tenant = newTenant(input.tenantName, now);
      const user: UserRecord = {
        id: ids.id("user"),
        tenant_id: tenant.id,
        email: input.email.trim(),
        email_verified: input.emailVerified,
        name: input.name,
        role: "owner",
        created_at: now,
        password_hash: input.passwordHash,
      };
      const identity = input.identity;
      const tokens = yield* storage.transaction((tx) =>
        Effect.gen(function* () {
          yield* Effect.catchTag(tx.tenants.insert(tenant), "Conflict", () => Effect.fail(new SlugTaken()));
          yield* tx.users.insert(user);
          if (identity)
            yield* tx.identities.insert({
              provider: identity.provider,
              subject: identity.subject,
              user_id: user.id,
              tenant_id: tenant.id,
              created_at: now,
            });
          return yield* openSession(tx, user, now);
        }),
      );
      return { user: publicUser(user), tenant, tokens };
    });

  const signIn = (user: UserRecord) =>
    Effect.gen(function* () {
      yield* requireActiveTenant(user.tenant_id);
      const tokens = yield* storage.transaction((tx) => openSession(tx, publicUser(user), clock.now()));
      return { user: publicUser(user), ...tokens };
    });

  const signup = (input: SignupInput, clientIp: string) =>
    Effect.gen(function* () {
      yield* limitAuthByIp(clientIp);
      const existing = yield* storage.users.findByEmail(input.email);
      if (Option.isSome(existing)) return yield* Effect.fail(emailTaken());
      const passwordHash = yield* passwordHasher.hash(input.password);
      const { user, tenant, tokens } = yield* createAccount({
        email: input.email,
        emailVerified: false,
        passwordHash,
        name: input.name ?? null,
        tenantName: input.tenantName ?? defaultTenantName(input.email),
      });
      return { user, tenant, ...tokens };
    });

  const login = (input: LoginInput, clientIp: string) =>
    Effect.gen(function* () {
      yield* limitAuthByIp(clientIp);
      const user = yield* failedLogins.attempt(
        input.email,
        clientIp,
        Effect.gen(function* () {
          const found = yield* storage.users.findByEmail(input.email);
          const hash =
            Option.isSome(found) && found.value.password_hash !== null ? found.value.password_hash : null;
          const ok = yield* passwordHasher.verify(hash ?? (yield* dummyHash), input.password);
          return ok && hash !== null ? found : Option.none();
        }),
        Option.isNone,
      );
      if (Option.isNone(user))
        return yield* Effect.fail(new Unauthorized({ message: "invalid email or password" }));
      return yield* signIn(user.value);
    });

  const google = (idToken: string, clientIp: string) =>
    Effect.gen(function* () {
      yield* limitAuthByIp(clientIp);
      const identity = yield* identityVerifier.verify(idToken);
      const linked = yield* storage.identities.find(identity.provider, identity.subject);
      if (Option.isSome(linked)) {
        const user = yield* storage.users.get(linked.value.tenant_id, linked.value.user_id);
        if (Option.isNone(user))
          return yield* Effect.fail(new Unauthorized({ message: "account no longer exists" }));
        return { ...(yield* signIn(user.value)), created: false };
      }
      const existing = yield* storage.users.findByEmail(identity.email);
      if (Option.isSome(existing)) {
        // Linking hands the account to whoever controls the provider account: only when the
        // provider vouches for the email.
        if (!identity.email_verified)
          return yield* Effect.fail(
            new Conflict({
              message: "an account with this email exists and the provider has not verified the email",
            }),
          );
        const user = existing.value;
        // An email nobody proved may have been signed up by someone else, who would then co-own
        // what the provider's account holder puts there: the provider's account claims it, and
        // every credential made before the claim ends with the claim.
        const claims = !user.email_verified;
        const now = clock.now();
        yield* storage.transaction((tx) =>
          Effect.gen(function* () {
            yield* tx.identities.insert({
              provider: identity.provider,
              subject: identity.subject,
              user_id: user.id,
              tenant_id: user.tenant_id,
              created_at: now,
            });
            if (!(yield* proveEmail(tx, user, now))) return;
            yield* tx.users.setPasswordHash(user.tenant_id, user.id, null);
            yield* tx.refreshSessions.revokeUserSessions(
              user.tenant_id,
              user.id,
              null,
              now,
              "account_claimed",
            );
          }),
        );
        if (!claims) return { ...(yield* signIn(user)), created: false };
        // Every node drops the tenant's cached keys and sessions, and the user's verified email shows at once.
        yield* forget({ kind: "tenant", id: user.tenant_id });
        return {
          ...(yield* signIn({ ...user, email_verified: true, password_hash: null })),
          created: false,
        };
      }
      const { user, tokens } = yield* createAccount({
        email: identity.email,
        emailVerified: identity.email_verified,
        passwordHash: null,
        name: identity.name,
        tenantName: defaultTenantName(identity.email),
        identity,
      });
      return { user, ...tokens, created: true };
    });

  const refresh = (refreshToken: string, clientIp: string) =>
    Effect.gen(function* () {
      yield* limitAuthByIp(clientIp);
      const now = clock.now();
      const hash = sha256Hex(refreshToken);
      const rejected = (message: string) => new Unauthorized({ message });
      const token = yield* storage.refreshSessions.findToken(hash);
      if (Option.isNone(token)) return yield* Effect.fail(rejected("invalid refresh token"));
      const session = yield* storage.refreshSessions.getSession(
        token.value.tenant_id,
        token.value.session_id,
      );
      if (Option.isNone(session) || session.value.revoked_at !== null)
        return yield* Effect.fail(rejected("session has ended"));
      const state = refreshTokenState(token.value, now);
      if (state === "expired") return yield* Effect.fail(rejected("refresh token expired"));
      const user = yield* storage.users.get(token.value.tenant_id, token.value.user_id);
      if (Option.isNone(user)) return yield* Effect.fail(rejected("account no longer exists"));
      yield* requireActiveTenant(user.value.tenant_id);
      // The rotation and the new pair commit together; a lost race on markTokenUsed is reuse,
      // and the revocation it causes must commit even though the call then fails.
      const outcome =
        state === "invalidated"
          ? ("reused" as const)
          : yield* storage.transaction((tx) =>
              Effect.gen(function* () {
                if (!(yield* tx.refreshSessions.markTokenUsed(hash, now))) return "reused" as const;
                return yield* issuePair(tx, publicUser(user.value), token.value.session_id, now);
              }),
            );
      if (outcome === "reused") {
        yield* revokeSession(token.value, now, "reuse_detected");
        return yield* Effect.fail(rejected("refresh token was already used; the session is revoked"));
      }
      return outcome;
    });

  const logout = (principal: Principal & { kind: "user" }, refreshToken: string | undefined) =>
    Effect.gen(function* () {
      const now = clock.now();
      yield* revokeSession(
        { tenant_id: principal.tenant.id, session_id: principal.sessionId },
        now,
        "logout",
      );
      if (refreshToken === undefined) return;
      const token = yield* storage.refreshSessions.findToken(sha256Hex(refreshToken));
      // Only the caller's own sessions: a stranger's token in the body must not end their session.
      if (Option.isNone(token) || token.value.user_id !== principal.user.id) return;
      yield* revokeSession(token.value, now, "logout");
    });

  const changePassword = (
    principal: Principal & { kind: "user" },
    input: PasswordChangeInput,
    clientIp: string,
  ) =>
    Effect.gen(function* () {
      const user = yield* storage.users.get(principal.tenant.id, principal.user.id);
      const hash = Option.isSome(user) ? user.value.password_hash : null;
      // A user without a password (Google sign-in, a claimed account) sets one without it.
      if (input.current_password === undefined) {
        if (hash !== null)
          return yield* Effect.fail(
            new InvalidRequest({
              message: "current_password: is required, the account has a password",
              details: {
                fields: [{ path: ["current_password"], message: "is required, the account has a password" }],
              },
            }),
          );
      } else {
        // A stolen access token must not make this an unthrottled password oracle: the login's limits.
        const ok = yield* failedLogins.attempt(
          principal.user.email,
          clientIp,
          Effect.map(
            passwordHasher.verify(hash ?? (yield* dummyHash), input.current_password),
            (right) => right && hash !== null,
          ),
          (right) => !right,
        );
        if (!ok) return yield* Effect.fail(new Unauthorized({ message: "current password is wrong" }));
      }
      const newHash = yield* passwordHasher.hash(input.new_password);
      const now = clock.now();
      yield* storage.transaction((tx) =>
        Effect.gen(function* () {
          yield* tx.users.setPasswordHash(principal.tenant.id, principal.user.id, newHash);
          yield* tx.refreshSessions.revokeUserSessions(
            principal.tenant.id,
            principal.user.id,
            principal.sessionId,
            now,
            "password_changed",
          );
        }),
      );
      // Every session of the user is dropped from the caches; the current one is read afresh.
      yield* forget({ kind: "user", id: principal.user.id });
    });

  /**
   * The owner deletes their tenant (tenants.ts `remove`), proving it is them again: with the
   * password, or, for an account without one (Google sign-in), with an access token whose
   * sign-in (its refresh session) is under FRESH_SIGN_IN_MS old. A wrong password counts as a
   * failed login, as on a password change.
   */
  const deleteTenant = (
    principal: Principal & { kind: "user" },
    input: DeleteTenantInput,
    clientIp: string,
  ) =>
    Effect.gen(function* () {
      if (principal.role !== "owner")
        return yield* Effect.fail(new Forbidden({ message: "only the tenant's owner may delete it" }));
      const user = yield* storage.users.get(principal.tenant.id, principal.user.id);
      const hash = Option.isSome(user) ? user.value.password_hash : null;
      if (input.password !== undefined) {
        const password = input.password;
        const ok = yield* failedLogins.attempt(
          principal.user.email,
          clientIp,
          Effect.map(
            passwordHasher.verify(hash ?? (yield* dummyHash), password),
            (right) => right && hash !== null,
          ),
          (right) => !right,
        );
        if (!ok) return yield* Effect.fail(new Unauthorized({ message: "password is wrong" }));
      } else if (hash !== null) {
        return yield* Effect.fail(
          new InvalidRequest({
            message: "password: is required, the account has a password",
            details: { fields: [{ path: ["password"], message: "is required, the account has a password" }] },
          }),
        );
      } else {
        const session = yield* storage.refreshSessions.getSession(principal.tenant.id, principal.sessionId);
        const signedInAt = Option.isSome(session) ? session.value.created_at : 0;
        if (clock.now() - signedInAt >= FRESH_SIGN_IN_MS)
          return yield* Effect.fail(
            new Unauthorized({
              message: "sign in again (within 5 minutes) to delete the tenant",
              details: { reason: "sign_in_too_old", max_age_seconds: FRESH_SIGN_IN_MS / 1000 },
            }),
          );
      }
      yield* removeTenant(principal.tenant.id);
    });

  const me = (principal: Principal) =>
    principal.kind === "user"
      ? {
          auth: { kind: "user" as const, role: principal.role },
          user: principal.user,
          tenant: principal.tenant,
        }
      : {
          auth: { kind: "api_key" as const, key_id: principal.keyId, scopes: [principal.scope] },
          tenant: principal.tenant,
        };

  /**
   * Deletes the tokens no one can use any more: email links past their expiry, refresh tokens a
   * week past theirs. Run by the worker's sweep; answers how many of each went.
   */
  const sweepExpiredTokens = () => {
    const until = (remove: Effect.Effect<number, StorageError>): Effect.Effect<number, StorageError> =>
      Effect.flatMap(remove, (n) =>
        n < SWEEP_CHUNK ? Effect.succeed(n) : Effect.map(until(remove), (m) => n + m),
      );
    const now = clock.now();
    return Effect.all({
      emailTokens: until(storage.emailTokens.deleteExpired(now, SWEEP_CHUNK)),
      refreshTokens: until(
        storage.refreshSessions.deleteTokensExpired(now - EXPIRED_REFRESH_TOKEN_KEPT_MS, SWEEP_CHUNK),
      ),
    });
  };

  return { signup, login, google, refresh, logout, changePassword, deleteTenant, me, sweepExpiredTokens };
};

const emailTaken = () => new Conflict({ message: "an account with this email already exists" });

export type Accounts = ReturnType<typeof makeAccounts>;

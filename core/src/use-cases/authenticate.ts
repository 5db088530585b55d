import { Effect, Option } from "effect";
import { apiKeyStatus, shouldTouch } from "../domain/api-key.js";
import { includesScope, type Role, type Scope, scopeOfRole } from "../domain/scope.js";
import type { Tenant } from "../domain/tenant.js";
import { publicUser, type User } from "../domain/user.js";
import { Forbidden, type StorageError, Unauthorized } from "../errors.js";
import type { VodPorts } from "../tokens.js";
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

export const makeAuthenticate = ({
  clock,
  storage,
  tokenSigner,
}: Pick<VodPorts, "clock" | "storage" | "tokenSigner">) => {
  const activeTenant = (tenantId: string): Effect.Effect<Tenant, Unauthorized | Forbidden | StorageError> =>
    Effect.flatMap(
      storage.tenants.get(tenantId),
      (tenant): Effect.Effect<Tenant, Unauthorized | Forbidden> =>
        Option.isNone(tenant)
          ? Effect.fail(unauthorized("credential is no longer valid"))
          : tenant.value.status === "suspended"
            ? Effect.fail(new Forbidden({ message: "tenant is suspended" }))
            : Effect.succeed(tenant.value),
    );

  const byApiKey = (key: string): Effect.Effect<Principal, Unauthorized | Forbidden | StorageError> =>
    Effect.gen(function* () {
      const hash = sha256Hex(key);
      const found = yield* storage.apiKeys.findByHash(hash);
      const now = clock.now();
      if (Option.isNone(found) || !constantTimeEqual(found.value.key_hash, hash))
        return yield* Effect.fail(unauthorized("invalid API key"));
      const apiKey = found.value;
      const status = apiKeyStatus(apiKey, now);
      if (status !== "active") return yield* Effect.fail(unauthorized(`API key is ${status}`));
      const tenant = yield* activeTenant(apiKey.tenant_id);
      if (shouldTouch(apiKey, now)) yield* storage.apiKeys.touch(apiKey.tenant_id, apiKey.id, now);
      return { kind: "api_key" as const, tenant, keyId: apiKey.id, scope: apiKey.scopes[0] ?? "read" };
    });

  const byBearer = (token: string): Effect.Effect<Principal, Unauthorized | Forbidden | StorageError> =>
    Effect.gen(function* () {
      const now = clock.now();
      const verified = yield* Effect.mapError(tokenSigner.verify("access", token, { now }), (rejected) =>
        unauthorized(rejected.reason === "expired" ? "access token expired" : "invalid access token"),
      );
      const { sub, tid, sid } = verified.claims;
      if (typeof sub !== "string" || typeof tid !== "string" || typeof sid !== "string")
        return yield* Effect.fail(unauthorized("invalid access token"));
      const session = yield* storage.refreshSessions.getSession(tid, sid);
      if (Option.isNone(session) || session.value.revoked_at !== null)
        return yield* Effect.fail(unauthorized("session has ended"));
      const user = yield* storage.users.get(tid, sub);
      if (Option.isNone(user)) return yield* Effect.fail(unauthorized("credential is no longer valid"));
      const tenant = yield* activeTenant(tid);
      const role = user.value.role;
      return {
        kind: "user" as const,
        tenant,
        user: publicUser(user.value),
        role,
        scope: scopeOfRole(role),
        sessionId: sid,
      };
    });

  /** Who is calling. An API key wins when both credentials are sent. */
  const authenticate = (credentials: Credentials) =>
    credentials.apiKey !== undefined
      ? byApiKey(credentials.apiKey)
      : credentials.bearer !== undefined
        ? byBearer(credentials.bearer)
        : Effect.fail(unauthorized("missing credentials: send Authorization: Bearer <token> or X-API-Key"));

  return authenticate;
};

/** Forbidden unless the principal is of an allowed kind and holds the scope. */
export const authorize = (principal: Principal, requirement: Requirement): Effect.Effect<void, Forbidden> => {
  if (requirement.kinds !== undefined && !requirement.kinds.includes(principal.kind))
    return Effect.fail(
      new Forbidden({ message: `this operation needs a ${requirement.kinds.join(" or ")} credential` }),
    );
  if (!includesScope(principal.scope, requirement.scope))
    return Effect.fail(new Forbidden({ message: `this operation needs the ${requirement.scope} scope` }));
  return Effect.void;
};

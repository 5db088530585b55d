import { Effect, Either } from "effect";
import type { VodConfig } from "../config.js";
import { type ApiKey, KEY_TAG, transitionApiKey } from "../domain/api-key.js";
import { highestScope } from "../domain/scope.js";
import { InternalError } from "../errors.js";
import type { Requests } from "../schema/index.js";
import type { VodPorts } from "../tokens.js";
import type { Forget, Principal } from "./authenticate.js";
import { orNotFound, quotaExceeded, randomBase62, sha256Hex } from "./support.js";

export { KEY_TAG };
export const MAX_LISTED_API_KEYS = 500;

type CreateInput = typeof Requests.CreateApiKeyBody.Type;
type ListQuery = typeof Requests.ListApiKeysQuery.Type;

export const makeApiKeys = ({ clock, ids, storage }: VodPorts, config: VodConfig, forget: Forget) => {
  const list = (principal: Principal, query: ListQuery = {}) =>
    Effect.map(
      storage.apiKeys.list(principal.tenant.id, MAX_LISTED_API_KEYS, {
        ...(query.status === undefined ? {} : { status: query.status }),
        now: clock.now(),
      }),
      (data) => ({ data }),
    );

  /** The full key `vod_<8>_<43>` is returned here once and stored only as its SHA-256. */
  const create = (principal: Principal, input: CreateInput) =>
    Effect.gen(function* () {
      const prefix = `${KEY_TAG}_${randomBase62(ids, 8)}`;
      const key = `${prefix}_${randomBase62(ids, 43)}`;
      const record: ApiKey = {
        id: ids.id("api_key"),
        tenant_id: principal.tenant.id,
        name: input.name,
        prefix,
        scopes: [highestScope(input.scopes)],
        key_hash: sha256Hex(key),
        last_used_at: null,
        expires_at: null,
        revoked_at: null,
        created_at: clock.now(),
      };
      // Counted in the transaction that inserts, the tenant held meanwhile: two creates at once
      // cannot both take the last place.
      const limit = config.quotas.activeApiKeysPerTenant;
      yield* storage.transaction((tx) =>
        Effect.gen(function* () {
          yield* tx.tenants.lock(record.tenant_id);
          if ((yield* tx.apiKeys.countActive(record.tenant_id, record.created_at)) >= limit)
            return yield* Effect.fail(
              quotaExceeded(`a tenant may have at most ${limit} active API keys: revoke one first`, limit),
            );
          yield* tx.apiKeys.insert(record);
        }),
      );
      return {
        id: record.id,
        name: record.name,
        prefix,
        scopes: record.scopes,
        created_at: record.created_at,
        key,
      };
    });

  const revoke = (principal: Principal, id: string) =>
    Effect.gen(function* () {
      const key = yield* orNotFound("API key")(storage.apiKeys.get(principal.tenant.id, id));
      const now = clock.now();
      const next = transitionApiKey(key, { type: "revoke" }, now);
      if (Either.isLeft(next))
        return yield* Effect.fail(new InternalError({ message: "illegal API key transition" }));
      if (next.right.revoked_at !== key.revoked_at)
        yield* storage.apiKeys.revoke(principal.tenant.id, id, now);
      // Stored first: a node that misses the message reads the revocation at its cache's expiry.
      yield* forget({ kind: "api_key", id });
    });

  return { list, create, revoke };
};

export type ApiKeys = ReturnType<typeof makeApiKeys>;

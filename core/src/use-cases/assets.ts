import { Effect } from "effect";
import type { VodConfig } from "../config.js";
import { newAssetDraft } from "../domain/asset.js";
import { InvalidRequest } from "../errors.js";
import type { AssetKey } from "../ports/repositories.js";
import type { Requests } from "../schema/index.js";
import type { VodPorts } from "../tokens.js";
import type { Principal } from "./authenticate.js";
import { constantTimeEqual, hmacBase64Url, orNotFound } from "./support.js";
import { eventRecorder } from "./webhooks.js";

type ListInput = typeof Requests.ListAssetsQuery.Type;
type CreateInput = typeof Requests.CreateAssetBody.Type;

/**
 * Keyset cursors: base64url of "created_at.id", a dot, and an HMAC of it bound to the tenant, so a
 * client can neither forge a position nor carry one to another tenant.
 */
export const makeCursors = (secret: Uint8Array) => {
  const sign = (tenantId: string, payload: string) =>
    hmacBase64Url(secret, `${tenantId}\n${payload}`).slice(0, 22);
  const encode = (tenantId: string, key: AssetKey): string => {
    const payload = Buffer.from(`${key.created_at}.${key.id}`).toString("base64url");
    return `${payload}.${sign(tenantId, payload)}`;
  };
  const decode = (tenantId: string, cursor: string): Effect.Effect<AssetKey, InvalidRequest> => {
    const bad = new InvalidRequest({
      message: "invalid cursor",
      details: { fields: [{ path: ["cursor"], message: "is not a cursor this service issued" }] },
    });
    const [payload, mac, ...rest] = cursor.split(".");
    if (!payload || !mac || rest.length > 0 || !constantTimeEqual(mac, sign(tenantId, payload)))
      return Effect.fail(bad);
    const text = Buffer.from(payload, "base64url").toString("utf8");
    const dot = text.indexOf(".");
    const createdAt = Number(text.slice(0, dot));
    const id = text.slice(dot + 1);
    if (dot < 1 || !Number.isSafeInteger(createdAt) || id.length === 0) return Effect.fail(bad);
    return Effect.succeed({ created_at: createdAt, id });
  };
  return { encode, decode };
};

export const makeAssets = (ports: VodPorts, config: VodConfig) => {
  const { clock, ids, storage } = ports;
  const cursors = makeCursors(config.cursorSecret);
  const recordEvent = eventRecorder(ports);

  const list = (principal: Principal, input: ListInput) =>
    Effect.gen(function* () {
      const tenantId = principal.tenant.id;
      const after = input.cursor === undefined ? undefined : yield* cursors.decode(tenantId, input.cursor);
      // One row more than asked tells whether another page exists without a count query.
      const rows = yield* storage.assets.list(tenantId, {
        status: input.status,
        limit: input.limit + 1,
        after,
      });
      const data = rows.slice(0, input.limit);
      const last = data[data.length - 1];
      const next_cursor = rows.length > input.limit && last ? cursors.encode(tenantId, last) : null;
      return { data, next_cursor };
    });

  const create = (principal: Principal, input: CreateInput) =>
    Effect.gen(function* () {
      const asset = newAssetDraft({
        id: ids.id("asset"),
        tenant_id: principal.tenant.id,
        title: input.title,
        drm: input.drm,
        now: clock.now(),
      });
      yield* storage.transaction((tx) =>
        Effect.zipRight(
          tx.assets.insert(asset),
          recordEvent(tx, asset.tenant_id, "asset.created", { asset }),
        ),
      );
      return { asset };
    });

  const get = (principal: Principal, id: string) =>
    Effect.map(orNotFound("asset")(storage.assets.get(principal.tenant.id, id)), (asset) => ({ asset }));

  return { list, create, get };
};

export type Assets = ReturnType<typeof makeAssets>;

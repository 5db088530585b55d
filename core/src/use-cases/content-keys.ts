import { Effect, Option } from "effect";
import type { AssetId, TenantId } from "../domain/ids.js";
import { InternalError } from "../errors.js";
import type { Encryption } from "../ports/media-processor.js";
import type { VodPorts } from "../tokens.js";
import { unwrapKey, wrapKey } from "./sealing.js";

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

/** Which asset of which tenant a content key belongs to. */
export interface ContentKeyOwner {
  readonly tenantId: TenantId;
  readonly assetId: AssetId;
}

/**
 * How a bound content key is stored: this prefix, then what `wrapKey` made of it with the owner
 * as additional data. A key stored without it was wrapped by an earlier version, unbound.
 */
const BOUND = "v2:";

// Length-prefixed, so that no two owners give the same bytes whatever their ids contain.
const ownerData = ({ tenantId, assetId }: ContentKeyOwner): Uint8Array => {
  const field = (value: string) => {
    const bytes = Buffer.from(value, "utf8");
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    return Buffer.concat([length, bytes]);
  };
  return new Uint8Array(
    Buffer.concat([Buffer.from("vod content key v2\0"), field(tenantId), field(assetId)]),
  );
};

/**
 * A content key wrapped for its owner (DECISIONS "Account security"): the GCM tag covers the
 * tenant and asset ids, so a wrapped key copied into another asset's row, of this tenant or
 * another, does not unwrap there.
 */
export const sealContentKey = (
  masterKey: Uint8Array,
  key: Uint8Array,
  iv: Uint8Array,
  owner: ContentKeyOwner,
): string => `${BOUND}${wrapKey(masterKey, key, iv, ownerData(owner))}`;

/** Unwraps a stored content key: bound to `owner`, or in the unbound form of earlier versions. */
export const openContentKey = (masterKey: Uint8Array, stored: string, owner: ContentKeyOwner): Uint8Array =>
  stored.startsWith(BOUND)
    ? unwrapKey(masterKey, stored.slice(BOUND.length), ownerData(owner))
    : unwrapKey(masterKey, stored);

/**
 * Content keys of DRM assets: made once per asset (a retried processing run reuses the first),
 * stored only wrapped, unwrapped in memory when packaging or answering a licence request.
 */
export const makeContentKeys = ({ clock, ids, storage }: VodPorts, masterKey: Uint8Array) => {
  const unwrap = (wrapped: string, owner: ContentKeyOwner) =>
    Effect.try({
      try: () => openContentKey(masterKey, wrapped, owner),
      catch: (cause) =>
        new InternalError({
          message: "a content key does not unwrap with the master key for its asset",
          cause,
        }),
    });

  const forPackaging = (tenantId: TenantId, assetId: AssetId) =>
    Effect.gen(function* () {
      const kid = ids.randomBytes(16);
      const stored = yield* storage.contentKeys.insertIfAbsent({
        tenant_id: tenantId,
        asset_id: assetId,
        kid: hex(kid),
        wrapped_key: sealContentKey(masterKey, ids.randomBytes(16), ids.randomBytes(12), {
          tenantId,
          assetId,
        }),
        created_at: clock.now(),
      });
      const key = yield* unwrap(stored.wrapped_key, { tenantId, assetId });
      return { keyId: stored.kid, key: hex(key) } satisfies Encryption;
    });

  const find = (tenantId: TenantId, assetId: AssetId) =>
    Effect.gen(function* () {
      const stored = yield* storage.contentKeys.get(tenantId, assetId);
      if (Option.isNone(stored)) return Option.none<{ kid: Uint8Array; key: Uint8Array }>();
      return Option.some({
        kid: new Uint8Array(Buffer.from(stored.value.kid, "hex")),
        key: yield* unwrap(stored.value.wrapped_key, { tenantId, assetId }),
      });
    });

  return { forPackaging, find };
};

import { createCipheriv, createDecipheriv } from "node:crypto";
import { Effect, Option } from "effect";
import { InternalError } from "../errors.js";
import type { Encryption } from "../ports/media-processor.js";
import type { VodPorts } from "../tokens.js";

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

/** AES-256-GCM under the master key: base64url of iv (12 bytes), ciphertext, tag (16 bytes). */
export const wrapKey = (masterKey: Uint8Array, key: Uint8Array, iv: Uint8Array): string => {
  const cipher = createCipheriv("aes-256-gcm", masterKey, iv);
  const body = Buffer.concat([cipher.update(key), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]).toString("base64url");
};

export const unwrapKey = (masterKey: Uint8Array, wrapped: string): Uint8Array => {
  const raw = Buffer.from(wrapped, "base64url");
  const decipher = createDecipheriv("aes-256-gcm", masterKey, raw.subarray(0, 12));
  decipher.setAuthTag(raw.subarray(raw.length - 16));
  return new Uint8Array(
    Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]),
  );
};

/**
 * Content keys of DRM assets: made once per asset (a retried processing run reuses the first),
 * stored only wrapped, unwrapped in memory when packaging or answering a licence request.
 */
export const makeContentKeys = ({ clock, ids, storage }: VodPorts, masterKey: Uint8Array) => {
  const unwrap = (wrapped: string) =>
    Effect.try({
      try: () => unwrapKey(masterKey, wrapped),
      catch: (cause) =>
        new InternalError({ message: "a content key does not unwrap with the master key", cause }),
    });

  const forPackaging = (tenantId: string, assetId: string) =>
    Effect.gen(function* () {
      const kid = ids.randomBytes(16);
      const stored = yield* storage.contentKeys.insertIfAbsent({
        tenant_id: tenantId,
        asset_id: assetId,
        kid: hex(kid),
        wrapped_key: wrapKey(masterKey, ids.randomBytes(16), ids.randomBytes(12)),
        created_at: clock.now(),
      });
      const key = yield* unwrap(stored.wrapped_key);
      return { keyId: stored.kid, key: hex(key) } satisfies Encryption;
    });

  const find = (tenantId: string, assetId: string) =>
    Effect.gen(function* () {
      const stored = yield* storage.contentKeys.get(tenantId, assetId);
      if (Option.isNone(stored)) return Option.none<{ kid: Uint8Array; key: Uint8Array }>();
      return Option.some({
        kid: new Uint8Array(Buffer.from(stored.value.kid, "hex")),
        key: yield* unwrap(stored.value.wrapped_key),
      });
    });

  return { forPackaging, find };
};

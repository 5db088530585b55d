import { createCipheriv, createDecipheriv, hkdfSync } from "node:crypto";

/**
 * The one AES-256-GCM form of the platform: base64url of iv (12 bytes), ciphertext, tag (16
 * bytes), with optional additional data. Content keys are wrapped in it under the master key;
 * sealed strings under a derived key.
 */
export const wrapKey = (masterKey: Uint8Array, key: Uint8Array, iv: Uint8Array, aad?: Uint8Array): string => {
  const cipher = createCipheriv("aes-256-gcm", masterKey, iv);
  if (aad) cipher.setAAD(aad);
  const body = Buffer.concat([cipher.update(key), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]).toString("base64url");
};

export const unwrapKey = (masterKey: Uint8Array, wrapped: string, aad?: Uint8Array): Uint8Array => {
  const raw = Buffer.from(wrapped, "base64url");
  if (raw.length < 28) throw new Error("a wrapped value too short");
  const decipher = createDecipheriv("aes-256-gcm", masterKey, raw.subarray(0, 12));
  if (aad) decipher.setAAD(aad);
  decipher.setAuthTag(raw.subarray(raw.length - 16));
  return new Uint8Array(
    Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]),
  );
};

/** How a sealed value is stored: this prefix, then base64url of iv (12 bytes), ciphertext and tag. */
export const SEALED = "sealed:";

/**
 * A key of its own for one use of the master key (HKDF-SHA256 under `label`), so that no derived
 * key can stand for another, nor for the master key that wraps content keys.
 */
export const derivedKey = (masterKey: Uint8Array, label: string): Uint8Array =>
  new Uint8Array(hkdfSync("sha256", masterKey, new Uint8Array(0), label, 32));

/**
 * Seals strings at rest with AES-256-GCM under a key derived from the master key (`label`). A
 * `context` given to `seal` is authenticated with the value (GCM's additional data) and must be
 * given again to `open`: a sealed value copied to another record does not open there.
 * `open` throws when the value was altered, sealed under another key or in another context.
 */
export const sealer = (masterKey: Uint8Array, label: string, randomBytes: (n: number) => Uint8Array) => {
  const key = derivedKey(masterKey, label);
  return {
    seal: (plain: string, context = ""): string =>
      `${SEALED}${wrapKey(key, Buffer.from(plain, "utf8"), randomBytes(12), Buffer.from(context, "utf8"))}`,
    open: (sealed: string, context = ""): string => {
      if (!sealed.startsWith(SEALED)) throw new Error("not a sealed value");
      return Buffer.from(unwrapKey(key, sealed.slice(SEALED.length), Buffer.from(context, "utf8"))).toString(
        "utf8",
      );
    },
  };
};

export type Sealer = ReturnType<typeof sealer>;

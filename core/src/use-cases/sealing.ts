import { createCipheriv, createDecipheriv, hkdfSync } from "node:crypto";

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
    seal: (plain: string, context = ""): string => {
      const iv = randomBytes(12);
      const cipher = createCipheriv("aes-256-gcm", key, iv);
      cipher.setAAD(Buffer.from(context, "utf8"));
      const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
      return `${SEALED}${Buffer.concat([iv, body, cipher.getAuthTag()]).toString("base64url")}`;
    },
    open: (sealed: string, context = ""): string => {
      if (!sealed.startsWith(SEALED)) throw new Error("not a sealed value");
      const raw = Buffer.from(sealed.slice(SEALED.length), "base64url");
      if (raw.length < 28) throw new Error("a sealed value too short");
      const decipher = createDecipheriv("aes-256-gcm", key, raw.subarray(0, 12));
      decipher.setAAD(Buffer.from(context, "utf8"));
      decipher.setAuthTag(raw.subarray(raw.length - 16));
      return Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString(
        "utf8",
      );
    },
  };
};

export type Sealer = ReturnType<typeof sealer>;

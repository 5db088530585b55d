import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { wrapKey } from "../src/use-cases/sealing.js";
import { webhookSecrets } from "../src/use-cases/webhooks.js";

const random = (n: number) => new Uint8Array(randomBytes(n));
const secret = `whsec_${randomBytes(32).toString("base64")}`;

describe("webhook secrets at rest", () => {
  const masterKey = random(32);
  const secrets = webhookSecrets(masterKey, random);

  it("seals a secret so that it opens to itself, and to nothing readable without the key", () => {
    const sealed = secrets.seal(secret);
    expect(sealed).toMatch(/^sealed:[A-Za-z0-9_-]+$/);
    expect(sealed).not.toContain(secret.slice(6, 18));
    expect(secrets.open(sealed)).toBe(secret);
    // A fresh nonce each time: two seals of one secret differ.
    expect(secrets.seal(secret)).not.toBe(sealed);
  });

  it("reads a secret an earlier version stored plainly as it is", () => {
    expect(secrets.open(secret)).toBe(secret);
  });

  it("refuses a secret sealed under another master key, or altered", () => {
    const sealed = secrets.seal(secret);
    expect(() => webhookSecrets(random(32), random).open(sealed)).toThrow();
    const body = sealed.slice("sealed:".length);
    const altered = `sealed:${body.slice(0, 20)}${body[20] === "A" ? "B" : "A"}${body.slice(21)}`;
    expect(() => secrets.open(altered)).toThrow();
  });

  it("uses a key of its own: the master key itself, as content keys use it, does not open it", () => {
    // What sealing with the master key directly would store: not what is stored.
    const direct = `sealed:${wrapKey(masterKey, Buffer.from(secret), random(12))}`;
    expect(() => secrets.open(direct)).toThrow();
  });
});

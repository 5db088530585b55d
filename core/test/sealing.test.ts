import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { sealer } from "../src/use-cases/sealing.js";
import { webhookSecrets } from "../src/use-cases/webhooks.js";

const random = (n: number) => new Uint8Array(randomBytes(n));

describe("sealed values under labels of the master key", () => {
  const masterKey = random(32);
  const records = sealer(masterKey, "vod idempotency secrets v1", random);
  const value = `vod_abcdefgh_${randomBytes(32).toString("base64url")}`;

  it("opens a value in the context it was sealed in, and in no other", () => {
    const sealed = records.seal(value, "tenant a / key 1");
    expect(sealed).toMatch(/^sealed:[A-Za-z0-9_-]+$/);
    expect(sealed).not.toContain(value.slice(13, 30));
    expect(records.open(sealed, "tenant a / key 1")).toBe(value);
    // Copied into another record (another principal's), it does not open.
    expect(() => records.open(sealed, "tenant a / key 2")).toThrow();
    expect(() => records.open(sealed)).toThrow();
  });

  it("keeps labels apart: a value sealed under one label does not open under another", () => {
    const webhook = webhookSecrets(masterKey, random).seal(value);
    expect(() => records.open(webhook)).toThrow();
    expect(() => webhookSecrets(masterKey, random).open(records.seal(value))).toThrow();
  });

  it("refuses what is not a sealed value, or too short to be one", () => {
    expect(() => records.open(value)).toThrow();
    expect(() => records.open("sealed:AAAA")).toThrow();
  });
});

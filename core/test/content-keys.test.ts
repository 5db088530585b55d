import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { AssetId, TenantId } from "../src/domain/ids.js";
import { openContentKey, sealContentKey } from "../src/use-cases/content-keys.js";
import { wrapKey } from "../src/use-cases/sealing.js";

const random = (n: number) => new Uint8Array(randomBytes(n));

describe("content keys at rest", () => {
  const masterKey = random(32);
  const key = random(16);
  const owner = { tenantId: TenantId("ten_A"), assetId: AssetId("ast_1") };

  it("opens a key for the tenant and asset it was wrapped for", () => {
    const stored = sealContentKey(masterKey, key, random(12), owner);
    expect(stored).toMatch(/^v2:[A-Za-z0-9_-]+$/);
    expect(openContentKey(masterKey, stored, owner)).toEqual(key);
  });

  it("does not open it for another tenant's asset of the same id, or another asset of the tenant", () => {
    const stored = sealContentKey(masterKey, key, random(12), owner);
    expect(() =>
      openContentKey(masterKey, stored, { tenantId: TenantId("ten_B"), assetId: AssetId("ast_1") }),
    ).toThrow();
    expect(() =>
      openContentKey(masterKey, stored, { tenantId: TenantId("ten_A"), assetId: AssetId("ast_2") }),
    ).toThrow();
    // Ids that would run together if simply joined stay apart.
    const joined = sealContentKey(masterKey, key, random(12), {
      tenantId: TenantId("ten_A"),
      assetId: AssetId("x_y"),
    });
    expect(() =>
      openContentKey(masterKey, joined, { tenantId: TenantId("ten_Ax"), assetId: AssetId("_y") }),
    ).toThrow();
  });

  it("does not open it with the tag stripped of its binding (the unbound form)", () => {
    const stored = sealContentKey(masterKey, key, random(12), owner);
    expect(() => openContentKey(masterKey, stored.slice("v2:".length), owner)).toThrow();
  });

  it("still opens a key an earlier version stored unbound, for whichever asset holds it", () => {
    const earlier = wrapKey(masterKey, key, random(12));
    expect(openContentKey(masterKey, earlier, owner)).toEqual(key);
    expect(() => openContentKey(random(32), earlier, owner)).toThrow();
  });
});

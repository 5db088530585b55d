import { describe, expect, expectTypeOf, it } from "vitest";
import { AssetId, PlaybackSessionId, TenantId, UploadId } from "../src/domain/ids.js";
import type { AssetRepository, UploadRepository } from "../src/ports/repositories.js";

// The type assertions are checked by `tsc -b` (part of the test command), the rest by vitest.
describe("branded ids", () => {
  it("are the plain strings the Ids port minted, at run time", () => {
    expect(TenantId("tnt_1")).toBe("tnt_1");
    expect(JSON.stringify({ id: AssetId("ast_1") })).toBe('{"id":"ast_1"}');
  });

  it("are not interchangeable: an asset id is no tenant id, and a plain string is neither", () => {
    expectTypeOf(AssetId("a")).not.toExtend<TenantId>();
    expectTypeOf(UploadId("u")).not.toExtend<AssetId>();
    expectTypeOf(PlaybackSessionId("p")).not.toExtend<UploadId>();
    expectTypeOf<string>().not.toExtend<TenantId>();
    expectTypeOf<Parameters<AssetRepository["get"]>>().toEqualTypeOf<[TenantId, AssetId]>();
    expectTypeOf<Parameters<UploadRepository["findOpen"]>>().toEqualTypeOf<[TenantId, AssetId]>();
    const swapped = (repo: AssetRepository) =>
      // @ts-expect-error: the tenant and the asset swapped
      repo.get(AssetId("a"), TenantId("t"));
    expect(typeof swapped).toBe("function");
  });
});

import { describe, expect, it } from "vitest";
import {
  chunkKey,
  originKey,
  renditionKey,
  staticRenditionKey,
  tenantPrefixes,
  textTrackKey,
} from "../src/domain/object-keys.js";

describe("object keys", () => {
  it("every key a tenant's asset has lies under one of the tenant's prefixes, and under no other tenant's", () => {
    // What deleting a tenant empties is tenantPrefixes: a kind of key outside them would be left.
    const keys = [
      originKey("tnt_a", "ast_1"),
      renditionKey("tnt_a", "ast_1", "360p/seg_1.m4s"),
      staticRenditionKey("tnt_a", "ast_1", "high.mp4"),
      textTrackKey("tnt_a", "ast_1", "trk_1.vtt"),
      chunkKey("tnt_a", "ast_1", "360p", 0),
    ];
    for (const key of keys) {
      expect(
        tenantPrefixes("tnt_a").some((prefix) => key.startsWith(prefix)),
        key,
      ).toBe(true);
      expect(
        tenantPrefixes("tnt_a_b").some((prefix) => key.startsWith(prefix)),
        key,
      ).toBe(false);
    }
  });
});

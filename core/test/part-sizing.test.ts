import {
  MAX_PART_COUNT,
  MAX_UPLOAD_SIZE_BYTES,
  MIB,
  MIN_PART_SIZE,
  partCountFor,
  partSizeFor,
} from "@vod/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

describe("part sizing (DECISIONS: smallest multiple of 1 MiB >= 8 MiB keeping part_count <= 10,000)", () => {
  it("holds for every size from 1 byte to 100 GiB", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: MAX_UPLOAD_SIZE_BYTES }), (size) => {
        const partSize = partSizeFor(size);
        const count = partCountFor(size, partSize);
        expect(partSize % MIB).toBe(0);
        expect(partSize).toBeGreaterThanOrEqual(MIN_PART_SIZE);
        expect(count).toBeLessThanOrEqual(MAX_PART_COUNT);
        expect(partSize * count).toBeGreaterThanOrEqual(size);
        expect(partSize * (count - 1)).toBeLessThan(size);
        // Smallest: one MiB less would be under 8 MiB or need more than 10,000 parts.
        const smaller = partSize - MIB;
        expect(smaller < MIN_PART_SIZE || partCountFor(size, smaller) > MAX_PART_COUNT).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it("gives the documented values at the edges", () => {
    expect([partSizeFor(1), partCountFor(1, partSizeFor(1))]).toEqual([8 * MIB, 1]);
    expect(partSizeFor(80_000 * MIB)).toBe(8 * MIB);
    expect(partSizeFor(80_000 * MIB + 1)).toBe(9 * MIB);
    expect(partSizeFor(MAX_UPLOAD_SIZE_BYTES)).toBe(11 * MIB);
    expect(partCountFor(MAX_UPLOAD_SIZE_BYTES, 11 * MIB)).toBe(9310);
  });
});

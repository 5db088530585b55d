import {
  MAX_STARTUP_BUCKET,
  nearestRank,
  percentilesOfBuckets,
  STARTUP_PERCENTILES,
  startupBucket,
  startupBucketValue,
} from "@vod/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

/** The bucket counts of some startup times, in bucket order. */
const countsOf = (values: ReadonlyArray<number>) => {
  const counts = new Map<number, number>();
  for (const v of values) counts.set(startupBucket(v), (counts.get(startupBucket(v)) ?? 0) + 1);
  return [...counts].sort(([a], [b]) => a - b);
};

describe("startup-time histogram (docs/analytics.md: percentiles within 1%)", () => {
  it("puts a time in [1.02^(b-1), 1.02^b) in bucket b, and answers within 1% of it", () => {
    expect([0, 0.5, 0.999].map(startupBucket)).toEqual([0, 0, 0]);
    expect(startupBucket(1)).toBe(1);
    expect(startupBucket(1.0199)).toBe(1);
    expect(startupBucket(1.0201)).toBe(2);
    expect(startupBucket(-5)).toBe(0);
    expect(startupBucket(Number.MAX_VALUE)).toBe(MAX_STARTUP_BUCKET);
    expect(startupBucketValue(0)).toBe(0);
    fc.assert(
      fc.property(fc.double({ min: 1, max: 1e12, noNaN: true }), (ms) => {
        const b = startupBucket(ms);
        expect(ms).toBeGreaterThanOrEqual(1.02 ** (b - 1) * (1 - 1e-12));
        expect(ms).toBeLessThan(1.02 ** b * (1 + 1e-12));
        expect(Math.abs(startupBucketValue(b) - ms)).toBeLessThanOrEqual(0.01 * ms);
      }),
      { seed: 29, numRuns: 2_000 },
    );
  });

  it("answers each percentile within 1% of the exact nearest rank (1 ms below 1 ms)", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(fc.double({ min: 0, max: 60_000, noNaN: true }), fc.integer({ min: 0, max: 5_000 })),
          {
            minLength: 1,
            maxLength: 300,
          },
        ),
        (values) => {
          const sorted = [...values].sort((a, b) => a - b);
          const answered = percentilesOfBuckets(countsOf(values));
          expect(answered).toHaveLength(STARTUP_PERCENTILES.length);
          for (const [i, p] of STARTUP_PERCENTILES.entries()) {
            const exact = nearestRank(sorted, p);
            expect(Math.abs((answered?.[i] ?? Number.NaN) - exact)).toBeLessThanOrEqual(
              Math.max(0.01 * exact, 1),
            );
          }
        },
      ),
      { seed: 29, numRuns: 500 },
    );
  });

  it("answers nothing for no counts", () => {
    expect(percentilesOfBuckets([])).toBeNull();
    expect(percentilesOfBuckets([[3, 0]])).toBeNull();
  });
});

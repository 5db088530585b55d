import { rangePieces } from "@vod/adapter-postgres/testing";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

const HOUR = 3_600_000;
const DAY = 86_400_000;
const MIDNIGHT = Math.floor(1_795_000_000_000 / DAY) * DAY;

describe("rangePieces: where a query's range is read from", () => {
  it("reads a range inside one hour from the views alone", () => {
    expect(rangePieces(MIDNIGHT + 10, MIDNIGHT + 20)).toEqual({
      views: [[MIDNIGHT + 10, MIDNIGHT + 20]],
      hours: [],
      days: [],
    });
    expect(rangePieces(MIDNIGHT + 10, MIDNIGHT + HOUR, "day")).toEqual({
      views: [[MIDNIGHT + 10, MIDNIGHT + HOUR]],
      hours: [],
      days: [],
    });
  });

  it("reads whole hours from hour rollups, the edges from the views", () => {
    expect(rangePieces(MIDNIGHT + 5, MIDNIGHT + 3 * HOUR + 7)).toEqual({
      views: [
        [MIDNIGHT + 5, MIDNIGHT + HOUR],
        [MIDNIGHT + 3 * HOUR, MIDNIGHT + 3 * HOUR + 7],
      ],
      hours: [[MIDNIGHT + HOUR, MIDNIGHT + 3 * HOUR]],
      days: [],
    });
    expect(rangePieces(MIDNIGHT, MIDNIGHT + HOUR)).toEqual({
      views: [],
      hours: [[MIDNIGHT, MIDNIGHT + HOUR]],
      days: [],
    });
  });

  it("reads whole days from day rollups, but per hour only hours", () => {
    const from = MIDNIGHT - 2 * HOUR - 1;
    const to = MIDNIGHT + 3 * DAY + HOUR + 1;
    expect(rangePieces(from, to)).toEqual({
      views: [
        [from, MIDNIGHT - 2 * HOUR],
        [MIDNIGHT + 3 * DAY + HOUR, to],
      ],
      hours: [
        [MIDNIGHT - 2 * HOUR, MIDNIGHT],
        [MIDNIGHT + 3 * DAY, MIDNIGHT + 3 * DAY + HOUR],
      ],
      days: [[MIDNIGHT, MIDNIGHT + 3 * DAY]],
    });
    expect(rangePieces(from, to, "day")).toEqual(rangePieces(from, to));
    expect(rangePieces(from, to, "hour")).toEqual({
      views: [
        [from, MIDNIGHT - 2 * HOUR],
        [MIDNIGHT + 3 * DAY + HOUR, to],
      ],
      hours: [[MIDNIGHT - 2 * HOUR, MIDNIGHT + 3 * DAY + HOUR]],
      days: [],
    });
    expect(rangePieces(MIDNIGHT, MIDNIGHT + DAY)).toEqual({
      views: [],
      hours: [],
      days: [[MIDNIGHT, MIDNIGHT + DAY]],
    });
  });

  it("covers the range exactly once, each piece aligned to what it is read from", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10 * DAY }),
        fc.integer({ min: 1, max: 90 * DAY }),
        fc.constantFrom(undefined, "hour" as const, "day" as const),
        (offset, length, interval) => {
          const from = MIDNIGHT + offset;
          const to = from + length;
          const { views, hours, days } = rangePieces(from, to, interval);
          const all = [...views, ...hours, ...days].sort(([a], [b]) => a - b);
          expect(all[0]?.[0]).toBe(from);
          expect(all.at(-1)?.[1]).toBe(to);
          for (const [i, [a, b]] of all.entries()) {
            expect(a).toBeLessThan(b);
            if (i > 0) expect(a).toBe(all[i - 1]?.[1]);
          }
          for (const [a, b] of hours) expect([a % HOUR, b % HOUR]).toEqual([0, 0]);
          for (const [a, b] of days) expect([a % DAY, b % DAY]).toEqual([0, 0]);
          // Views only where no whole hour fits: the partial hours at the edges.
          for (const [a, b] of views) expect(Math.ceil(a / HOUR) * HOUR + HOUR).toBeGreaterThan(b);
          if (interval === "hour") expect(days).toEqual([]);
        },
      ),
      { seed: 29, numRuns: 500 },
    );
  });
});

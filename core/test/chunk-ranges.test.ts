import { chunkRanges } from "@vod/core";
import { describe, expect, it } from "vitest";

describe("chunkRanges", () => {
  it("cuts a source into chunks of the given length, the last one open to the end", () => {
    expect(chunkRanges(95_000, 30, 3)).toEqual([
      { startMs: 0, endMs: 30_000 },
      { startMs: 30_000, endMs: 60_000 },
      // 5 s left, less than a segment: joined to the last chunk, whose end is the source's.
      { startMs: 60_000, endMs: null },
    ]);
    expect(chunkRanges(18_000, 6, 3)).toEqual([
      { startMs: 0, endMs: 6_000 },
      { startMs: 6_000, endMs: 12_000 },
      { startMs: 12_000, endMs: null },
    ]);
    expect(chunkRanges(300_000, 30, 3)).toHaveLength(10);
  });

  it("leaves a source of fewer chunks than asked, or of unknown length, to one job", () => {
    expect(chunkRanges(17_000, 6, 3)).toBeUndefined();
    expect(chunkRanges(65_000, 30, 3)).toBeUndefined();
    expect(chunkRanges(null, 30, 3)).toBeUndefined();
    // A single chunk is no chunking at all, whatever the minimum.
    expect(chunkRanges(20_000, 30, 1)).toBeUndefined();
  });
});

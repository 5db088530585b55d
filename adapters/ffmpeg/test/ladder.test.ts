import { defaultLadder, planRenditions } from "@vod/adapter-ffmpeg";
import { describe, expect, it } from "vitest";

const plan = (width: number, height: number) =>
  planRenditions(defaultLadder, { width, height }).map((p) => [p.rendition.name, p.width, p.height]);

describe("planRenditions", () => {
  it("keeps the rungs at or below the source height, never upscaling", () => {
    expect(plan(1920, 1080)).toEqual([
      ["1080p", 1920, 1080],
      ["720p", 1280, 720],
      ["480p", 854, 480],
      ["360p", 640, 360],
      ["240p", 426, 240],
    ]);
    expect(plan(640, 360)).toEqual([
      ["360p", 640, 360],
      ["240p", 426, 240],
    ]);
    expect(plan(1000, 700).map(([name]) => name)).toEqual(["480p", "360p", "240p"]);
  });

  it("keeps the display aspect ratio of a portrait source, widths even", () => {
    expect(plan(1080, 1920)[0]).toEqual(["1080p", 608, 1080]);
  });

  it("makes one rendition at the source's own height when every rung is taller", () => {
    expect(plan(320, 180)).toEqual([["180p", 320, 180]]);
    expect(plan(321, 181)).toEqual([["180p", 320, 180]]);
    const [only] = planRenditions(defaultLadder, { width: 320, height: 180 });
    expect(only?.rendition).toEqual({
      name: "180p",
      height: 180,
      videoBitrateKbps: 400,
      audioBitrateKbps: 128,
    });
  });

  it("throws on a ladder whose names are not plain, unique directory names", () => {
    const rung = { height: 360, videoBitrateKbps: 800, audioBitrateKbps: 128 };
    for (const name of ["../up", "audio", "a/b", ""]) {
      expect(() => planRenditions([{ ...rung, name }], { width: 640, height: 360 })).toThrow();
    }
    expect(() =>
      planRenditions(
        [
          { ...rung, name: "x" },
          { ...rung, name: "x" },
        ],
        { width: 640, height: 360 },
      ),
    ).toThrow();
  });
});

import type { PlannedRendition, Rendition } from "@vod/core";

/** The platform's ladder lives in the core (it decides what is made); re-exported for callers here. */
export { defaultLadder, type PlannedRendition } from "@vod/core";

const even = (n: number): number => Math.max(2, Math.round(n / 2) * 2);

/** Rendition names become directory names beside `audio/`, so they are kept to a safe alphabet. */
const safeName = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;

/**
 * The rungs at or below the source's height, tallest first, widths keeping the display aspect ratio.
 * A source shorter than every rung gets one rendition at its own height (rounded down to even) with
 * the bitrates of the smallest rung. Throws on a ladder that names no directory safely.
 */
export const planRenditions = (
  ladder: ReadonlyArray<Rendition>,
  source: { readonly width: number; readonly height: number },
): ReadonlyArray<PlannedRendition> => {
  if (ladder.length === 0) throw new Error("The ladder has no rungs");
  const names = new Set<string>();
  for (const rung of ladder) {
    if (!safeName.test(rung.name) || rung.name === "audio" || names.has(rung.name)) {
      throw new Error(`Rendition name "${rung.name}" is not a unique, plain directory name`);
    }
    if (!(Number.isInteger(rung.height) && rung.height > 0)) throw new Error(`Bad height in ${rung.name}`);
    names.add(rung.name);
  }
  const aspect = source.width / source.height;
  const widthFor = (height: number) => even(height * aspect);
  const tallestFirst = [...ladder].sort((a, b) => b.height - a.height);
  const heights = new Set<number>();
  const fitting = tallestFirst.filter((rung) => {
    const height = even(rung.height);
    if (height > source.height || heights.has(height)) return false;
    heights.add(height);
    return true;
  });
  if (fitting.length > 0) {
    return fitting.map((rendition) => ({
      rendition,
      width: widthFor(even(rendition.height)),
      height: even(rendition.height),
    }));
  }
  const smallest = tallestFirst[tallestFirst.length - 1]!;
  const height = Math.max(2, Math.floor(source.height / 2) * 2);
  const name = `${height}p`;
  return [
    {
      rendition: { ...smallest, name: names.has(name) ? `${name}-source` : name, height },
      width: widthFor(height),
      height,
    },
  ];
};

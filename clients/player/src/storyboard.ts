/** One tile of the storyboard: the time span it shows and where it is in the sprite sheet. */
export interface StoryboardCue {
  readonly start: number;
  readonly end: number;
  /** The sprite sheet, resolved against the WebVTT's URL. */
  readonly image: string;
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
}

const seconds = (stamp: string) => {
  const parts = stamp.trim().split(":").map(Number);
  return parts.reduce((total, part) => total * 60 + part, 0);
};

/**
 * The cues of `storyboard.vtt` (docs/playback.md "Images"): each `start --> end` line followed by
 * `storyboard.jpg#xywh=x,y,w,h`. Cues of another form are skipped.
 */
export const parseStoryboard = (text: string, baseUrl: string): StoryboardCue[] => {
  const cues: StoryboardCue[] = [];
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const timing = /^\s*([\d:.]+)\s+-->\s+([\d:.]+)/.exec(lines[i] as string);
    if (!timing) continue;
    const target = lines[i + 1]?.trim() ?? "";
    const xywh = /^(.*)#xywh=(\d+),(\d+),(\d+),(\d+)$/.exec(target);
    if (!xywh) continue;
    cues.push({
      start: seconds(timing[1] as string),
      end: seconds(timing[2] as string),
      image: new URL(xywh[1] as string, baseUrl).href,
      x: Number(xywh[2]),
      y: Number(xywh[3]),
      width: Number(xywh[4]),
      height: Number(xywh[5]),
    });
  }
  return cues;
};

/** The cue showing `time`, or the last one before it. */
export const cueAt = (cues: ReadonlyArray<StoryboardCue>, time: number): StoryboardCue | undefined => {
  let found: StoryboardCue | undefined;
  for (const cue of cues) {
    if (cue.start > time) break;
    found = cue;
  }
  return found;
};

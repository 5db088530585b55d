import { type TextTrackCue, type TextTrackReader, TextTrackRejected } from "@vod/core";
import { Effect } from "effect";
import * as mediaCaptions from "media-captions";

/**
 * What is used of `media-captions`. Its type declarations re-export without file extensions,
 * which NodeNext resolution does not follow, so they are restated here.
 */
interface MediaCaptions {
  parseText(
    text: string,
    options: { readonly strict: boolean; readonly type: "vtt" },
  ): Promise<{ readonly errors: ReadonlyArray<{ readonly line: number; readonly message: string }> }>;
  readonly ParseError: new (...args: never[]) => Error & { readonly line: number };
}
const { parseText, ParseError } = mediaCaptions as unknown as MediaCaptions;

const SIGNATURE = /^WEBVTT(?:[ \t]|$)/;
/** Blocks of a WebVTT file that are no cue: comments, style sheets, regions. */
const NOT_A_CUE = /^(?:NOTE|STYLE|REGION)(?:[ \t]|$)/;
const VTT_TIME = String.raw`((?:\d{2,}:)?[0-5]\d:[0-5]\d\.\d{3})`;
const VTT_TIMING = new RegExp(String.raw`^${VTT_TIME}[ \t]+-->[ \t]+${VTT_TIME}(?:[ \t]+(.*))?$`);
/** SubRip: a comma before the milliseconds (a dot is common enough), hours always; coordinates after are dropped. */
const SRT_TIME = String.raw`(\d+:[0-5]\d:[0-5]\d[,.]\d{1,3})`;
const SRT_TIMING = new RegExp(String.raw`^${SRT_TIME}[ \t]*-->[ \t]*${SRT_TIME}(?:[ \t].*)?$`);

const reject = (line: number, message: string) => new TextTrackRejected({ line, message });

const millisecondsOf = (time: string): number => {
  const [clock = "", fraction = "0"] = time.split(/[,.]/);
  const parts = clock.split(":").map(Number);
  const seconds = parts.reduce((total, p) => total * 60 + p, 0);
  return seconds * 1000 + Number(fraction.padEnd(3, "0"));
};

const pad = (n: number, width = 2) => String(n).padStart(width, "0");
const timestamp = (ms: number) =>
  `${pad(Math.floor(ms / 3_600_000))}:${pad(Math.floor(ms / 60_000) % 60)}:${pad(Math.floor(ms / 1000) % 60)}.${pad(ms % 1000, 3)}`;

interface Block {
  /** The line number of its first line, from 1. */
  readonly line: number;
  readonly lines: ReadonlyArray<string>;
}

/** The text's blocks: runs of lines between blank ones. */
const blocksOf = (lines: ReadonlyArray<string>): Block[] => {
  const blocks: Block[] = [];
  let current: string[] = [];
  let start = 0;
  lines.forEach((line, i) => {
    if (line.trim() === "") {
      if (current.length > 0) blocks.push({ line: start + 1, lines: current });
      current = [];
    } else {
      if (current.length === 0) start = i;
      current.push(line);
    }
  });
  if (current.length > 0) blocks.push({ line: start + 1, lines: current });
  return blocks;
};

/**
 * A cue block as WebVTT, or the problem with its line. Cue text goes as it is, but for `-->`,
 * which would end a WebVTT cue: SubRip text may hold it, escaped then as WebVTT escapes `>`.
 */
const cueOf = (block: Block, srt: boolean): TextTrackCue | TextTrackRejected => {
  const at = block.lines[0]!.includes("-->") ? 0 : 1;
  const timing = block.lines[at];
  if (timing === undefined || !timing.includes("-->"))
    return reject(
      block.line,
      srt ? "expected a SubRip cue: a number, then start --> end" : "expected a cue timing line",
    );
  const line = block.line + at;
  const matched = (srt ? SRT_TIMING : VTT_TIMING).exec(timing.trim());
  if (!matched)
    return reject(
      line,
      srt
        ? "not a SubRip timing line (HH:MM:SS,mmm --> HH:MM:SS,mmm)"
        : "not a WebVTT timing line ([HH:]MM:SS.mmm --> [HH:]MM:SS.mmm)",
    );
  const startMs = millisecondsOf(matched[1]!);
  const endMs = millisecondsOf(matched[2]!);
  if (endMs <= startMs) return reject(line, "the cue ends before it starts");
  const settings = srt ? "" : (matched[3]?.trim() ?? "");
  const payload = block.lines.slice(at + 1).map((l) => (srt ? l.replaceAll("-->", "--&gt;") : l));
  const id = at === 1 ? [block.lines[0]!] : [];
  const head = `${timestamp(startMs)} --> ${timestamp(endMs)}${settings === "" ? "" : ` ${settings}`}`;
  return { startMs, endMs, block: [...id, head, ...payload].join("\n") };
};

/**
 * What the WebVTT parser of `media-captions` (a spec-following parser with line numbers) says of
 * a file: its first error, if any. It is lenient where the spec lets a player skip a cue (one
 * ending before it starts is dropped): `cueOf` refuses those itself.
 */
const webVttProblem = async (text: string): Promise<TextTrackRejected | undefined> => {
  try {
    const { errors } = await parseText(text, { strict: true, type: "vtt" });
    const [first] = errors;
    return first === undefined ? undefined : reject(first.line, first.message);
  } catch (e) {
    // Whatever else it throws is about the input too: a client's file must not make a 500.
    return e instanceof ParseError ? reject(e.line, e.message) : reject(1, "unreadable WebVTT");
  }
};

/**
 * The TextTrackReader port on `media-captions`. WebVTT is told by its signature; anything else
 * is read as SubRip, whose format has no signature: a file that is neither fails at its first
 * line that is no SubRip cue.
 */
export const webVttTextTrackReader = (): TextTrackReader => ({
  read: (content) =>
    Effect.flatMap(
      Effect.promise(async () => {
        const text = content.replace(/^\uFEFF/, "").replace(/\r\n?/g, "\n");
        const lines = text.split("\n");
        const srt = !SIGNATURE.test(lines[0] ?? "");
        if (!srt) {
          const problem = await webVttProblem(text);
          if (problem) return problem;
        }
        const blocks = blocksOf(lines).slice(srt ? 0 : 1);
        const cues: TextTrackCue[] = [];
        for (const block of blocks) {
          if (!srt && NOT_A_CUE.test(block.lines[0]!)) continue;
          const cue = cueOf(block, srt);
          if (cue instanceof TextTrackRejected) return cue;
          cues.push(cue);
        }
        if (srt && cues.length === 0)
          return reject(1, "neither WebVTT (no WEBVTT signature) nor SubRip (no cue)");
        return cues;
      }),
      (read) => (read instanceof TextTrackRejected ? Effect.fail(read) : Effect.succeed(read)),
    ),
});

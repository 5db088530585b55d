import { Data, type Effect } from "effect";

/** One cue of a text track, its times in milliseconds. */
export interface TextTrackCue {
  readonly startMs: number;
  readonly endMs: number;
  /**
   * The cue as a WebVTT cue block: its identifier line when it has one, the timing line (with
   * its settings) and the payload, no blank line inside.
   */
  readonly block: string;
}

/** Why a text track's content was refused: the first problem found, by its line (from 1). */
export class TextTrackRejected extends Data.TaggedError("TextTrackRejected")<{
  readonly line: number;
  readonly message: string;
}> {}

/** Reads the caption formats a text track may be uploaded in. */
export interface TextTrackReader {
  /**
   * The cues of `content`, WebVTT or SRT (told by its signature: WebVTT starts with `WEBVTT`),
   * in the file's order, each as a WebVTT cue block; or the first line that makes it neither.
   * NOTE, STYLE and REGION blocks are not kept. An SRT file without a cue is refused.
   */
  read(content: string): Effect.Effect<ReadonlyArray<TextTrackCue>, TextTrackRejected>;
}

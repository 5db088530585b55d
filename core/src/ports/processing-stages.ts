import { Clock, Context, Effect } from "effect";

/** A step of a processing job, as the job's log names it. */
export type ProcessingStageName =
  | "probe"
  /** The source copied from the object store to the worker's disk. */
  | "fetch"
  /** One ffmpeg run making the renditions of a unit (or one chunk of them). */
  | "encode"
  /** The chunks of a unit joined, without re-encoding. */
  | "join"
  | "poster"
  /** Shaka Packager: the fMP4 HLS of a unit, encrypted for DRM assets. */
  | "package"
  /** The packaged files written to the object store. */
  | "upload";

export interface ProcessingStage {
  readonly stage: ProcessingStageName;
  readonly ms: number;
  /** The renditions the stage made, when it is theirs. */
  readonly renditions?: ReadonlyArray<string>;
  /** What an upload stored. */
  readonly files?: number;
  readonly bytes?: number;
}

/**
 * Told each stage of a processing job as it ends, with its time: where a job's time went. The
 * host logs them at info with the job's own fields; by default they go nowhere, so the core and
 * adapters time their stages without knowing of a logger.
 */
export class ProcessingStages extends Context.Reference<ProcessingStages>()("@vod/core/ProcessingStages", {
  defaultValue: (): { readonly ended: (stage: ProcessingStage) => void } => ({ ended: () => undefined }),
}) {}

/**
 * `effect` timed as `stage` by Effect's clock (wall time, not the platform's `Clock` port, which
 * tests stop): told to `ProcessingStages` once it succeeds.
 */
export const timedStage =
  (stage: ProcessingStageName, fields: Omit<ProcessingStage, "stage" | "ms"> = {}) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.flatMap(Clock.currentTimeMillis, (started) =>
      Effect.tap(effect, () =>
        Effect.flatMap(Clock.currentTimeMillis, (ended) =>
          Effect.flatMap(ProcessingStages, (stages) =>
            Effect.sync(() => stages.ended({ stage, ms: ended - started, ...fields })),
          ),
        ),
      ),
    );

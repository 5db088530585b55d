import { Data, Effect } from "effect";
import type { AssetId, TenantId, UploadId } from "../domain/ids.js";
import type { StorageError } from "../errors.js";

/** The jobs of the platform, by name, with their data. */
export interface JobTypes {
  /** `upload_id`: the completed upload whose parts' declared sha256s processing checks. */
  readonly "process-asset": {
    readonly tenant_id: TenantId;
    readonly asset_id: AssetId;
    readonly upload_id?: UploadId;
  };
  /**
   * One chunk of a long source, `[start_ms, end_ms)` (`end_ms` null: to the end), encoded into
   * each rendition of `unit` (rendition names), chunk `index` of `count`.
   */
  readonly "encode-chunk": ChunkOfUnit & {
    readonly index: number;
    readonly start_ms: number;
    readonly end_ms: number | null;
  };
  /** The `count` chunks of each rendition of `unit` joined, with the source's audio packaged. */
  readonly "package-chunks": ChunkOfUnit;
  /**
   * An asset's static renditions brought in line with its `mp4_support`: those missing made from
   * its packaged renditions (`standard`), or every one removed (`none`).
   */
  readonly "static-renditions": { readonly tenant_id: TenantId; readonly asset_id: AssetId };
  /**
   * A deleted asset's objects (origin, renditions, chunks) and the parts of the uploads that were open
   * when it was deleted, removed from the object store; its playback sessions revoked again.
   */
  readonly "delete-asset": {
    readonly tenant_id: TenantId;
    readonly asset_id: AssetId;
    readonly upload_ids: ReadonlyArray<UploadId>;
  };
  /**
   * A deleted tenant's data: the parts of its open uploads aborted, every object under its
   * prefixes removed, every row of it in every table (and its telemetry) deleted.
   */
  readonly "delete-tenant": { readonly tenant_id: TenantId };
  /** One attempt at a webhook delivery, the one after `attempts` earlier ones. */
  readonly "deliver-webhook": {
    readonly tenant_id: TenantId;
    readonly delivery_id: string;
    readonly attempts: number;
  };
  /**
   * A mail with a link: to verify the user's email, or to reset the password of the account of
   * `email` if there is one (looked up here, not in the request, which answers alike either way).
   */
  readonly "send-account-mail":
    | { readonly purpose: "verify_email"; readonly tenant_id: TenantId; readonly user_id: string }
    | { readonly purpose: "reset_password"; readonly email: string };
}

/** What the jobs of a chunked unit of renditions share. */
export interface ChunkOfUnit {
  readonly tenant_id: TenantId;
  readonly asset_id: AssetId;
  readonly upload_id?: UploadId;
  readonly unit: ReadonlyArray<string>;
  readonly count: number;
  /**
   * Whether the probed source has audio, so that packaging need not probe (on a bucket, read)
   * the source again. Absent on jobs enqueued before it was carried: then packaging probes.
   */
  readonly has_audio?: boolean;
}

/** Every job name, for queues that declare theirs up front. */
export const jobNames: ReadonlyArray<JobName> = [
  "process-asset",
  "encode-chunk",
  "package-chunks",
  "static-renditions",
  "delete-asset",
  "delete-tenant",
  "deliver-webhook",
  "send-account-mail",
];
export type JobName = keyof JobTypes;

export interface Job<N extends JobName = JobName> {
  readonly id: string;
  readonly name: N;
  readonly data: JobTypes[N];
  /** 1 on the first run. */
  readonly attempt: number;
  /** Runs it gets in all: a failure on the last one is final. */
  readonly maxAttempts: number;
}

/** Enqueuing, as part of the unit of work: the job exists if and only if the transaction commits. */
export interface JobRepository {
  enqueue<N extends JobName>(
    name: N,
    data: JobTypes[N],
    options?: EnqueueOptions,
  ): Effect.Effect<void, StorageError>;
}

export interface EnqueueOptions {
  /** Not handed out before this many milliseconds from now (a retry's backoff). */
  readonly delayMs?: number;
  /**
   * Handed out before the due jobs of the same name with a lower one (default 0); among equals,
   * the oldest first.
   */
  readonly priority?: number;
}

/** Asks for the job to be run again later (with backoff), or, on the last attempt, ends it. */
export class JobFailed extends Data.TaggedError("JobFailed")<{
  readonly message: string;
  readonly cause?: unknown;
}> {}

/**
 * A handler's run bounded by a queue's run limit: past `maxRunMs` it is interrupted (its
 * finalizers run, its tools are killed) and fails as an attempt, retried or, on the last, ended.
 * Every JobQueue adapter applies it the same way.
 */
export const limitRun = <E>(
  run: Effect.Effect<void, E>,
  maxRunMs: number,
): Effect.Effect<void, E | JobFailed> =>
  Effect.timeoutFail(run, {
    duration: maxRunMs,
    onTimeout: () => new JobFailed({ message: `ran longer than ${maxRunMs / 1000} s` }),
  });

export interface WorkOptions {
  /** Jobs of this name one worker runs at once. */
  readonly concurrency: number;
}

export interface Worker<N extends JobName = JobName> {
  /** Stops taking jobs and waits for the running ones to finish. */
  readonly stop: Effect.Effect<void>;
  /**
   * Stops taking jobs and waits up to `graceMs` for the running ones. Those still running then are
   * interrupted and released: due again at once, for any worker, on the attempt they had (a
   * shutdown is not the job's fault). Answers the released jobs.
   */
  drain(graceMs: number): Effect.Effect<ReadonlyArray<Job<N>>>;
}

/**
 * Runs enqueued jobs. Delivery is at least once: a job whose worker dies is handed out again
 * once its lease runs out, so handlers are idempotent. Several workers, in any number of
 * processes sharing the queue's storage, split the jobs between them.
 */
export interface JobQueue {
  work<N extends JobName>(
    name: N,
    options: WorkOptions,
    handler: (job: Job<N>) => Effect.Effect<void, JobFailed>,
  ): Effect.Effect<Worker<N>, StorageError>;
}

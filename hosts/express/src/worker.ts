import {
  type ChunkOutcome,
  type Job,
  type JobFailed,
  type JobQueue,
  type ProcessingOutcome,
  ProcessingStages,
  type Vod,
  type Worker,
} from "@vod/core";
import { sweepIdempotencyKeys } from "@vod/http";
import { Effect, Exit } from "effect";
import type { Logger } from "./logger.js";

/**
 * Deliveries one process sends at once: each waits on a remote endpoint (up to 10 s), not on
 * this machine, so several per process beside the processing jobs.
 */
const WEBHOOK_CONCURRENCY = 8;
/** Account mails one process sends at once: each waits on the mail server. */
const MAIL_CONCURRENCY = 4;

export interface RunningWorker {
  /**
   * Stops taking jobs and waits up to `graceMs` for the running ones; those still running then
   * are stopped and released, so that another worker takes them up at once rather than after
   * their lease.
   */
  stop(graceMs: number): Promise<void>;
}

/**
 * Runs processing jobs, deleted assets' object removal, webhook deliveries and account mail, and now and then
 * closes upload sessions past their expiry. The same code runs inside the host (embedded default)
 * or alone (`vod worker`).
 */
export const startWorker = async (
  vod: Vod,
  queue: JobQueue,
  options: { readonly concurrency: number; readonly sweepEveryMs?: number; readonly logger: Logger },
): Promise<RunningWorker> => {
  const log = options.logger.child({ component: "worker" });
  const metrics = vod.ports.metrics;
  /**
   * The processing jobs' workers, each logged under its own word: a whole asset (`processing`),
   * one chunk of a long source (`chunk`), a unit's chunks joined and packaged (`packaging`), an
   * asset's static MP4 renditions remuxed or removed (`static renditions`).
   */
  type ProcessingJob = "process-asset" | "encode-chunk" | "package-chunks" | "static-renditions";
  const processing: Array<{ readonly word: string; readonly worker: Worker<ProcessingJob> }> = [];
  const stopProcessing = () => Effect.runPromise(Effect.all(processing.map((p) => p.worker.stop)));
  const processingWork = async <N extends ProcessingJob>(
    name: N,
    word: string,
    run: (job: Job<N>) => Effect.Effect<ProcessingOutcome | ChunkOutcome, JobFailed>,
    fields: (job: Job<N>) => object = () => ({}),
  ) => {
    const worker = await Effect.runPromise(
      queue.work(name, { concurrency: options.concurrency }, (job) => {
        const started = Date.now();
        const context = { job_id: job.id, asset_id: job.data.asset_id, attempt: job.attempt, ...fields(job) };
        log.info(context, `${word} started`);
        metrics?.processingStarted();
        return run(job).pipe(
          // Where the time goes: each stage (probe, fetch, encode, package, upload…) at info.
          Effect.provideService(ProcessingStages, {
            ended: ({ stage, ms, ...fields }) =>
              log.info({ ...context, stage, ms, ...fields }, `${word} ${stage} took ${ms} ms`),
          }),
          // The outcome named as it is: a job that failed its asset did not finish "done".
          Effect.tap((outcome) =>
            Effect.sync(() => {
              const ms = Date.now() - started;
              if (outcome.status === "failed")
                // processing_error is ours (retries exhausted); the other codes are the media's.
                log[outcome.failure_code === "processing_error" ? "warn" : "info"](
                  { ...context, ms, failure_code: outcome.failure_code, reason: outcome.reason },
                  `${word} failed`,
                );
              else
                log.info(
                  { ...context, ms },
                  `${word} ${outcome.status === "ready" ? "done" : outcome.status}`,
                );
            }),
          ),
          // Once per run whatever its end: an interrupted run is one drain released to another worker.
          Effect.onExit((exit) =>
            Effect.sync(() =>
              metrics?.processingEnded(
                Exit.isSuccess(exit) ? exit.value.status : Exit.isInterrupted(exit) ? "released" : "retry",
                (Date.now() - started) / 1000,
              ),
            ),
          ),
          Effect.asVoid,
          Effect.tapError((e) =>
            Effect.sync(() => log.warn({ ...context, err: e.message }, `${word} attempt failed`)),
          ),
        );
      }),
    );
    processing.push({ word, worker });
  };
  const chunkFields = (job: Job<"encode-chunk" | "package-chunks">) => ({
    unit: job.data.unit.join(","),
    ...("index" in job.data ? { chunk: job.data.index } : {}),
    chunks: job.data.count,
  });
  try {
    await processingWork("process-asset", "processing", vod.processing.processAsset);
    await processingWork("encode-chunk", "chunk", vod.processing.encodeChunk, chunkFields);
    await processingWork("package-chunks", "packaging", vod.processing.packageChunks, chunkFields);
    await processingWork("static-renditions", "static renditions", vod.staticRenditions.run);
  } catch (error) {
    await stopProcessing();
    throw error;
  }
  // Removing objects is quick and mostly waits on the store: a few at once beside processing.
  const deletions = await Effect.runPromise(
    queue.work("delete-asset", { concurrency: Math.max(2, options.concurrency) }, (job) =>
      vod.assets.removeObjects(job).pipe(
        Effect.tap(() =>
          Effect.sync(() =>
            log.info({ job_id: job.id, asset_id: job.data.asset_id }, "asset objects removed"),
          ),
        ),
        Effect.tapError((e) =>
          Effect.sync(() =>
            log.warn(
              { job_id: job.id, asset_id: job.data.asset_id, attempt: job.attempt, err: e.message },
              "asset object removal failed",
            ),
          ),
        ),
      ),
    ),
  ).catch(async (error: unknown) => {
    await stopProcessing();
    throw error;
  });
  // One tenant at a time: a deletion is rare, and its statements and object listings are long.
  const tenantDeletions = await Effect.runPromise(
    queue.work("delete-tenant", { concurrency: 1 }, (job) =>
      vod.tenants.removeData(job).pipe(
        Effect.tap(() =>
          Effect.sync(() =>
            log.info({ job_id: job.id, tenant_id: job.data.tenant_id }, "tenant data removed"),
          ),
        ),
        Effect.tapError((e) =>
          Effect.sync(() =>
            log.warn(
              { job_id: job.id, tenant_id: job.data.tenant_id, attempt: job.attempt, err: e.message },
              "tenant data removal failed",
            ),
          ),
        ),
      ),
    ),
  ).catch(async (error: unknown) => {
    await Promise.all([stopProcessing(), Effect.runPromise(deletions.stop)]);
    throw error;
  });
  const deliveries = await Effect.runPromise(
    queue.work("deliver-webhook", { concurrency: WEBHOOK_CONCURRENCY }, (job) => {
      const context = { job_id: job.id, delivery_id: job.data.delivery_id, attempt: job.data.attempts + 1 };
      return vod.webhooks.deliver(job).pipe(
        // Where a delivery's result is known: the log line here, and metrics beside it.
        Effect.tap((outcome) =>
          Effect.sync(() => {
            if (outcome.status === "skipped") return;
            const { result } = outcome;
            metrics?.webhookDelivered(outcome.status);
            const fields = { ...context, status_code: result.statusCode, err: result.error };
            if (outcome.status === "succeeded") log.debug(fields, "webhook delivered");
            else
              log.info(
                fields,
                outcome.status === "failed" ? "webhook delivery failed" : "webhook delivery retrying",
              );
          }),
        ),
        Effect.asVoid,
        Effect.tapError((e) =>
          Effect.sync(() => log.warn({ ...context, err: e.message }, "webhook delivery attempt failed")),
        ),
      );
    }),
  ).catch(async (error: unknown) => {
    await Promise.all([
      stopProcessing(),
      Effect.runPromise(Effect.all([deletions.stop, tenantDeletions.stop])),
    ]);
    throw error;
  });
  const mails = await Effect.runPromise(
    queue.work("send-account-mail", { concurrency: MAIL_CONCURRENCY }, (job) => {
      const context = { job_id: job.id, purpose: job.data.purpose, attempt: job.attempt };
      return vod.accountMail.sendAccountMail(job).pipe(
        Effect.tap((outcome) =>
          Effect.sync(() => {
            metrics?.accountMailSent(outcome.status);
            if (outcome.status === "sent")
              log.info({ ...context, user_id: outcome.user_id }, "account mail sent");
            else log.debug(context, "account mail skipped");
          }),
        ),
        Effect.asVoid,
        // Retried with backoff; the last failure is the one an operator must see.
        Effect.tapError((e) =>
          Effect.sync(() => {
            const last = job.attempt >= job.maxAttempts;
            metrics?.accountMailSent(last ? "failed" : "retrying");
            if (last) log.error({ ...context, err: e.message }, "account mail not sent; no attempt left");
            else log.warn({ ...context, err: e.message }, "account mail attempt failed");
          }),
        ),
      );
    }),
  ).catch(async (error: unknown) => {
    await Promise.all([
      stopProcessing(),
      Effect.runPromise(Effect.all([deletions.stop, tenantDeletions.stop, deliveries.stop])),
    ]);
    throw error;
  });
  const sweep = async () => {
    const closed = await Effect.runPromise(Effect.either(vod.uploads.sweepExpired()));
    if (closed._tag === "Left") log.warn({ err: closed.left.message }, "expired-upload sweep failed");
    else if (closed.right > 0) log.info({ closed: closed.right }, "expired uploads closed");
    const forgotten = await Effect.runPromise(Effect.either(sweepIdempotencyKeys(vod)));
    if (forgotten._tag === "Left")
      log.warn({ err: forgotten.left.message }, "idempotency key cleanup failed");
    else if (forgotten.right > 0) log.info({ deleted: forgotten.right }, "expired idempotency keys deleted");
    const swept = await Effect.runPromise(Effect.either(vod.analytics.sweepRawEvents()));
    if (swept._tag === "Left") log.warn({ err: swept.left.message }, "telemetry retention sweep failed");
    else if (swept.right > 0) log.info({ deleted: swept.right }, "telemetry events past retention deleted");
    const tokens = await Effect.runPromise(Effect.either(vod.accounts.sweepExpiredTokens()));
    if (tokens._tag === "Left") log.warn({ err: tokens.left.message }, "expired token sweep failed");
    else if (tokens.right.emailTokens + tokens.right.refreshTokens > 0)
      log.info(tokens.right, "expired email and refresh tokens deleted");
  };
  const timer = setInterval(() => void sweep(), options.sweepEveryMs ?? 10 * 60_000);
  timer.unref();
  void sweep();
  log.info({ concurrency: options.concurrency }, "worker started");
  return {
    stop: async (graceMs) => {
      clearInterval(timer);
      const [released] = await Promise.all([
        Promise.all(processing.map((p) => Effect.runPromise(p.worker.drain(graceMs)))),
        Effect.runPromise(deletions.drain(graceMs)),
        Effect.runPromise(tenantDeletions.drain(graceMs)),
        Effect.runPromise(deliveries.drain(graceMs)),
        Effect.runPromise(mails.drain(graceMs)),
      ]);
      released.forEach((jobs, i) => {
        for (const job of jobs)
          log.info(
            { job_id: job.id, asset_id: job.data.asset_id, attempt: job.attempt, grace_ms: graceMs },
            `${processing[i]?.word} released`,
          );
      });
      log.info("worker stopped");
    },
  };
};

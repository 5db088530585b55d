import type { Job, JobFailed, JobName, JobQueue, Worker } from "@vod/core";
import { Deferred, Effect, Exit } from "effect";
import type { MemoryJob, MemoryState } from "./state.js";

export interface MemoryJobQueueOptions {
  /** Runs a job gets in all (default 3). */
  readonly maxAttempts?: number;
  /** Backoff before the second run; doubled for each further run (default 1 s). */
  readonly retryDelayMs?: number;
  /** How long a running job is presumed alive (default 15 min). */
  readonly leaseMs?: number;
  /** How often idle workers look for work (default 50 ms). */
  readonly pollMs?: number;
}

/**
 * Jobs in the memory state that `memoryStorage` enqueues into, run in this process: retries with
 * exponential backoff, and leases, so a job whose run never finished is handed out again.
 */
export const memoryJobQueue = (state: MemoryState, options: MemoryJobQueueOptions = {}): JobQueue => {
  const maxAttempts = options.maxAttempts ?? 3;
  const retryDelayMs = options.retryDelayMs ?? 1_000;
  const leaseMs = options.leaseMs ?? 15 * 60_000;
  const pollMs = options.pollMs ?? 50;

  const claim = (name: JobName, now: number): MemoryJob | undefined => {
    for (const job of state.jobs.values()) {
      const due = job.state === "queued" && job.runAfter <= now;
      const abandoned = job.state === "active" && job.leaseUntil <= now;
      if (job.name !== name || !(due || abandoned)) continue;
      if (abandoned && job.attempts >= maxAttempts) {
        state.jobs.set(job.id, { ...job, state: "failed", lastError: "lease expired on the last attempt" });
        continue;
      }
      const claimed: MemoryJob = {
        ...job,
        state: "active",
        attempts: job.attempts + 1,
        leaseUntil: now + leaseMs,
      };
      state.jobs.set(job.id, claimed);
      return claimed;
    }
    return undefined;
  };

  const settle = (job: MemoryJob, exit: Exit.Exit<void, JobFailed>) => {
    const now = Date.now();
    if (Exit.isSuccess(exit)) {
      state.jobs.set(job.id, { ...job, state: "completed", lastError: null });
      return;
    }
    const message = exit.cause.toString();
    state.jobs.set(
      job.id,
      job.attempts >= maxAttempts
        ? { ...job, state: "failed", lastError: message }
        : {
            ...job,
            state: "queued",
            runAfter: now + retryDelayMs * 2 ** (job.attempts - 1),
            lastError: message,
          },
    );
  };

  return {
    work: (name, { concurrency }, handler) =>
      Effect.sync((): Worker => {
        let stopping = false;
        let running = 0;
        const idle = Effect.runSync(Deferred.make<void>());
        const tick = () => {
          while (!stopping && running < concurrency) {
            const job = claim(name, Date.now());
            if (!job) break;
            running++;
            const view = { id: job.id, name, data: job.data, attempt: job.attempts, maxAttempts } as Job<
              typeof name
            >;
            void Effect.runPromiseExit(Effect.suspend(() => handler(view))).then((exit) => {
              settle(job, exit);
              running--;
              if (stopping && running === 0) Effect.runSync(Deferred.succeed(idle, undefined));
              else tick();
            });
          }
        };
        const timer = setInterval(tick, pollMs);
        timer.unref();
        tick();
        return {
          stop: Effect.suspend(() => {
            stopping = true;
            clearInterval(timer);
            return running === 0 ? Effect.void : Deferred.await(idle);
          }),
        };
      }),
  };
};

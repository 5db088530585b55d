import { type Job, type JobFailed, type JobName, type JobQueue, limitRun, type Worker } from "@vod/core";
import { Deferred, Effect, Exit, Fiber } from "effect";
import type { MemoryJob } from "./state.js";
import { type MemoryStorage, memoryState } from "./storage.js";

export interface MemoryJobQueueOptions {
  /** Runs a job gets in all (default 3). */
  readonly maxAttempts?: number;
  /** Backoff before the second run; doubled for each further run (default 1 s). */
  readonly retryDelayMs?: number;
  /**
   * How long a running job stays its worker's without a heartbeat (default 60 s). A live worker
   * renews it on every poll, so only a worker that stopped (see `halt`) loses its jobs.
   */
  readonly leaseMs?: number;
  /** The longest one run may take: it is then interrupted, a failed attempt (default 12 h). */
  readonly maxRunMs?: number;
  /** How often idle workers look for work (default 50 ms). */
  readonly pollMs?: number;
}

export interface MemoryJobQueue extends JobQueue {
  /**
   * Stops this queue's workers at once, as a killed process would stop: no more polls, no
   * heartbeats, and no outcome recorded for the runs in flight, whose jobs go back to the queue
   * when their leases run out. For tests of what another queue on the same state then does.
   */
  halt(): void;
}

/**
 * The jobs that `storage`'s transactions enqueue, run in this process: retries with exponential
 * backoff, and leases that live workers renew, so only a job whose worker stopped is
 * handed out again.
 */
export const memoryJobQueue = (
  storage: MemoryStorage,
  options: MemoryJobQueueOptions = {},
): MemoryJobQueue => {
  const state = storage[memoryState];
  const maxAttempts = options.maxAttempts ?? 3;
  const retryDelayMs = options.retryDelayMs ?? 1_000;
  const leaseMs = options.leaseMs ?? 60_000;
  const maxRunMs = options.maxRunMs ?? 12 * 60 * 60_000;
  const pollMs = options.pollMs ?? 50;
  let halted = false;
  const halts = new Set<() => void>();

  /** The due job of the highest priority, the oldest among equals (jobs are kept in enqueue order). */
  const claim = (name: JobName, now: number): MemoryJob | undefined => {
    let next: MemoryJob | undefined;
    for (const job of state.jobs.values()) {
      const due = job.state === "queued" && job.runAfter <= now;
      const abandoned = job.state === "active" && job.leaseUntil <= now;
      if (job.name !== name || !(due || abandoned)) continue;
      if (abandoned && job.attempts >= maxAttempts) {
        state.jobs.set(job.id, { ...job, state: "failed", lastError: "lease expired on the last attempt" });
        continue;
      }
      if (next === undefined || job.priority > next.priority) next = job;
    }
    if (next === undefined) return undefined;
    const claimed: MemoryJob = {
      ...next,
      state: "active",
      attempts: next.attempts + 1,
      leaseUntil: now + leaseMs,
    };
    state.jobs.set(next.id, claimed);
    return claimed;
  };

  /** The job as this run knows it, if it is still this run's (not handed out again since). */
  const held = (run: MemoryJob): MemoryJob | undefined => {
    const now = state.jobs.get(run.id);
    return now?.state === "active" && now.attempts === run.attempts ? now : undefined;
  };

  const renew = (run: MemoryJob) => {
    const job = held(run);
    if (job) state.jobs.set(job.id, { ...job, leaseUntil: Date.now() + leaseMs });
  };

  const settle = (run: MemoryJob, exit: Exit.Exit<void, JobFailed>, released: boolean) => {
    const job = held(run);
    if (!job) return;
    const now = Date.now();
    if (Exit.isSuccess(exit)) {
      state.jobs.set(job.id, { ...job, state: "completed", lastError: null });
      return;
    }
    // Cut short by `drain`: due again now, on the attempt it had.
    if (released) {
      state.jobs.set(job.id, { ...job, state: "queued", attempts: job.attempts - 1, runAfter: now });
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
    halt: () => {
      halted = true;
      for (const halt of halts) halt();
    },
    work: (name, { concurrency }, handler) =>
      Effect.sync((): Worker<typeof name> => {
        let stopping = halted;
        /** The runs in flight, and how to interrupt one so that its job is released. */
        const running = new Map<
          MemoryJob,
          { readonly view: Job<typeof name>; readonly release: () => Promise<boolean> }
        >();
        const idle = Effect.runSync(Deferred.make<void>());
        const tick = () => {
          if (halted) return;
          for (const job of running.keys()) renew(job);
          while (!stopping && running.size < concurrency) {
            const job = claim(name, Date.now());
            if (!job) break;
            const view = { id: job.id, name, data: job.data, attempt: job.attempts, maxAttempts } as Job<
              typeof name
            >;
            const fiber = Effect.runFork(
              limitRun(
                Effect.suspend(() => handler(view)),
                maxRunMs,
              ),
            );
            let releasing = false;
            running.set(job, {
              view,
              release: async () => {
                releasing = true;
                return !Exit.isSuccess(await Effect.runPromise(Fiber.interrupt(fiber)));
              },
            });
            void Effect.runPromise(Fiber.await(fiber)).then((exit) => {
              if (!halted) settle(job, exit, releasing);
              running.delete(job);
              if (stopping && running.size === 0) Effect.runSync(Deferred.succeed(idle, undefined));
              else tick();
            });
          }
        };
        const timer = setInterval(tick, pollMs);
        timer.unref();
        const halt = () => {
          stopping = true;
          clearInterval(timer);
        };
        halts.add(halt);
        tick();
        const stop = Effect.suspend(() => {
          halt();
          halts.delete(halt);
          return running.size === 0 || halted ? Effect.void : Deferred.await(idle);
        });
        return {
          stop,
          drain: (graceMs) =>
            Effect.gen(function* () {
              const finished = yield* Effect.timeout(stop, graceMs).pipe(Effect.option);
              if (finished._tag === "Some") return [];
              const runs = [...running.values()];
              const cut = yield* Effect.promise(() => Promise.all(runs.map((run) => run.release())));
              yield* stop;
              return runs.filter((_, i) => cut[i]).map((run) => run.view);
            }),
        };
      }),
  };
};

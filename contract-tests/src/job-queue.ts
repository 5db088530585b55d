import { type EnqueueOptions, type Job, JobFailed, type JobQueue, type Worker } from "@vod/core";
import { Effect } from "effect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { uid } from "./fixtures.js";

export interface JobQueueSubject {
  readonly queue: JobQueue;
  /** Enqueues a process-asset job the way the platform does (in a unit of work). */
  readonly enqueue: (assetId: string, options?: EnqueueOptions) => Promise<void>;
  /**
   * A queue on the same jobs as `queue`, as another process would have, and its death: its
   * workers stop at once, with no heartbeat and no outcome for the runs they hold.
   */
  readonly otherProcess: () => Promise<{ readonly queue: JobQueue; readonly die: () => Promise<void> }>;
  /** The subject's own timing: how long a lost job waits before it runs again, at most. */
  readonly leaseMs: number;
  /** The longest a run may take before its worker interrupts it. */
  readonly maxRunMs: number;
  /** Runs a job gets in all. */
  readonly maxAttempts: number;
  readonly cleanup: () => Promise<void>;
}

type Seen = { asset: string; attempt: number; maxAttempts: number };

const until = async (check: () => boolean, timeoutMs: number, what: string) => {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
};
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The JobQueue port: at-least-once delivery with retries and leases, checked with real time
 * (the subject's timings are short). Each test enqueues jobs for assets of its own and only
 * counts those.
 */
export const describeJobQueue = (name: string, makeSubject: () => Promise<JobQueueSubject>) =>
  describe(`JobQueue [${name}]`, () => {
    let subject: JobQueueSubject;
    const workers: Worker[] = [];
    beforeEach(async () => {
      subject = await makeSubject();
    });
    afterEach(async () => {
      await Promise.all(workers.splice(0).map((w) => Effect.runPromise(w.stop)));
      await subject.cleanup();
    });

    const work = async (
      handler: (job: Job<"process-asset">) => Effect.Effect<void, JobFailed>,
      concurrency = 1,
    ) => {
      const worker = await Effect.runPromise(subject.queue.work("process-asset", { concurrency }, handler));
      workers.push(worker);
      return worker;
    };
    const recorder = (mine: Set<string>) => {
      const seen: Seen[] = [];
      const record = (job: Job<"process-asset">) => {
        if (mine.has(job.data.asset_id))
          seen.push({ asset: job.data.asset_id, attempt: job.attempt, maxAttempts: job.maxAttempts });
      };
      /** Runs that got to their end: a handler from `taking` counts them. */
      const runs = { finished: 0 };
      /** A handler that records its job, takes `ms`, and counts the run as finished. */
      const taking = (ms: number) => (job: Job<"process-asset">) =>
        Effect.promise(async () => {
          record(job);
          await pause(ms);
          runs.finished++;
        });
      /** A handler that records its job and never ends: a run another process holds. */
      const hanging = (job: Job<"process-asset">) =>
        Effect.suspend(() => {
          record(job);
          return Effect.never;
        });
      return { seen, record, runs, taking, hanging };
    };

    it("runs each enqueued job once, with its data, on the first attempt", async () => {
      const assets = [uid("ast"), uid("ast"), uid("ast")];
      const { seen, record } = recorder(new Set(assets));
      await work((job) => Effect.sync(() => record(job)), 2);
      for (const asset of assets) await subject.enqueue(asset);
      await until(() => seen.length >= 3, 20_000, "three jobs");
      await pause(500);
      expect(seen.map((s) => s.asset).sort()).toEqual([...assets].sort());
      expect(seen.every((s) => s.attempt === 1 && s.maxAttempts === subject.maxAttempts)).toBe(true);
    });

    it("hands out the due job of the highest priority first, then the oldest", async () => {
      const [older, newer, urgent] = [uid("ast"), uid("ast"), uid("ast")];
      const { seen, record } = recorder(new Set([older, newer, urgent]));
      await subject.enqueue(older);
      await subject.enqueue(newer);
      await subject.enqueue(urgent, { priority: 1 });
      await work((job) => Effect.sync(() => record(job)), 1);
      await until(() => seen.length >= 3, 20_000, "three jobs");
      expect(seen.map((s) => s.asset)).toEqual([urgent, older, newer]);
    });

    it("runs a failed job again, with a higher attempt number, until it succeeds", async () => {
      const asset = uid("ast");
      const { seen, record } = recorder(new Set([asset]));
      await work((job) =>
        Effect.suspend(() => {
          record(job);
          return job.attempt === 1 ? Effect.fail(new JobFailed({ message: "transient" })) : Effect.void;
        }),
      );
      await subject.enqueue(asset);
      await until(() => seen.length >= 2, 30_000, "the second attempt");
      await pause(500);
      expect(seen.map((s) => s.attempt)).toEqual([1, 2]);
    });

    it("gives up after the last attempt", async () => {
      const asset = uid("ast");
      const { seen, record } = recorder(new Set([asset]));
      await work((job) =>
        Effect.suspend(() => {
          record(job);
          return Effect.fail(new JobFailed({ message: "always" }));
        }),
      );
      await subject.enqueue(asset);
      await until(() => seen.length >= subject.maxAttempts, 60_000, "every attempt");
      await pause(1_500);
      expect(seen.map((s) => s.attempt)).toEqual(
        Array.from({ length: subject.maxAttempts }, (_, i) => i + 1),
      );
    });

    it("hands the job of a worker that died to another worker once its lease ends", async () => {
      const asset = uid("ast");
      const { seen, record, hanging } = recorder(new Set([asset]));
      const other = await subject.otherProcess();
      let dead = false;
      try {
        // The dying process takes the first attempt and never finishes it.
        await Effect.runPromise(other.queue.work("process-asset", { concurrency: 1 }, hanging));
        await subject.enqueue(asset);
        await until(() => seen.length >= 1, 20_000, "the first attempt");
        await other.die();
        dead = true;
        await work((job) => Effect.sync(() => record(job)));
        await until(() => seen.length >= 2, subject.leaseMs + 30_000, "the job to run again");
        expect(seen.map((s) => s.attempt)).toEqual([1, 2]);
      } finally {
        if (!dead) await other.die();
      }
    }, 60_000);

    it("leaves a run that outlives its lease with its live worker, which renews it", async () => {
      const asset = uid("ast");
      const { seen, runs, taking } = recorder(new Set([asset]));
      const handler = taking(subject.leaseMs * 2);
      // A second worker stands by, free to take the job were its lease let go.
      await work(handler);
      await work(handler);
      await subject.enqueue(asset);
      await until(() => runs.finished >= 1, subject.leaseMs * 2 + 20_000, "the long run to finish");
      await pause(subject.leaseMs + 1_000);
      expect(seen.map((s) => s.attempt)).toEqual([1]);
      expect(runs.finished).toBe(1);
    }, 60_000);

    it("interrupts a run past the time limit and counts it as a failed attempt", async () => {
      const asset = uid("ast");
      const { seen, record } = recorder(new Set([asset]));
      let interrupted = 0;
      await work((job) =>
        Effect.suspend(() => {
          record(job);
          return job.attempt === 1
            ? Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => interrupted++)))
            : Effect.void;
        }),
      );
      await subject.enqueue(asset);
      await until(() => seen.length >= 2, subject.maxRunMs + 30_000, "the second attempt");
      expect(seen.map((s) => s.attempt)).toEqual([1, 2]);
      expect(interrupted).toBe(1);
    }, 60_000);

    it("releases a job still running when a drain's grace ends: due at once, on the attempt it had", async () => {
      const asset = uid("ast");
      const { seen, record, hanging } = recorder(new Set([asset]));
      const other = await subject.otherProcess();
      try {
        // The stopping process takes the first attempt, which outlasts its grace.
        const stopping = await Effect.runPromise(
          other.queue.work("process-asset", { concurrency: 1 }, hanging),
        );
        await subject.enqueue(asset);
        await until(() => seen.length >= 1, 20_000, "the first attempt");
        const released = await Effect.runPromise(stopping.drain(100));
        expect(released.map((job) => [job.data.asset_id, job.attempt])).toEqual([[asset, 1]]);
        // A lease that ran out would hand it out as attempt 2; a release keeps attempt 1.
        await work((job) => Effect.sync(() => record(job)));
        await until(() => seen.length >= 2, 20_000, "another worker to take it up");
        expect(seen.map((s) => s.attempt)).toEqual([1, 1]);
      } finally {
        await other.die();
      }
    });

    it("drains a worker whose runs end within the grace without releasing any", async () => {
      const asset = uid("ast");
      const { seen, runs, taking } = recorder(new Set([asset]));
      const worker = await work(taking(200));
      await subject.enqueue(asset);
      await until(() => seen.length >= 1, 20_000, "the job to start");
      expect(await Effect.runPromise(worker.drain(10_000))).toEqual([]);
      expect(runs.finished).toBe(1);
    });

    it("lets running jobs finish when a worker stops, and takes no more", async () => {
      const first = uid("ast");
      const second = uid("ast");
      const { seen, runs, taking } = recorder(new Set([first, second]));
      const worker = await work(taking(300));
      await subject.enqueue(first);
      await until(() => seen.length >= 1, 20_000, "the first job to start");
      await Effect.runPromise(worker.stop);
      expect(runs.finished).toBe(1);
      await subject.enqueue(second);
      await pause(1_500);
      expect(seen.map((s) => s.asset)).toEqual([first]);
    });
  });

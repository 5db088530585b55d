import type { Job, JobName, JobQueue, JobTypes, Worker } from "@vod/core";
import { StorageError } from "@vod/core";
import { Cause, Effect, Exit } from "effect";
import PgBoss from "pg-boss";
import type { Queryable, SqlDatabase } from "./sql.js";

/** pg-boss runs its SQL through our connection (pool, PGlite or an open transaction). */
const bossDb = (sql: Queryable) => ({
  executeSql: async (text: string, values?: unknown[]) => sql.query(text, values ?? []),
});

export interface PgBossQueueOptions {
  /** Runs a job gets in all (default 3). */
  readonly maxAttempts?: number;
  /** Seconds before the second run; doubled for each further run (default 10). */
  readonly retryDelaySeconds?: number;
  /**
   * How long a job may run before it is presumed lost (its worker died) and run again
   * (default 30 min). Longer than the longest processing run.
   */
  readonly leaseSeconds?: number;
  /** How often lost jobs are looked for (default 60 s). */
  readonly maintenanceSeconds?: number;
  /** How often an idle worker polls (default 1 s, at least 0.5). */
  readonly pollSeconds?: number;
}

export interface PgBossQueue extends JobQueue {
  /** Enqueues through `sql`: inside a transaction, the job commits or rolls back with it. */
  enqueueWith<N extends JobName>(sql: Queryable, name: N, data: JobTypes[N]): Promise<void>;
  /** Asks this process's idle workers of `name` to fetch now (a job was just committed). */
  wake(name: JobName): void;
  close(): Promise<void>;
}

const jobNames: ReadonlyArray<JobName> = ["process-asset"];

/**
 * The JobQueue on pg-boss, in the same database as the records, so a job is enqueued in the
 * transaction that makes it due. Any number of processes on the database share the queue.
 */
export const pgBossQueue = async (
  db: SqlDatabase,
  options: PgBossQueueOptions = {},
): Promise<PgBossQueue> => {
  const maxAttempts = options.maxAttempts ?? 3;
  const schema = `${db.schema ?? "vod"}_jobs`;
  const boss = new PgBoss({
    db: bossDb(db),
    schema,
    migrate: true,
    supervise: true,
    schedule: false,
    maintenanceIntervalSeconds: options.maintenanceSeconds ?? 60,
    monitorStateIntervalSeconds: options.maintenanceSeconds ?? 60,
  });
  const errors: unknown[] = [];
  boss.on("error", (error) => errors.push(error));
  await boss.start();
  for (const name of jobNames) {
    const queue = {
      name,
      retryLimit: maxAttempts - 1,
      retryDelay: options.retryDelaySeconds ?? 10,
      retryBackoff: true,
      expireInSeconds: options.leaseSeconds ?? 30 * 60,
    };
    if (await boss.getQueue(name)) await boss.updateQueue(name, queue);
    else await boss.createQueue(name, queue);
  }

  const local = new Map<JobName, Set<string>>();
  return {
    wake: (name) => {
      for (const id of local.get(name) ?? []) boss.notifyWorker(id);
    },
    enqueueWith: async (sql, name, data) => {
      await boss.send(name, data as object, { db: bossDb(sql) });
    },
    work: (name, { concurrency }, handler) =>
      Effect.tryPromise({
        try: async (): Promise<Worker> => {
          let running = 0;
          const run = async ([job]: PgBoss.JobWithMetadata<JobTypes[typeof name]>[]) => {
            if (!job) return;
            running++;
            try {
              const view = {
                id: job.id,
                name,
                data: job.data,
                attempt: job.retryCount + 1,
                maxAttempts,
              } as Job<typeof name>;
              const exit = await Effect.runPromiseExit(handler(view));
              // A thrown error tells pg-boss to retry (with backoff) or, on the last attempt, fail the job.
              if (Exit.isFailure(exit)) throw new Error(Cause.pretty(exit.cause));
            } finally {
              running--;
            }
          };
          const pollSeconds = Math.max(0.5, options.pollSeconds ?? 1);
          const ids = await Promise.all(
            Array.from({ length: concurrency }, () =>
              boss.work(
                name,
                { batchSize: 1, includeMetadata: true, pollingIntervalSeconds: pollSeconds },
                run,
              ),
            ),
          );
          const mine = local.get(name) ?? new Set<string>();
          local.set(name, mine);
          for (const id of ids) mine.add(id);
          return {
            // pg-boss's offWork only asks its workers to stop; a fetch in flight may still hand
            // one job over. Wait until nothing runs for a whole polling interval.
            stop: Effect.promise(async () => {
              for (const id of ids) mine.delete(id);
              await Promise.all(ids.map((id) => boss.offWork({ id })));
              for (;;) {
                while (running > 0) await new Promise((r) => setTimeout(r, 25));
                await new Promise((r) => setTimeout(r, pollSeconds * 1000 + 100));
                if (running === 0) return;
              }
            }),
          };
        },
        catch: (cause) => new StorageError({ message: "could not start job workers", cause }),
      }),
    close: () => boss.stop({ graceful: true, wait: true, close: false }),
  };
};

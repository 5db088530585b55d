import type { EnqueueOptions, Job, JobFailed, JobName, JobQueue, JobTypes, Worker } from "@vod/core";
import { jobNames, limitRun, StorageError } from "@vod/core";
import { Cause, Effect, Exit, Fiber } from "effect";
import PgBoss from "pg-boss";
import type { Queryable, SqlDatabase } from "./sql.js";
import { withStartupLock } from "./startup-lock.js";

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
   * How long a running job stays its worker's without a heartbeat (default 60 s): a job whose
   * worker died runs again once this has passed and maintenance has noticed. A live worker renews
   * it every quarter of it, so a run may take far longer.
   */
  readonly leaseSeconds?: number;
  /** The longest one run may take: it is then interrupted, a failed attempt (default 12 h). */
  readonly maxRunSeconds?: number;
  /** How often lost jobs are looked for (default 60 s). */
  readonly maintenanceSeconds?: number;
  /** How often an idle worker polls (default 1 s, at least 0.5). */
  readonly pollSeconds?: number;
  /**
   * Told of errors in the background: pg-boss's maintenance, a heartbeat or outcome that did not
   * reach the database. None is fatal (a lost outcome means the job runs again); log them.
   */
  readonly onError?: (error: unknown) => void;
}

export interface PgBossQueue extends JobQueue {
  /** Enqueues through `sql`: inside a transaction, the job commits or rolls back with it. */
  enqueueWith<N extends JobName>(
    sql: Queryable,
    name: N,
    data: JobTypes[N],
    options?: EnqueueOptions,
  ): Promise<void>;
  /** Asks this process's idle workers of `name` to fetch now (a job was just committed). */
  wake(name: JobName): void;
  /**
   * Stops this queue's workers at once, as a killed process would stop: no more fetches, no
   * heartbeats, and no outcome recorded for the runs in flight, whose jobs run again elsewhere
   * once their leases end. For tests of what the other processes then do.
   */
  halt(): void;
  close(): Promise<void>;
}

/** The options' defaults, where the installer and the queue both need them. */
const defaults = { maxAttempts: 3, retryDelaySeconds: 10, leaseSeconds: 60 } as const;

/** pg-boss's tables live beside ours, in a schema of their own. */
const jobSchema = (db: SqlDatabase) => `${db.schema ?? "vod"}_jobs`;

/**
 * Creates or migrates pg-boss's schema and creates or updates our queues, on `conn`, which holds
 * the start-up lock (startup-lock.ts). pg-boss's own guard does not hold when processes start
 * together: it ignores only errors whose message says "already exists", and a racing
 * `CREATE SCHEMA IF NOT EXISTS` fails with a duplicate key whose detail says so instead. Under the
 * lock the later processes find the schema installed and only read it. A pg-boss of its own on
 * `conn`, started for this alone: it runs no timers and is stopped before the lock is released.
 */
export const installJobQueue = async (
  conn: Queryable,
  db: SqlDatabase,
  options: Pick<PgBossQueueOptions, "maxAttempts" | "retryDelaySeconds" | "leaseSeconds"> = {},
): Promise<void> => {
  const installer = new PgBoss({
    db: bossDb(conn),
    schema: jobSchema(db),
    migrate: true,
    supervise: false,
    schedule: false,
  });
  await installer.start();
  try {
    for (const name of jobNames) {
      const queue = {
        name,
        retryLimit: (options.maxAttempts ?? defaults.maxAttempts) - 1,
        retryDelay: options.retryDelaySeconds ?? defaults.retryDelaySeconds,
        retryBackoff: true,
        expireInSeconds: options.leaseSeconds ?? defaults.leaseSeconds,
      };
      if (await installer.getQueue(name)) await installer.updateQueue(name, queue);
      else await installer.createQueue(name, queue);
    }
  } finally {
    await installer.stop({ graceful: false, close: false });
  }
};

/** The pg-boss job row as fetched with its metadata: what a run needs to know to keep its lease. */
type Fetched<N extends JobName> = PgBoss.JobWithMetadata<JobTypes[N]>;

/**
 * The JobQueue on pg-boss, in the same database as the records, so a job is enqueued in the
 * transaction that makes it due. Any number of processes on the database share the queue, and
 * may start together: each installs the queue's schema under the start-up lock first.
 *
 * Workers are our own loop over pg-boss's fetch, complete and fail, not `boss.work`: pg-boss 10
 * has no heartbeat, and its expiry (`expire_in` from `started_on`) is also the longest a run may
 * take, so a run longer than its lease was handed out again beside itself. Here a run's worker
 * moves the expiry forward every quarter lease while the run lasts; a worker that dies stops
 * doing so, and pg-boss's maintenance hands the job out again. pg-boss 11 and later have
 * heartbeats of their own but need Node 22.
 */
export const pgBossQueue = async (
  db: SqlDatabase,
  options: PgBossQueueOptions = {},
): Promise<PgBossQueue> => {
  const maxAttempts = options.maxAttempts ?? defaults.maxAttempts;
  const leaseSeconds = options.leaseSeconds ?? defaults.leaseSeconds;
  const maxRunMs = (options.maxRunSeconds ?? 12 * 60 * 60) * 1000;
  const pollMs = Math.max(0.5, options.pollSeconds ?? 1) * 1000;
  const schema = jobSchema(db);
  await withStartupLock(db, (conn) => installJobQueue(conn, db, options));
  const boss = new PgBoss({
    db: bossDb(db),
    schema,
    // Installed above, under the lock: this start finds it so and creates nothing. Not `false`,
    // which would refuse a schema a newer pg-boss has migrated already (a rolling deploy).
    migrate: true,
    supervise: true,
    schedule: false,
    maintenanceIntervalSeconds: options.maintenanceSeconds ?? 60,
    monitorStateIntervalSeconds: options.maintenanceSeconds ?? 60,
  });
  const onError = options.onError ?? (() => {});
  boss.on("error", onError);
  await boss.start();

  // Moves the run's expiry to a lease from now. The run holds the job only while it is active
  // with the retry count it was fetched with: expired and fetched again, it has a higher one.
  const renewSql = `UPDATE ${schema}.job
    SET expire_in = (now() - started_on) + make_interval(secs => $4)
    WHERE name = $1 AND id = $2 AND state = 'active' AND retry_count = $3
    RETURNING id`;
  const renew = async <N extends JobName>(name: N, job: Fetched<N>): Promise<boolean> => {
    const result = await db.query(renewSql, [name, job.id, job.retryCount, leaseSeconds]);
    return result.rows.length > 0;
  };
  // Hands a run back, due now, as if never fetched. pg-boss counts an attempt when it fetches a
  // job that has `started_on` set (fetchNextJob in its plans.js), so clearing it is what keeps the
  // attempt; a fresh lease replaces the one the heartbeats stretched. pg-boss 10 has no call for
  // this: `fail` would cost an attempt and wait out the retry backoff.
  const releaseSql = `UPDATE ${schema}.job
    SET state = (CASE WHEN retry_count > 0 THEN 'retry' ELSE 'created' END)::${schema}.job_state,
      started_on = NULL, start_after = now(), expire_in = make_interval(secs => $4)
    WHERE name = $1 AND id = $2 AND state = 'active' AND retry_count = $3`;
  const release = async <N extends JobName>(name: N, job: Fetched<N>) => {
    await db.query(releaseSql, [name, job.id, job.retryCount, leaseSeconds]);
  };

  let halted = false;
  /** Per job name, the wake-up calls of this process's sleeping worker loops. */
  const sleepers = new Map<JobName, Set<() => void>>();
  const loops = new Set<Promise<void>>();
  const stops = new Set<() => void>();

  const work = <N extends JobName>(
    name: N,
    concurrency: number,
    handler: (job: Job<N>) => Effect.Effect<void, JobFailed>,
  ): Worker<N> => {
    let stopping = false;
    /** The runs in flight, and how to interrupt one so that its job is released. */
    const inFlight = new Map<string, { readonly view: Job<N>; readonly release: () => Promise<boolean> }>();
    const wakeUps = sleepers.get(name) ?? new Set<() => void>();
    sleepers.set(name, wakeUps);
    const nap = () =>
      new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          wakeUps.delete(done);
          resolve();
        };
        const timer = setTimeout(done, pollMs);
        wakeUps.add(done);
      });

    const runOne = async (job: Fetched<N>) => {
      const view = { id: job.id, name, data: job.data, attempt: job.retryCount + 1, maxAttempts } as Job<N>;
      const fiber = Effect.runFork(
        limitRun(
          Effect.suspend(() => handler(view)),
          maxRunMs,
        ),
      );
      let lost = false;
      let releasing = false;
      inFlight.set(job.id, {
        view,
        // Whether the run was cut short (it may have just finished).
        release: async () => {
          releasing = true;
          return !Exit.isSuccess(await Effect.runPromise(Fiber.interrupt(fiber)));
        },
      });
      const heartbeat = setInterval(
        () => {
          if (halted) return;
          renew(name, job).then((held) => {
            // Handed out again (this process was presumed dead): the other run now owns it.
            if (!held && !lost) {
              lost = true;
              void Effect.runPromise(Fiber.interrupt(fiber));
            }
          }, onError);
        },
        (leaseSeconds * 1000) / 4,
      );
      const exit = await Effect.runPromise(Fiber.await(fiber));
      clearInterval(heartbeat);
      inFlight.delete(job.id);
      if (halted || lost) return;
      try {
        if (Exit.isSuccess(exit)) await boss.complete(name, job.id);
        // Cut short by `drain`: whatever the run made of its interruption is not the job's failure.
        else if (releasing) await release(name, job);
        // pg-boss retries it (with backoff) or, on the last attempt, fails it.
        else await boss.fail(name, job.id, { message: Cause.pretty(exit.cause) });
      } catch (error) {
        // The outcome is lost with the connection; the lease ends and the job runs again.
        onError(error);
      }
    };

    const loop = async () => {
      while (!stopping && !halted) {
        let jobs: Fetched<N>[] = [];
        try {
          jobs = await boss.fetch<JobTypes[N]>(name, { batchSize: 1, includeMetadata: true });
        } catch (error) {
          onError(error);
        }
        // A job fetched as the worker was told to stop is run all the same (`stop` waits for
        // it): failing it back would cost it an attempt. A halted worker drops it, as a dead
        // process would, and its lease brings it back.
        const [job] = jobs;
        if (halted) return;
        if (job) await runOne(job);
        else if (!stopping) await nap();
      }
    };
    const running = Array.from({ length: concurrency }, () => {
      const promise = loop();
      loops.add(promise);
      void promise.finally(() => loops.delete(promise));
      return promise;
    });
    const stop = () => {
      stopping = true;
      for (const wake of [...wakeUps]) wake();
    };
    stops.add(stop);
    const finished = async () => {
      stop();
      stops.delete(stop);
      await Promise.all(running);
    };
    return {
      stop: Effect.promise(finished),
      drain: (graceMs) =>
        Effect.promise(async () => {
          const done = finished();
          let timer: NodeJS.Timeout | undefined;
          const late = await Promise.race([
            done.then(() => false),
            new Promise<boolean>((resolve) => {
              timer = setTimeout(() => resolve(true), graceMs);
            }),
          ]);
          clearTimeout(timer);
          if (!late) return [];
          const runs = [...inFlight.values()];
          const cut = await Promise.all(runs.map((run) => run.release()));
          // The loops end once each cut run's job is handed back.
          await done;
          return runs.filter((_, i) => cut[i]).map((run) => run.view);
        }),
    };
  };

  return {
    wake: (name) => {
      for (const wake of [...(sleepers.get(name) ?? [])]) wake();
    },
    enqueueWith: async (sql, name, data, options) => {
      const delayMs = options?.delayMs ?? 0;
      await boss.send(name, data as object, {
        db: bossDb(sql),
        // A Date is taken to the millisecond; a number would be whole seconds.
        ...(delayMs > 0 ? { startAfter: new Date(Date.now() + delayMs) } : {}),
        ...(options?.priority ? { priority: options.priority } : {}),
      });
    },
    work: (name, { concurrency }, handler) =>
      Effect.try({
        try: () => work(name, concurrency, handler),
        catch: (cause) => new StorageError({ message: "could not start job workers", cause }),
      }),
    halt: () => {
      halted = true;
      for (const stop of stops) stop();
    },
    close: async () => {
      for (const stop of stops) stop();
      if (!halted) await Promise.all(loops);
      await boss.stop({ graceful: true, wait: true, close: false });
    },
  };
};

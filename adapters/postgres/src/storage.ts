import { type JobName, type Repositories, type Storage, StorageError } from "@vod/core";
import { Effect, Exit } from "effect";
import { type Enqueue, repositoriesOver } from "./repositories.js";
import type { SqlDatabase } from "./sql.js";
import { standaloneScoped, transactionScoped } from "./tenancy.js";

/** Carries the unit of work's own failure out through the driver's ROLLBACK. */
class Rollback {
  constructor(readonly exit: Exit.Exit<unknown, unknown>) {}
}

export interface PostgresStorageOptions {
  readonly enqueue?: Enqueue;
  /**
   * Called once a job is visible to workers: after its transaction commits (or at once outside
   * one). The queue wakes its local workers with it instead of leaving the job to their next poll.
   */
  readonly enqueued?: (name: JobName) => void;
}

/** Storage on Postgres or PGlite: the repositories plus the database's own transactions. */
export const postgresStorage = (db: SqlDatabase, options: PostgresStorageOptions = {}): Storage => {
  const { enqueue, enqueued } = options;
  const direct: Enqueue | undefined =
    enqueue &&
    (async (sql, name, data, options) => {
      await enqueue(sql, name, data, options);
      enqueued?.(name);
    });
  return {
    ...repositoriesOver(standaloneScoped(db), direct),
    transaction: <A, E>(work: (tx: Repositories) => Effect.Effect<A, E>) =>
      Effect.suspend(() => {
        const committed = new Set<JobName>();
        const inTransaction: Enqueue | undefined =
          enqueue &&
          (async (sql, name, data, options) => {
            await enqueue(sql, name, data, options);
            committed.add(name);
          });
        return Effect.tryPromise({
          try: () =>
            db.transaction(async (tx) => {
              const exit = await Effect.runPromiseExit(
                work(repositoriesOver(transactionScoped(tx), inTransaction)),
              );
              if (Exit.isFailure(exit)) throw new Rollback(exit);
              return exit as Exit.Exit<A, E>;
            }),
          catch: (error) =>
            error instanceof Rollback
              ? error
              : new StorageError({ message: "database transaction failed", cause: error }),
        }).pipe(
          Effect.tap(() =>
            Effect.sync(() => {
              for (const name of committed) enqueued?.(name);
            }),
          ),
          Effect.catchAll((error) =>
            error instanceof Rollback ? Effect.succeed(error.exit as Exit.Exit<A, E>) : Effect.fail(error),
          ),
          // The exit of the work, success or its own failure, becomes this effect's outcome.
          Effect.flatten,
        );
      }),
  };
};

import { type Repositories, type Storage, StorageError } from "@vod/core";
import { Effect, Exit } from "effect";
import { type Enqueue, repositoriesOver } from "./repositories.js";
import type { SqlDatabase } from "./sql.js";

/** Carries the unit of work's own failure out through the driver's ROLLBACK. */
class Rollback {
  constructor(readonly exit: Exit.Exit<unknown, unknown>) {}
}

/** Storage on Postgres or PGlite: the repositories plus the database's own transactions. */
export const postgresStorage = (db: SqlDatabase, options: { readonly enqueue?: Enqueue } = {}): Storage => ({
  ...repositoriesOver(db, options.enqueue),
  transaction: <A, E>(work: (tx: Repositories) => Effect.Effect<A, E>) =>
    Effect.tryPromise({
      try: () =>
        db.transaction(async (tx) => {
          const exit = await Effect.runPromiseExit(work(repositoriesOver(tx, options.enqueue)));
          if (Exit.isFailure(exit)) throw new Rollback(exit);
          return exit as Exit.Exit<A, E>;
        }),
      catch: (error) =>
        error instanceof Rollback
          ? error
          : new StorageError({ message: "database transaction failed", cause: error }),
    }).pipe(
      Effect.catchAll((error) =>
        error instanceof Rollback ? Effect.succeed(error.exit as Exit.Exit<A, E>) : Effect.fail(error),
      ),
      // The exit of the work, success or its own failure, becomes this effect's outcome.
      Effect.flatten,
    ),
});

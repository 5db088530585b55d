import { Tokens } from "@vod/core";
import { ContainerModule } from "inversify";
import type { PgBossQueue } from "./jobs.js";
import type { SqlDatabase } from "./sql.js";
import { postgresStorage } from "./storage.js";

export { postgresBackdoor } from "./backdoor.js";
export { type PgBossQueue, type PgBossQueueOptions, pgBossQueue } from "./jobs.js";
export { type Migration, migrate, migrations } from "./migrations.js";
export { openPgliteProcess, type PgliteProcessOptions } from "./pglite-process.js";
export { prepareDatabase } from "./prepare.js";
export { type Enqueue, repositoriesOver } from "./repositories.js";
export {
  connectPostgres,
  openPglite,
  type PgliteOptions,
  type PostgresOptions,
  type Queryable,
  type QueryResult,
  type SqlDatabase,
} from "./sql.js";
export { postgresStorage } from "./storage.js";
export {
  appRoleName,
  type Scope,
  type ScopedSql,
  standaloneScoped,
  tenantScope,
  transactionScoped,
} from "./tenancy.js";

/**
 * Binds Storage to the given database (a pg pool or PGlite; migrate it first) and, with a
 * pg-boss queue on the same database, the JobQueue, with enqueues inside Storage transactions.
 */
export const postgresAdapters = (db: SqlDatabase, queue?: PgBossQueue) =>
  new ContainerModule(({ bind }) => {
    bind(Tokens.Storage).toConstantValue(
      postgresStorage(db, queue ? { enqueue: queue.enqueueWith, enqueued: queue.wake } : {}),
    );
    if (queue) bind(Tokens.JobQueue).toConstantValue(queue);
  });
export { postgresRevocationStore } from "./revocation-store.js";
export {
  type PostgresTelemetrySinkOptions,
  postgresTelemetryBackdoor,
  postgresTelemetrySink,
} from "./telemetry-sink.js";

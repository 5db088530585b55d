export { buildRollupsSql } from "./analytics.js";
export { embeddedRevocationFeed } from "./embedded-feed.js";
export { type PgBossQueue, type PgBossQueueOptions, pgBossQueue } from "./jobs.js";
export { type Migration, migrate, migrations } from "./migrations.js";
export { connectPostgres, type PostgresOptions } from "./pg-pool.js";
export { DataDirectoryNotEmpty, restorePglite, type Snapshot } from "./pglite-backup.js";
export { type EmbeddedDatabase, openPgliteProcess, type PgliteProcessOptions } from "./pglite-process.js";
export { openPglite, type PgliteOptions } from "./pglite-session.js";
export { DataDirectoryInUse } from "./pglite-share.js";
export {
  backupPostgres,
  type PostgresBackupSource,
  type PostgresTarget,
  restorePostgres,
  TargetNotEmpty,
} from "./postgres-backup.js";
export { prepareDatabase } from "./prepare.js";
export { type Enqueue, repositoriesOver } from "./repositories.js";
export { postgresRevocationStore } from "./revocation-store.js";
export { ping, type Queryable, type QueryResult, type SqlDatabase } from "./sql.js";
export { postgresStorage } from "./storage.js";
export {
  type PostgresTelemetrySinkOptions,
  postgresTelemetrySink,
} from "./telemetry-sink.js";
export {
  appRoleName,
  neutralSession,
  type Scope,
  type ScopedSql,
  standaloneScoped,
  tenantScope,
  transactionScoped,
} from "./tenancy.js";

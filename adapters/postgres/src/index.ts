export { type PgBossQueue, type PgBossQueueOptions, pgBossQueue } from "./jobs.js";
export { type Migration, migrate, migrations } from "./migrations.js";
export { openPgliteProcess, type PgliteProcessOptions } from "./pglite-process.js";
export { prepareDatabase } from "./prepare.js";
export { type Enqueue, repositoriesOver } from "./repositories.js";
export { postgresRevocationStore } from "./revocation-store.js";
export {
  connectPostgres,
  openPglite,
  type PgliteOptions,
  type PostgresOptions,
  ping,
  type Queryable,
  type QueryResult,
  type SqlDatabase,
} from "./sql.js";
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

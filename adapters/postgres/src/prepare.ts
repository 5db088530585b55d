import { installJobQueue, type PgBossQueueOptions } from "./jobs.js";
import { applyMigrations } from "./migrations.js";
import type { SqlDatabase } from "./sql.js";
import { withStartupLock } from "./startup-lock.js";

/**
 * Everything a start creates or changes in the database, in one turn of the start-up lock: our
 * migrations, then pg-boss's schema and our queues (with `queue`'s settings). For a migrations
 * job run before the hosts (`vod migrate`): they then find nothing to create. A host need not
 * call it: `migrate` and `pgBossQueue` each take the same lock for their part.
 */
export const prepareDatabase = (
  db: SqlDatabase,
  queue: Pick<PgBossQueueOptions, "maxAttempts" | "retryDelaySeconds" | "leaseSeconds"> = {},
): Promise<ReadonlyArray<number>> =>
  withStartupLock(db, async (conn) => {
    const applied = await applyMigrations(conn, db.schema);
    await installJobQueue(conn, db, queue);
    return applied;
  });

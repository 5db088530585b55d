import type { Queryable, SqlDatabase } from "./sql.js";

/** Any constant works; this one spells "vod" and keeps clear of other applications' locks. */
const STARTUP_LOCK = 0x766f64;

/** Per database handle, the end of the last start-up step of this process (see below). */
const turns = new WeakMap<SqlDatabase, Promise<unknown>>();

/**
 * Runs `fn` on one connection that holds the start-up lock: every step that creates or changes
 * shared state at start (our migrations, the job queue's schema and queues) runs inside it, so
 * processes that start together on one database take turns and the later ones find the work done.
 * Nothing in `fn` may take the lock again or use another connection of `db` while it waits.
 *
 * On a server the lock is a session-level advisory lock, held across the steps' transactions.
 * PGlite has one connection and its data directory one process: the advisory lock there never
 * waits (it is reentrant within a session and no other session exists), so it cannot deadlock,
 * and it cannot order two callers in one process either. The queue of turns per handle does
 * that, on both engines.
 */
export const withStartupLock = <T>(db: SqlDatabase, fn: (conn: Queryable) => Promise<T>): Promise<T> => {
  const run = (turns.get(db) ?? Promise.resolve())
    .catch(() => undefined)
    .then(() =>
      db.withConnection(async (conn) => {
        await conn.query("SELECT pg_advisory_lock($1)", [STARTUP_LOCK]);
        try {
          return await fn(conn);
        } catch (error) {
          // A step that failed inside its own BEGIN leaves the session in an aborted transaction,
          // where even the unlock would fail; outside one, ROLLBACK only warns.
          await conn.exec("ROLLBACK").catch(() => undefined);
          throw error;
        } finally {
          await conn.query("SELECT pg_advisory_unlock($1)", [STARTUP_LOCK]);
        }
      }),
    );
  turns.set(db, run);
  return run;
};

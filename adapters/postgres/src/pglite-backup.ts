import { existsSync } from "node:fs";
import { mkdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import type { PGlite } from "@electric-sql/pglite";
import { createPglite, overPglite } from "./pglite-session.js";
import { holdHere } from "./pglite-share.js";
import type { Queryable } from "./sql.js";

/** A copy of a database as it was at one moment, and how many rows each of its tables held then. */
export interface Snapshot {
  /** PGlite's data directory as a gzipped tar (`dumpDataDir`). */
  readonly dump: Uint8Array;
  /** `schema.table` to row count. */
  readonly tables: Record<string, number>;
}

/** Every table of ours and of the job queue: all but Postgres' own catalogs. */
const TABLES_SQL = `SELECT schemaname AS schema, tablename AS name FROM pg_tables
  WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2`;

const quoted = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * Row counts of `tables` in one statement, as one snapshot sees them. The login must see every
 * row: a superuser, or a BYPASSRLS role (the tables force row-level security on their owner).
 */
export const countRows = async (
  sql: Queryable,
  tables: ReadonlyArray<{ readonly schema: string; readonly name: string }>,
): Promise<Record<string, number>> => {
  if (tables.length === 0) return {};
  const { rows } = await sql.query<{ t: string; n: number | string }>(
    tables
      .map(
        ({ schema, name }) =>
          `SELECT ${`'${`${schema}.${name}`.replaceAll("'", "''")}'`} AS t, count(*)::int AS n FROM ${quoted(schema)}.${quoted(name)}`,
      )
      .join(" UNION ALL "),
  );
  return Object.fromEntries(rows.map((r) => [r.t, Number(r.n)]));
};

/** Every table's row count of a PGlite database (all its schemas). */
export const pgliteRowCounts = async (sql: Queryable) =>
  countRows(sql, (await sql.query<{ schema: string; name: string }>(TABLES_SQL)).rows);

/**
 * Run in the process that owns the directory. Committed work is in the WAL on disk, so a copy of
 * the directory taken while no statement runs is a crash-consistent image, which Postgres
 * recovers when it opens it. The counts and the copy are taken inside one transaction: the
 * adapter's statements and transactions all wait for PGlite's transaction lock (pglite-session's
 * `execute`, and `transaction`), so nothing commits between them. The CHECKPOINT first leaves
 * little WAL to replay.
 */
export const pgliteSnapshot = async (
  db: Pick<PGlite, "dumpDataDir">,
  session: {
    exec(sql: string): Promise<void>;
    transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  },
): Promise<Snapshot> => {
  await session.exec("CHECKPOINT");
  return session.transaction(async (tx) => {
    const tables = await pgliteRowCounts(tx);
    const dump = new Uint8Array(await (await db.dumpDataDir("gzip")).arrayBuffer());
    return { dump, tables };
  });
};

/** The data directory holds a database already. */
export const pgliteDataDirInUse = (dataDir: string) => existsSync(join(dataDir, "PG_VERSION"));

/** `dataDir` holds a database and no `moveAsideTo` was given. */
export class DataDirectoryNotEmpty extends Error {}

/**
 * Makes `dataDir` the database of `dump`, opening it once so that Postgres recovers it, and
 * answers its tables' row counts as it opened. The directory is held meanwhile, as `openPglite`
 * holds it, so no host opens it half-written. A database already there is refused, or moved to
 * `moveAsideTo` (and moved back if the restore fails).
 */
export const restorePglite = async (
  dataDir: string,
  dump: Uint8Array,
  options: { readonly moveAsideTo?: string } = {},
): Promise<Record<string, number>> => {
  // Taken as any opening takes it, before a file is moved or written.
  const hold = await holdHere(dataDir);
  try {
    const { moveAsideTo } = options;
    const replacing = pgliteDataDirInUse(dataDir);
    if (replacing) {
      if (moveAsideTo === undefined) throw new DataDirectoryNotEmpty(`${dataDir} holds a database already`);
      await rename(dataDir, moveAsideTo);
      await mkdir(dataDir, { recursive: true });
    }
    try {
      const db = await createPglite(dataDir, {}, new Blob([new Uint8Array(dump)]));
      try {
        return await pgliteRowCounts(overPglite(db));
      } finally {
        await db.close();
      }
    } catch (error) {
      if (replacing && moveAsideTo !== undefined) {
        await rm(dataDir, { recursive: true, force: true });
        await rename(moveAsideTo, dataDir);
      }
      throw error;
    }
  } finally {
    await hold.release();
  }
};

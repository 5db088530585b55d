import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  connectPostgres,
  migrate,
  openPglite,
  openPgliteProcess,
  type SqlDatabase,
} from "@vod/adapter-postgres";
import { temporarySchemas } from "@vod/adapter-postgres/testing";
import { suiteName, testServices } from "@vod/contract-tests";
import { afterAll, describe } from "vitest";

export interface Engine {
  readonly name: "pglite" | "pglite-process" | "postgres";
  /** Opens the engine's database; on the server, every call reaches the same schema. */
  readonly open: () => Promise<SqlDatabase>;
  /** Whether two `open` calls are two pools (server) or two instances of nothing shared (PGlite). */
  readonly separatePools: boolean;
}

/**
 * Runs `suites` on PGlite, and on the PostgreSQL server of the run in a schema of its own,
 * reported as skipped by name when the run has no server.
 */
export const onEachEngine = (suites: (engine: Engine) => void) => {
  suites({ name: "pglite", open: () => openPglite(), separatePools: false });
  // The host's embedded default: PGlite in a process of its own, over IPC, on a data directory.
  suites({
    name: "pglite-process",
    open: async () => {
      const dir = await mkdtemp(join(tmpdir(), "vod-pglite-process-"));
      const db = await openPgliteProcess(dir);
      return {
        ...db,
        close: async () => {
          await db.close();
          await rm(dir, { recursive: true, force: true });
        },
      };
    },
    separatePools: false,
  });
  const { databaseUrl } = testServices();
  describe.skipIf(databaseUrl === null)(
    suiteName("postgres server", databaseUrl !== null, "VOD_TEST_DATABASE_URL"),
    () => {
      const url = databaseUrl ?? "";
      const schemas = temporarySchemas(url);
      afterAll(() => schemas.dropAll());
      const schema = schemas.fresh();
      suites({
        name: "postgres",
        open: async () => connectPostgres({ connectionString: url, schema, poolSize: 8 }),
        separatePools: true,
      });
    },
  );
};

/**
 * One migrated database for the whole file, opened on first use and closed after it; every test
 * makes its own uniquely named rows. `another` opens a second pool on it: another node.
 */
export const migratedOnce = (open: () => Promise<SqlDatabase>) => {
  const opened: Promise<SqlDatabase>[] = [];
  afterAll(async () => {
    for (const db of opened.splice(0)) await (await db).close();
  });
  let first: Promise<SqlDatabase> | undefined;
  return {
    db: () => {
      if (first === undefined) {
        first = open().then(async (d) => {
          await migrate(d);
          return d;
        });
        opened.push(first);
      }
      return first;
    },
    another: () => {
      const db = open();
      opened.push(db);
      return db;
    },
  };
};

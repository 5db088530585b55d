import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { countRows } from "./pglite-backup.js";
import { appRoleSql } from "./row-level-security.js";
import { appRoleName } from "./tenancy.js";

/** What a server backup is of: restored, the tables go back into a schema of the same name. */
export interface PostgresBackupSource {
  readonly database: string;
  /** Our tables' schema. */
  readonly schema: string;
  /** The job queue's. */
  readonly jobSchema: string;
  /** The app role the dump's grants name (`vod_app_<database>_<schema>`). */
  readonly appRole: string;
  readonly tables: Record<string, number>;
}

export interface PostgresTarget {
  readonly connectionString: string;
  /** VOD_DATABASE_SCHEMA, when set; else the connection's default schema. */
  readonly schema?: string | undefined;
}

/** The job queue's schema, named after ours as `jobs.ts` names it. */
const jobSchemaOf = (schema: string | undefined) => `${schema ?? "vod"}_jobs`;

const ident = (name: string) => `"${name.replaceAll('"', '""')}"`;

const connected = async <T>(target: PostgresTarget, fn: (client: pg.Client) => Promise<T>) => {
  const client = new pg.Client({ connectionString: target.connectionString });
  await client.connect();
  try {
    if (target.schema) await client.query(`SET search_path TO ${ident(target.schema)}`);
    return await fn(client);
  } finally {
    await client.end();
  }
};

const tablesOf = async (client: pg.Client, schemas: ReadonlyArray<string>) =>
  (
    await client.query<{ schema: string; name: string }>(
      `SELECT schemaname AS schema, tablename AS name FROM pg_tables
        WHERE schemaname = ANY($1) ORDER BY 1, 2`,
      [schemas],
    )
  ).rows;

const overClient = (client: pg.Client) => ({
  query: async <R>(text: string) => {
    const result = await client.query(text);
    return { rows: result.rows as R[], rowCount: result.rowCount ?? 0 };
  },
  exec: async (sql: string) => {
    await client.query(sql);
  },
});

/** Runs a PostgreSQL client tool, failing with what it printed. */
const run = (tool: string, args: ReadonlyArray<string>) =>
  new Promise<string>((resolve, reject) => {
    const child = spawn(tool, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.stderr.on("data", (d) => {
      err += d;
    });
    child.on("error", (error) =>
      reject(new Error(`${tool} could not be run (${error.message}): install the PostgreSQL client tools`)),
    );
    // "close", not "exit": the tool's output may still be unread when its exit is told.
    child.on("close", (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${tool} failed (exit ${code}): ${err.trim()}`)),
    );
  });

/**
 * `pg_dump -Fc` of our schema and the job queue's into `file`, while the server serves: a
 * REPEATABLE READ transaction exports its snapshot, the rows are counted in it and pg_dump dumps
 * that same snapshot (`--snapshot`), so the counts are the dump's and everything committed before
 * it began is in it. The login must read every row: a superuser or a BYPASSRLS role (the tables
 * force row-level security on their owner, and `row_security = off` makes a hidden row an error).
 */
export const backupPostgres = (target: PostgresTarget, file: string): Promise<PostgresBackupSource> =>
  connected(target, async (client) => {
    await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    try {
      await client.query("SET LOCAL row_security = off");
      const { rows } = await client.query<{ database: string; schema: string; snapshot: string }>(
        "SELECT current_database() AS database, current_schema() AS schema, pg_export_snapshot() AS snapshot",
      );
      const { database, schema, snapshot } = rows[0] ?? { database: "", schema: "", snapshot: "" };
      const jobSchema = jobSchemaOf(target.schema);
      const tables = await countRows(overClient(client), await tablesOf(client, [schema, jobSchema]));
      await run("pg_dump", [
        "--format=custom",
        `--snapshot=${snapshot}`,
        `--schema=${ident(schema)}`,
        `--schema=${ident(jobSchema)}`,
        `--file=${file}`,
        `--dbname=${target.connectionString}`,
      ]);
      return { database, schema, jobSchema, appRole: appRoleName(database, schema), tables };
    } finally {
      await client.query("COMMIT");
    }
  });

/** The target holds tables of ours or of the job queue already. */
export class TargetNotEmpty extends Error {}

/**
 * Restores a `backupPostgres` dump into the target's database, in one transaction: into a
 * schema of the same name as the backup's, empty unless `force` (then the dump's objects are
 * dropped first). Owners become the login; the app role's rights are given to this database's
 * role, made if missing. Answers the restored tables' row counts.
 */
export const restorePostgres = (
  target: PostgresTarget,
  file: string,
  source: PostgresBackupSource,
  options: { readonly force?: boolean } = {},
): Promise<Record<string, number>> =>
  connected(target, async (client) => {
    const { rows } = await client.query<{ database: string; schema: string | null }>(
      "SELECT current_database() AS database, current_schema() AS schema",
    );
    const database = rows[0]?.database ?? "";
    const schema = target.schema ?? rows[0]?.schema ?? "public";
    if (schema !== source.schema)
      throw new Error(
        `the backup is of schema ${source.schema}, and it is restored into a schema of that name: set VOD_DATABASE_SCHEMA=${source.schema}`,
      );
    const present = await tablesOf(client, [schema, source.jobSchema]);
    if (present.length > 0 && !options.force)
      throw new TargetNotEmpty(
        `${database} holds ${present.length} tables in ${schema} or ${source.jobSchema} already: restore into an empty database, or pass --force to replace them`,
      );
    await run("pg_restore", [
      "--no-owner",
      "--no-privileges",
      "--exit-on-error",
      "--single-transaction",
      ...(options.force ? ["--clean", "--if-exists"] : []),
      `--dbname=${target.connectionString}`,
      file,
    ]);
    // The dump's grants name the source's app role; they go to this database's.
    const work = await mkdtemp(join(tmpdir(), "vod-restore-"));
    try {
      const list = (await run("pg_restore", ["--list", file]))
        .split("\n")
        .filter((line) => / ACL /.test(line) && !line.startsWith(";"));
      const listFile = join(work, "acl.list");
      await writeFile(listFile, `${list.join("\n")}\n`);
      const grants =
        list.length === 0 ? "" : await run("pg_restore", [`--use-list=${listFile}`, "--file=-", file]);
      const role = appRoleName(database, schema);
      await client.query("BEGIN");
      await client.query(`SET LOCAL search_path TO ${ident(schema)}`);
      await client.query(appRoleSql);
      // psql's meta-commands (`\restrict` since 15.14) are not SQL.
      const sql = grants
        .split("\n")
        .filter((line) => !line.startsWith("\\"))
        .join("\n");
      await client.query(sql.replaceAll(source.appRole, role));
      await client.query("COMMIT");
    } finally {
      await rm(work, { recursive: true, force: true });
    }
    await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    try {
      await client.query("SET LOCAL row_security = off");
      return await countRows(overClient(client), await tablesOf(client, [schema, source.jobSchema]));
    } finally {
      await client.query("COMMIT");
    }
  });

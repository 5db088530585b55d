/**
 * What every engine of the adapter answers to: the connection and database interfaces the
 * repositories, migrations and job queue are written against. The engines are `pg-pool.ts` (a
 * server) and `pglite-session.ts` (PGlite, in this process or its own); this module imports none.
 */

export interface QueryResult<R> {
  readonly rows: R[];
  /** Rows changed by INSERT / UPDATE / DELETE, rows returned by SELECT. */
  readonly rowCount: number;
}

/** The least the repositories need of a connection or a transaction. */
export interface Queryable {
  /** Without parameters the text may hold several statements; the result is the last one's. */
  query<R = Record<string, unknown>>(text: string, params?: ReadonlyArray<unknown>): Promise<QueryResult<R>>;
  /** Several statements, no parameters (migrations). */
  exec(sql: string): Promise<void>;
}

/** A statement and its parameters. */
export interface Statement {
  readonly text: string;
  readonly params: ReadonlyArray<unknown>;
}

/**
 * A role and settings a connection's session is set to (row-level security, `tenancy.ts`).
 * Equal keys mean equal settings.
 */
export interface SessionScope {
  readonly key: string;
  /** Sets it for the rest of the session. */
  readonly set: Statement;
}

/**
 * A database: a pg pool on a server, or PGlite embedded in the process. Both speak the same SQL,
 * so one set of repositories and migrations serves both.
 */
export interface SqlDatabase extends Queryable {
  readonly engine: "postgres" | "pglite";
  /** The schema the tables live in, when not the default one. */
  readonly schema?: string | undefined;
  /** Runs `fn` in one transaction: COMMIT when it resolves, ROLLBACK when it rejects. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /**
   * Runs `text` on a connection whose session is in `scope`. Each connection remembers the scope
   * its session is in: when it is `scope` already, the statement goes alone; else `scope.set`
   * and the statement go in one transaction (on a server BEGIN, both and COMMIT in one round
   * trip), so that the statement never runs unless the scope took. `query`, `exec`,
   * `transaction` and `withConnection` run in the neutral session (`neutralSession`) in the
   * same way: a connection a scoped statement left behind is never another caller's.
   */
  queryIn<R = Record<string, unknown>>(
    scope: SessionScope,
    text: string,
    params?: ReadonlyArray<unknown>,
  ): Promise<QueryResult<R>>;
  /** Runs `fn` on one connection held throughout (session-level advisory locks). */
  withConnection<T>(fn: (conn: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

// Epoch milliseconds are int8; they fit a JS number exactly until the year 287,396.
export const INT8 = 20;

/** Resolves once the database answers a trivial query: a readiness check. */
export const ping = (db: Queryable): Promise<void> => db.query("SELECT 1").then(() => undefined);

/**
 * Names for the texts run with parameters, so that each connection parses and plans a text once
 * and then only binds and executes it (a prepared statement; Postgres re-plans it by itself when
 * a table changes or the role differs). The adapter's texts are a fixed set; past the bound a
 * text goes unnamed, parsed each time as before.
 */
export const statementNames = () => {
  const names = new Map<string, string>();
  let next = 0;
  return (text: string): string | undefined => {
    let name = names.get(text);
    if (name === undefined && names.size < 1000) {
      name = `vod_${(next++).toString(36)}`;
      names.set(text, name);
    }
    return name;
  };
};

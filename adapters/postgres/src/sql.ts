import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { PGlite, parse as pgliteParse, protocol } from "@electric-sql/pglite";
import pg from "pg";
import { sharedLanes, switchedRun } from "./lanes.js";
import { neutralInTransaction, neutralSession } from "./tenancy.js";

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
const INT8 = 20;
const types = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === INT8
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** pg's answer in the adapter's shape: several statements without parameters answer one result each. */
const lastResult = <R>(results: pg.QueryResult | pg.QueryResult[]): QueryResult<R> => {
  const result = Array.isArray(results) ? results[results.length - 1] : results;
  return { rows: (result?.rows ?? []) as R[], rowCount: result?.rowCount ?? result?.rows.length ?? 0 };
};

const overPg = (client: pg.Pool | pg.PoolClient): Queryable => ({
  query: async <R>(text: string, params?: ReadonlyArray<unknown>) =>
    lastResult<R>(
      (await client.query(text, params as unknown[] | undefined)) as pg.QueryResult | pg.QueryResult[],
    ),
  exec: async (sql) => {
    await client.query(sql);
  },
});

/**
 * The server went away under the query (57P01 admin shutdown and the other class 57 and 08
 * codes, or the socket closed), as opposed to an error in the query itself.
 */
const isConnectionError = (error: unknown): boolean => {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string")
    return /^(08|57P)/.test(code) || code === "ECONNREFUSED" || code === "ECONNRESET";
  const message = error instanceof Error ? error.message : "";
  return /Connection terminated|not queryable|ECONNREFUSED/.test(message);
};

export interface PostgresOptions {
  readonly connectionString: string;
  /** Connections in the pool (VOD_DATABASE_POOL_SIZE). */
  readonly poolSize?: number;
  /** Schema to work in (search_path); tests use one per run. */
  readonly schema?: string;
  /**
   * Shows in pg_stat_activity. An `application_name` in the connection string wins over it, so
   * one deployment (or test) can tell its own connections apart.
   */
  readonly applicationName?: string;
  /** Told when the database drops connections (once per outage, at warn) and when it answers again. */
  readonly log?: DependencyLog;
}

/** The least of a logger (pino's shape) the adapter reports the database's comings and goings to. */
export interface DependencyLog {
  warn(details: object, message: string): void;
  info(details: object, message: string): void;
}

/** Resolves once the database answers a trivial query: a readiness check. */
export const ping = (db: Queryable): Promise<void> => db.query("SELECT 1").then(() => undefined);

/**
 * Names for the texts run with parameters, so that each connection parses and plans a text once
 * and then only binds and executes it (a prepared statement; Postgres re-plans it by itself when
 * a table changes or the role differs). The adapter's texts are a fixed set; past the bound a
 * text goes unnamed, parsed each time as before.
 */
const statementNames = () => {
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

/** A pool on a Postgres server (Cloud SQL, RDS, your own). */
export const connectPostgres = (options: PostgresOptions): SqlDatabase => {
  if (options.schema !== undefined && !/^[a-z_][a-z0-9_]{0,62}$/.test(options.schema))
    throw new Error(
      `invalid schema name ${JSON.stringify(options.schema)}: use lowercase letters, digits and _`,
    );
  const size = options.poolSize ?? 10;
  // Of the connections, two (one in a pool of 2 or 3, none in a pool of 1) are shared lanes for
  // the tenants' statements outside transactions (`sharedLanes`); the rest are pooled for
  // transactions, session locks and every other statement.
  const laneCount = size >= 4 ? 2 : size >= 2 ? 1 : 0;
  const config = {
    connectionString: options.connectionString,
    application_name: options.applicationName ?? "vod",
    ...(options.schema ? { options: `-c search_path=${options.schema}` } : {}),
    types,
  };
  const pool = new pg.Pool({
    ...config,
    max: size - laneCount,
    // Queries are written without waiting for the answers before them (queryIn's one round
    // trip); code that awaits each query, as everything else here does, sees no difference.
    pipeline: true,
  });
  // A connection the server drops (restart, failover, pg_terminate_backend) fails the requests on
  // it with a StorageError, a 503; it is never a reason to exit. Said once per outage: the first
  // drop warns; the outage ends with an answer a second after the last drop (the pool's other
  // connections are dropped in the same breath, and each one is not news).
  let healthy = true;
  let lastLoss = 0;
  const lost = (error: Error) => {
    lastLoss = Date.now();
    if (!healthy) return;
    healthy = false;
    options.log?.warn({ err: error }, "database connection lost");
  };
  const answered = () => {
    if (healthy || Date.now() - lastLoss < 1_000) return;
    healthy = true;
    options.log?.info({}, "database back");
  };
  // An idle client that loses its server: the pool discards it, the next query reconnects.
  pool.on("error", lost);
  // And every client, whoever holds it: pg emits `error` on a client that gets the server's FATAL
  // (57P01) while no query of its own is active, and pg-pool listens only while the client is
  // idle or inside pool.query. Seen under load: a client between checkout and its holder's
  // listener, or after a pipelined batch, ended the process with an unhandled `error` event. The
  // queries on it still fail and pg-pool still discards it on release; this only keeps the event
  // from being unhandled.
  // The error is also kept for its holder's release (`hold`), so the pool destroys that client.
  const faults = new WeakMap<pg.PoolClient, Error>();
  pool.on("connect", (client) =>
    client.on("error", (error: Error) => {
      faults.set(client, error);
      lost(error);
    }),
  );
  /**
   * The scope each connection's session is in (`queryIn`); a connection not in here is fresh,
   * in the neutral session. UNKNOWN after a switch that failed: the next caller sets its own.
   */
  const sessions = new WeakMap<pg.PoolClient, string>();
  const named = statementNames();
  /** pg parses a named statement once per connection, and again on one where it failed. */
  const statement = (text: string, params?: ReadonlyArray<unknown>) =>
    params === undefined || params.length === 0
      ? { text }
      : { name: named(text), text, values: params as unknown[] };
  const UNKNOWN = "";
  const sessionOf = (client: pg.PoolClient) => sessions.get(client) ?? neutralSession.key;

  /**
   * A client held outside pool.query (a transaction, a session lock). pg-pool listens for its
   * errors only while it is idle: one that loses its server while held would emit an unhandled
   * `error` and end the process. Every client's own listener (`faults`) keeps the error, and the
   * client is released with it, so the pool destroys it instead of handing a dead connection to
   * the next caller.
   */
  const hold = async () => {
    const client = await pool.connect();
    return {
      client,
      conn: overPg(client),
      query: (text: string) => client.query(text),
      release: (error?: Error) => client.release(error ?? faults.get(client)),
    };
  };
  const reporting = <A>(promise: Promise<A>): Promise<A> =>
    promise.then(
      (value) => {
        answered();
        return value;
      },
      (error: unknown) => {
        if (isConnectionError(error)) lost(error as Error);
        throw error;
      },
    );

  const aggregates = aggregateForms("rows");
  /**
   * The rows of a SELECT the aggregate way when it has one: one JSON text to parse instead of a
   * field to parse per column and row (client CPU for 51 asset rows 107-191 -> 78-83 µs).
   */
  const answer = <R>(
    text: string,
    params: ReadonlyArray<unknown> | undefined,
    aggregate: Aggregate | null | undefined,
    results: unknown,
  ) => {
    const result = (Array.isArray(results) ? results[results.length - 1] : results) as pg.QueryResult;
    if (aggregate) return aggregateRows<R>(aggregate, result.rows[0]?.json);
    if (aggregate === undefined) aggregates.learn(text, params, result.fields);
    return lastResult<R>(result);
  };

  const lanes = laneCount === 0 ? undefined : sharedLanes(laneCount, config, neutralSession.key, lost);

  const queryIn = <R>(scope: SessionScope, text: string, params?: ReadonlyArray<unknown>) =>
    reporting(
      (async () => {
        const aggregate = aggregates.of(text);
        const run = statement(aggregate ? aggregate.text : text, params);
        // A statement of the tenants' work (one with parameters, in a tenant's or a lookup's
        // scope): a lane. The rest, pg-boss's statements among them (its maintenance may run
        // long, and a lane runs its statements in turn), keep to the pool.
        if (lanes !== undefined && run.values !== undefined && scope.key !== neutralSession.key)
          return answer<R>(text, params, aggregate, await lanes.query(scope, run));
        const held = await hold();
        if (sessionOf(held.client) === scope.key) {
          try {
            const results = await held.client.query(run);
            held.release();
            return answer<R>(text, params, aggregate, results);
          } catch (error) {
            // A failed statement leaves the session as it was; a lost connection is destroyed.
            held.release(isConnectionError(error) ? (error as Error) : undefined);
            throw error;
          }
        }
        const switched = await switchedRun(held.client, scope, run);
        sessions.set(held.client, switched.ok ? scope.key : UNKNOWN);
        // A failed COMMIT or BEGIN means a broken connection: destroy it rather than reuse it.
        held.release(
          !switched.ok && switched.broken ? new Error("connection broken in a transaction") : undefined,
        );
        if (!switched.ok) throw switched.failure;
        return answer<R>(text, params, aggregate, switched.result);
      })(),
    );

  /** Holds a client whose session is neutral, for work outside any scope. */
  const holdNeutral = async () => {
    const held = await hold();
    if (sessionOf(held.client) !== neutralSession.key)
      try {
        await held.client.query(neutralSession.set.text);
        sessions.set(held.client, neutralSession.key);
      } catch (error) {
        sessions.set(held.client, UNKNOWN);
        held.release(error as Error);
        throw error;
      }
    return held;
  };

  return {
    engine: "postgres",
    schema: options.schema,
    query: (text, params) => queryIn(neutralSession, text, params),
    exec: async (sql) => {
      await queryIn(neutralSession, sql);
    },
    transaction: (fn) =>
      reporting(
        (async () => {
          const held = await hold();
          try {
            await held.query("BEGIN");
            // The session is left as it is; the transaction alone is neutral until its work
            // sets a scope of its own.
            if (sessionOf(held.client) !== neutralSession.key) await held.query(neutralInTransaction);
            const result = await fn(held.conn);
            await held.query("COMMIT");
            held.release();
            return result;
          } catch (error) {
            // A failed ROLLBACK means the connection is broken: destroy it rather than reuse it.
            await held.query("ROLLBACK").then(
              () => held.release(),
              (rollbackError: Error) => held.release(rollbackError),
            );
            throw error;
          }
        })(),
      ),
    queryIn,
    withConnection: async (fn) => {
      const held = await reporting(holdNeutral());
      try {
        return await fn(held.conn);
      } finally {
        held.release();
      }
    },
    close: async () => {
      await Promise.all([lanes?.close(), pool.end()]);
    },
  };
};

export const overPglite = (db: Pick<PGlite, "query" | "exec">): Queryable => ({
  query: async <R>(text: string, params?: ReadonlyArray<unknown>) => {
    if (params === undefined || params.length === 0) {
      // PGlite's extended protocol takes one statement; exec takes several.
      const results = await db.exec(text);
      const last = results[results.length - 1];
      return { rows: (last?.rows ?? []) as R[], rowCount: last?.affectedRows ?? last?.rows.length ?? 0 };
    }
    const result = await db.query<R>(text, params as unknown[]);
    return { rows: result.rows, rowCount: result.affectedRows ?? result.rows.length };
  },
  exec: async (sql) => {
    await db.exec(sql);
  },
});

/** Parameter types of each statement text PGlite has described, to serialize as its `query` does. */
const described = new WeakMap<PGlite, Map<string, ReadonlyArray<number>>>();
const DESCRIBED_TEXTS = 1000;

const describedTexts = (db: PGlite) => {
  let texts = described.get(db);
  if (!texts) {
    texts = new Map();
    described.set(db, texts);
  }
  return texts;
};

const remember = (db: PGlite, text: string, types: ReadonlyArray<number>) => {
  const texts = describedTexts(db);
  // The adapter's texts are a fixed set; the bound only guards against one that is not.
  if (texts.size >= DESCRIBED_TEXTS) texts.clear();
  texts.set(text, types);
  return types;
};

const paramTypes = async (db: PGlite, text: string) =>
  describedTexts(db).get(text) ??
  remember(
    db,
    text,
    (await db.describeQuery(text)).queryParams.map((p) => p.dataTypeID),
  );

/**
 * The parameter types of `text` as the session's current role sees it, for a caller that holds
 * the connection (PGlite's describeQuery would wait for it). Name lookup is checked at parse
 * time: a text of pg-boss's schema, described while the session is in a tenant's scope, would be
 * refused as the app role.
 */
const describeHeld = async (db: PGlite, text: string) => {
  const messages = await db.execProtocolStream(
    concat([
      protocol.serialize.parse({ text }),
      protocol.serialize.describe({ type: "S" }),
      protocol.serialize.sync(),
    ]),
    { syncToFs: false },
  );
  const description = messages.find((m) => m.name === "parameterDescription") as
    | { readonly dataTypeIDs?: ReadonlyArray<number> }
    | undefined;
  return remember(db, text, [...(description?.dataTypeIDs ?? [])]);
};

/** Parse, bind, describe and execute one statement, its parameters serialized as PGlite's `query` would. */
const extendedMessages = (
  db: PGlite,
  text: string,
  types: ReadonlyArray<number>,
  params: ReadonlyArray<unknown>,
  /** The prepared statement's name, and whether it is parsed already (then only bound). */
  prepared?: { readonly name: string; readonly parsed: boolean },
) => {
  const values = params.map((value, i) => {
    if (value === null || value === undefined) return null;
    const serialize = db.serializers[types[i] as number];
    return serialize ? serialize(value) : String(value);
  });
  const statement = prepared?.name ?? "";
  return [
    ...(prepared?.parsed ? [] : [protocol.serialize.parse({ text, name: statement })]),
    protocol.serialize.bind({ statement, values }),
    protocol.serialize.describe({ type: "P" }),
    protocol.serialize.execute({}),
  ];
};

/**
 * PGlite's one connection, remembering the scope its session is in (`SqlDatabase.queryIn`), in
 * this process or in the database's own. Each call is one call into PGlite: with parameters, the
 * statement (and before it the scope's statement, when the session is in another scope) goes as
 * one extended-protocol batch ending in Sync, an implicit transaction, so the statement never
 * runs unless the scope took; where `db.query` made six calls and `db.transaction` sixteen
 * (measured: 0.65 -> 0.39 ms for a one-row page, 1.24 -> 0.98 ms for 51 rows, before the scope
 * was kept across calls). Without parameters a text may hold several statements, which go by
 * the simple protocol, after the scope's statement run on its own. The scope is decided and set
 * while the connection is held, so no other call runs between. It fails with the same database
 * error as `query`.
 */
export const pgliteSession = (db: PGlite) => {
  let session = neutralSession.key;
  const UNKNOWN = "";
  const named = statementNames();
  /** The prepared statements this connection has parsed. */
  const prepares = new Set<string>();

  type Results = ReturnType<typeof pgliteParse.parseResults>;
  /**
   * Postgres' reply to `messages`, its bytes as they were written. PGlite's own execProtocolStream
   * parses every message as it comes; read raw, an aggregate form's one text skips that (see
   * `singleText`), 50 us of the 225 a 51-row page took (microbenchmark).
   */
  const exchange = async (messages: Uint8Array) => {
    const chunks: Uint8Array[] = [];
    await db.execProtocolRawStream(messages, {
      syncToFs: false,
      // A view of the WebAssembly heap, which the next write reuses.
      onRawData: (chunk) => chunks.push(chunk.slice()),
    });
    await db.syncToFs();
    return chunks.length === 1 ? (chunks[0] as Uint8Array) : concat(chunks);
  };
  /** The reply's results, or its first database error thrown, as execProtocolStream would. */
  const parsed = (reply: Uint8Array, rowMode?: "array"): Results => {
    const messages: BackendMessage[] = [];
    new protocol.Parser().parse(reply, (message) => messages.push(message));
    const error = messages.find((m) => m instanceof protocol.messages.DatabaseError);
    if (error) throw error;
    return pgliteParse.parseResults(messages, db.parsers, rowMode && { rowMode });
  };
  const run = async (messages: Uint8Array, rowMode?: "array") => parsed(await exchange(messages), rowMode);
  /** The last statement's result. */
  const last = (results: Results) => results[results.length - 1];
  type Read<T> = (reply: Uint8Array) => T;
  const lastOf =
    (rowMode?: "array"): Read<Results[number] | undefined> =>
    (reply) =>
      last(parsed(reply, rowMode));

  const execute = async <T>(
    scope: SessionScope,
    text: string,
    params: ReadonlyArray<unknown> | undefined,
    read: Read<T>,
  ): Promise<T> => {
    const simple = params === undefined || params.length === 0;
    const known = simple ? [] : describedTexts(db).get(text);
    // The scope's own statement reads no table: described in any scope alike.
    const setTypes = await paramTypes(db, scope.set.text);
    return db._runExclusiveTransaction(() =>
      db._runExclusiveQuery(async () => {
        let switching = session !== scope.key;
        const setMessages = () => extendedMessages(db, scope.set.text, setTypes, scope.set.params);
        let types = known;
        if (types === undefined) {
          // First sight of the text: described in the scope it runs in, as the role it runs as.
          if (switching) {
            session = UNKNOWN;
            await run(concat([...setMessages(), protocol.serialize.sync()]));
            session = scope.key;
            switching = false;
          }
          types = await describeHeld(db, text);
        }
        const set = switching ? setMessages() : [];
        if (switching) session = UNKNOWN;
        if (simple) {
          if (switching) {
            await run(concat([...set, protocol.serialize.sync()]));
            session = scope.key;
          }
          return read(await exchange(concat([protocol.serialize.query(text), protocol.serialize.sync()])));
        }
        const name = named(text);
        const prepared = name === undefined ? undefined : { name, parsed: prepares.has(name) };
        let result: T;
        try {
          result = read(
            await exchange(
              concat([
                ...set,
                ...extendedMessages(db, text, types, params, prepared),
                protocol.serialize.sync(),
              ]),
            ),
          );
        } catch (error) {
          // Whether its Parse ran before the failure is unknown: closing it (no error when it
          // does not exist) has the next call parse it afresh.
          if (prepared && !prepared.parsed)
            await run(
              concat([
                protocol.serialize.close({ type: "S", name: prepared.name }),
                protocol.serialize.sync(),
              ]),
            );
          throw error;
        }
        if (prepared) prepares.add(prepared.name);
        session = scope.key;
        return result;
      }),
    );
  };

  const aggregates = aggregateForms("columns");

  /**
   * The rows of `text` as arrays, by way of its aggregate form when it has one: PGlite spends
   * most of a SELECT's time writing each field of each row out of WebAssembly (measured: 51 rows
   * of the 17 asset columns 0.96-1.16 ms, the same rows as one JSON array of arrays 0.31 ms, a
   * count of them 0.17 ms). A text is run as it is the first time, which tells its columns.
   */
  const queryInArrays = async (
    scope: SessionScope,
    text: string,
    params?: ReadonlyArray<unknown>,
  ): Promise<RowArrays> => {
    const aggregate = aggregates.of(text);
    if (aggregate) {
      const json = await execute(
        scope,
        aggregate.text,
        params,
        (reply) => singleText(reply) ?? ((lastOf("array")(reply)?.rows[0]?.[0] ?? "[]") as string),
      );
      return {
        fields: aggregate.fields,
        json,
        layout: aggregate.layout,
        floats: aggregate.floats,
        rowCount: -1,
      };
    }
    const result = await execute(scope, text, params, lastOf("array"));
    const rows = (result?.rows ?? []) as unknown[][];
    const fields = (result?.fields ?? []).map((f) => f.name);
    if (aggregate === undefined) aggregates.learn(text, params, result?.fields ?? []);
    // The command tag's count, as pg answers: PGlite's affectedRows is 0 for a SELECT, and so
    // would differ from the aggregate form's count of its rows.
    return { fields, rows, rowCount: result?.rowCount ?? rows.length };
  };

  const queryIn = async <R>(
    scope: SessionScope,
    text: string,
    params?: ReadonlyArray<unknown>,
  ): Promise<QueryResult<R>> => rowObjects<R>(await queryInArrays(scope, text, params));

  /** A transaction, neutral until its work sets a scope; the session is as it was after. */
  const transaction = <T>(fn: (tx: Queryable) => Promise<T>) =>
    db.transaction(async (tx) => {
      if (session !== neutralSession.key) await tx.exec(neutralInTransaction);
      return fn(overPglite(tx));
    });

  const plain: Queryable = {
    query: (text, params) => queryIn(neutralSession, text, params),
    exec: async (sql) => {
      await queryIn(neutralSession, sql);
    },
  };
  return { ...plain, queryIn, queryInArrays, transaction };
};

/**
 * Rows as arrays of values, in the order of `fields` (`pgliteSession().queryInArrays`): as
 * PGlite parsed them, or as the JSON text of its aggregate form, parsed where they are used.
 */
export type RowArrays =
  | {
      readonly fields: ReadonlyArray<string>;
      readonly rows: ReadonlyArray<ReadonlyArray<unknown>>;
      readonly rowCount: number;
    }
  | {
      readonly fields: ReadonlyArray<string>;
      /** The aggregate form's JSON text: an array of rows or of columns (see `Layout`). */
      readonly json: string;
      readonly layout: Layout;
      /** The float columns: JSON writes NaN and the infinities as strings. */
      readonly floats: ReadonlyArray<number>;
      readonly rowCount: -1;
    };

/**
 * Column types whose JSON form parses back to the value PGlite's parsers give: bool, int2, int4,
 * int8 (epoch milliseconds, safe integers), text, bpchar, varchar, json, jsonb, and the floats
 * (apart from NaN and the infinities, see `floats`). Arrays, bytea, numeric and the date types
 * are not among them: a text with such a column is never aggregated.
 */
const JSON_SAFE = new Set([16, 20, 21, 23, 25, 1042, 1043, 114, 3802]);
const FLOATS = new Set([700, 701]);

/**
 * How an aggregate form writes its rows: `rows`, an array of rows, each an array of its values
 * (json_agg of json_build_array); `columns`, an array of columns, each an array of its values, one
 * per row, or null when there are no rows (json_build_array of array_agg). By columns, Postgres
 * works out how to write each type once per column instead of once per value: PGlite answered 51
 * rows of the 17 asset columns in 170-183 µs instead of 190-220, the text 7.9 KB instead of 8.8.
 * A Postgres server gained nothing (146-148 -> 152-156 µs of its CPU): it keeps rows.
 */
export type Layout = "rows" | "columns";

interface Aggregate {
  readonly layout: Layout;
  readonly text: string;
  readonly fields: ReadonlyArray<string>;
  readonly floats: ReadonlyArray<number>;
}

/**
 * The aggregate form of a SELECT: its rows as one JSON text laid out as `layout`, in its own
 * order (every aggregate over a sorted subquery takes the rows in that order when, as here,
 * nothing else is joined or grouped). Only a single SELECT (callers ask only of texts run with parameters, the
 * repositories' reads) whose columns are all of `JSON_SAFE` or `FLOATS` and have distinct names
 * has one.
 */
const aggregateOf = (
  text: string,
  fields: ReadonlyArray<{ readonly name: string; readonly dataTypeID: number }>,
  layout: Layout,
): Aggregate | null => {
  if (!/^\s*select\s/i.test(text) || text.includes(";")) return null;
  const names = fields.map((f) => f.name);
  if (
    names.length === 0 ||
    names.length > 100 ||
    new Set(names).size !== names.length ||
    !fields.every((f) => JSON_SAFE.has(f.dataTypeID) || FLOATS.has(f.dataTypeID))
  )
    return null;
  const columns = names.map((name) => `q."${name.replaceAll('"', '""')}"`);
  // The text on a line of its own: one ending in a -- comment would comment out `) q`.
  const from = `FROM (${text}\n) q`;
  return {
    layout,
    text:
      layout === "rows"
        ? `SELECT coalesce(json_agg(json_build_array(${columns.join(", ")})), '[]')::text AS json ${from}`
        : `SELECT json_build_array(${columns.map((c) => `array_agg(${c})`).join(", ")})::text AS json ${from}`,
    fields: names,
    floats: fields.flatMap((f, i) => (FLOATS.has(f.dataTypeID) ? [i] : [])),
  };
};

/**
 * Each text's aggregate form, learnt from its first answer: `of` is undefined for a text not yet
 * seen, null for one without a form. Texts run without parameters may hold several statements:
 * never aggregated, nor kept. Bounded like the statement names (the adapter's texts are a fixed
 * set).
 */
const aggregateForms = (layout: Layout) => {
  const forms = new Map<string, Aggregate | null>();
  return {
    of: (text: string) => forms.get(text),
    learn: (
      text: string,
      params: ReadonlyArray<unknown> | undefined,
      fields: ReadonlyArray<{ readonly name: string; readonly dataTypeID: number }>,
    ) => {
      if (params !== undefined && params.length > 0 && forms.size < 1000)
        forms.set(text, aggregateOf(text, fields, layout));
    },
  };
};

type BackendMessage = Parameters<typeof pgliteParse.parseResults>[0][number];

/** ParseComplete, BindComplete, RowDescription, CommandComplete, ReadyForQuery: nothing a text needs. */
const PASSING = new Set(["1", "2", "T", "C", "Z"].map((c) => c.charCodeAt(0)));
const DATA_ROW = "D".charCodeAt(0);
const utf8 = new TextDecoder();

/**
 * The one field of the one row of `reply` (Postgres' messages) as text; undefined when the reply
 * holds anything else: an error, a notice, no row or several, a NULL, a message cut short. Then
 * the reply is parsed in full.
 */
export const singleText = (reply: Uint8Array): string | undefined => {
  const view = new DataView(reply.buffer, reply.byteOffset, reply.byteLength);
  let text: string | undefined;
  let at = 0;
  while (at + 5 <= reply.length) {
    const type = reply[at] as number;
    const end = at + 1 + view.getInt32(at + 1);
    if (end < at + 5 || end > reply.length) return undefined;
    if (type === DATA_ROW) {
      if (text !== undefined || end < at + 11 || view.getInt16(at + 5) !== 1) return undefined;
      const size = view.getInt32(at + 7);
      if (size < 0 || at + 11 + size !== end) return undefined;
      text = utf8.decode(reply.subarray(at + 11, end));
    } else if (!PASSING.has(type)) return undefined;
    at = end;
  }
  return at === reply.length ? text : undefined;
};

/** The rows of an aggregate form's answer (its JSON text) as objects. */
const aggregateRows = <R>(aggregate: Aggregate, json: unknown): QueryResult<R> =>
  rowObjects<R>({
    fields: aggregate.fields,
    json: typeof json === "string" ? json : "[]",
    layout: aggregate.layout,
    floats: aggregate.floats,
    rowCount: -1,
  });

/** The rows as objects keyed by column name, as `queryIn` answers. */
export const rowObjects = <R>(result: RowArrays): QueryResult<R> => {
  if (!("json" in result))
    return { rows: objectsOf(result.fields, "rows")(result.rows) as R[], rowCount: result.rowCount };
  const parsed = JSON.parse(result.json) as Array<unknown[] | null>;
  // Columns with no rows are nulls: as rows, none.
  const values = result.layout === "columns" && parsed[0] === null ? [] : (parsed as unknown[][]);
  for (const column of result.floats) {
    if (result.layout === "rows") {
      for (const row of values) if (typeof row[column] === "string") row[column] = Number(row[column]);
    } else {
      const cells = values[column] ?? [];
      for (let i = 0; i < cells.length; i++) if (typeof cells[i] === "string") cells[i] = Number(cells[i]);
    }
  }
  const objects = objectsOf(result.fields, result.layout)(values) as R[];
  return { rows: objects, rowCount: objects.length };
};

type ToObjects = (values: ReadonlyArray<ReadonlyArray<unknown>>) => Record<string, unknown>[];
const toObjects = new Map<string, ToObjects>();

/**
 * Rows as objects, from rows or columns (`Layout`), by a function written for the columns: each
 * row one object literal, so every row of a text has the same shape from the start (and what
 * reads them stays monomorphic), where a loop setting the names one by one took 13.7 µs for 51
 * rows of 17 columns against 2.2 µs (microbenchmark). Names are quoted with JSON.stringify; a
 * `__proto__` column, which a literal would take for the prototype, goes by the loop. Made once
 * per column list and layout (a fixed set: the adapter's texts), bounded all the same.
 */
const objectsOf = (fields: ReadonlyArray<string>, layout: Layout): ToObjects => {
  const key = `${layout}\u0000${fields.join("\u0000")}`;
  let build = toObjects.get(key);
  if (build === undefined) {
    if (fields.includes("__proto__")) {
      build = (values) => {
        const count = layout === "rows" ? values.length : (values[0]?.length ?? 0);
        return Array.from({ length: count }, (_, i) => {
          const row: Record<string, unknown> = {};
          // Defined, not assigned: assigning `__proto__` would set the prototype.
          for (let j = 0; j < fields.length; j++)
            Object.defineProperty(row, fields[j] as string, {
              value: layout === "rows" ? values[i]?.[j] : values[j]?.[i],
              enumerable: true,
              writable: true,
              configurable: true,
            });
          return row;
        });
      };
    } else if (layout === "rows") {
      const literal = fields.map((name, j) => `${JSON.stringify(name)}: v[${j}]`).join(", ");
      build = new Function(
        "rows",
        `const out = new Array(rows.length);
        for (let i = 0; i < rows.length; i++) { const v = rows[i]; out[i] = { ${literal} }; }
        return out;`,
      ) as ToObjects;
    } else {
      const literal = fields.map((name, j) => `${JSON.stringify(name)}: c${j}[i]`).join(", ");
      build = new Function(
        "columns",
        `if (columns.length === 0) return [];
        const [${fields.map((_, j) => `c${j}`).join(", ")}] = columns;
        const out = new Array(c0.length);
        for (let i = 0; i < out.length; i++) out[i] = { ${literal} };
        return out;`,
      ) as ToObjects;
    }
    if (toObjects.size >= 1000) toObjects.clear();
    toObjects.set(key, build);
  }
  return build;
};

const concat = (parts: ReadonlyArray<Uint8Array>) => {
  const out = new Uint8Array(parts.reduce((n, part) => n + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
};

export interface PgliteOptions {
  /**
   * Postgres' shared_buffers in MiB. PGlite's default (160 MiB) is sized for a server; the pages
   * are read through the OS's cache anyway, and every MiB here is resident in the host process.
   */
  readonly sharedBuffersMb?: number;
}

/** PGlite as this adapter runs it, in this process or in its own (`pglite-child.ts`). */
export const createPglite = (dataDir: string | undefined, options: PgliteOptions = {}) =>
  PGlite.create(dataDir, {
    startParams: [...PGlite.defaultStartParams, "-c", `shared_buffers=${options.sharedBuffersMb ?? 16}MB`],
  });

/**
 * Creates the cluster in `dataDir` in a short-lived child process. initdb runs in a WebAssembly
 * instance of its own whose memory the host would otherwise keep for its whole life (measured:
 * 820 MiB resident after a first start in-process, against 380 MiB when reopening).
 */
export const initdbApart = async (dataDir: string) => {
  if (existsSync(path.join(dataDir, "PG_VERSION"))) return;
  const module = import.meta.resolve("@electric-sql/pglite");
  const script = `import { PGlite } from ${JSON.stringify(module)};
const db = await PGlite.create(${JSON.stringify(dataDir)});
await db.close();`;
  await new Promise<void>((resolve, reject) => {
    execFile(process.execPath, ["--input-type=module", "-e", script], (error, _stdout, stderr) =>
      error
        ? reject(new Error(`creating the PGlite cluster in ${dataDir}: ${stderr || error.message}`))
        : resolve(),
    );
  });
};

/**
 * Postgres compiled to WebAssembly, in this process, its files under `dataDir` (in memory when
 * omitted). One process owns a data directory at a time. Its transactions queue the other
 * queries, so they are serializable.
 */
export const openPglite = async (dataDir?: string, options: PgliteOptions = {}): Promise<SqlDatabase> => {
  if (dataDir !== undefined) await initdbApart(dataDir);
  const db = await createPglite(dataDir, options);
  const session = pgliteSession(db);
  return {
    engine: "pglite",
    ...session,
    // One connection is all PGlite has; each statement on it is neutral (session locks).
    withConnection: (fn) => fn({ query: session.query, exec: session.exec }),
    close: () => db.close(),
  };
};

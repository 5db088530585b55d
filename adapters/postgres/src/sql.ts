import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { PGlite, parse as pgliteParse, protocol } from "@electric-sql/pglite";
import pg from "pg";
import { sharedLanes, switchedRun } from "./lanes.js";
import { type JsonForm, type RowArrays, rowForms, rowObjects } from "./row-forms.js";
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

  const aggregates = rowForms("json");
  /**
   * The rows of a SELECT the aggregate way when it has one: one JSON text to parse instead of a
   * field to parse per column and row (client CPU for 51 asset rows 107-191 -> 78-83 µs).
   */
  const answer = <R>(
    text: string,
    params: ReadonlyArray<unknown> | undefined,
    aggregate: JsonForm | null | undefined,
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
  /** Each result column's format (0 text, 1 binary); all text when absent. */
  formats?: ReadonlyArray<number>,
) => {
  const values = params.map((value, i): string | null => {
    if (value === null || value === undefined) return null;
    const serialize = db.serializers[types[i] as number];
    return serialize ? serialize(value) : String(value);
  });
  const statement = prepared?.name ?? "";
  return [
    ...(prepared?.parsed ? [] : [protocol.serialize.parse({ text, name: statement })]),
    formats ? bindWithFormats(statement, values, formats) : protocol.serialize.bind({ statement, values }),
    // With formats, the columns are known: their description would be work for nothing (3-6 µs
    // of a 51-row page's 65-75).
    ...(formats ? [] : [protocol.serialize.describe({ type: "P" })]),
    protocol.serialize.execute({}),
  ];
};

const encoder = new TextEncoder();

/**
 * Bind of the unnamed portal to `statement`: its parameters in text, each result column in the
 * format given. PGlite's own serializer (0.5.16) writes one result format code where the protocol
 * wants their count and then the codes, which only the default, text, survives.
 */
const bindWithFormats = (
  statement: string,
  values: ReadonlyArray<string | null>,
  formats: ReadonlyArray<number>,
) => {
  const name = encoder.encode(statement);
  const encoded = values.map((value) => (value === null ? null : encoder.encode(value)));
  // Length, portal "", statement, no parameter format codes (all text), the parameters, the
  // result format codes.
  const size =
    4 +
    1 +
    name.length +
    1 +
    2 +
    2 +
    encoded.reduce((n, v) => n + 4 + (v?.length ?? 0), 0) +
    2 +
    2 * formats.length;
  const out = new Uint8Array(1 + size);
  const view = new DataView(out.buffer);
  out[0] = "B".charCodeAt(0);
  view.setInt32(1, size);
  let at = 6;
  out.set(name, at);
  at += name.length + 1;
  view.setInt16(at, 0);
  view.setInt16(at + 2, encoded.length);
  at += 4;
  for (const value of encoded) {
    view.setInt32(at, value === null ? -1 : value.length);
    at += 4;
    if (value === null) continue;
    out.set(value, at);
    at += value.length;
  }
  view.setInt16(at, formats.length);
  at += 2;
  for (const format of formats) {
    view.setInt16(at, format);
    at += 2;
  }
  return out;
};

const INBOX = 64 * 1024;
const INBOX_KEPT = 1024 * 1024;

const BIND_COMPLETE = "2".charCodeAt(0);
const DATA_ROW = "D".charCodeAt(0);
const ERROR_RESPONSE = "E".charCodeAt(0);

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
   * Where replies are gathered, one at a time: each is read before the next is asked for, as
   * the connection is held from one to the other. Reused, where a buffer per piece and one to
   * join them were three allocations of a page's size per call; a reply past `INBOX_KEPT` grows
   * it for that call only.
   */
  let inbox = new Uint8Array(INBOX);
  /**
   * Postgres' reply to `messages`, its bytes as they were written, in `inbox` until the next
   * exchange. PGlite's own execProtocolStream parses every message as it comes, every field of
   * every row into a string; read raw, a text's rows stay bytes (see `lastRows`).
   */
  const exchange = async (messages: Uint8Array) => {
    if (inbox.length > INBOX_KEPT) inbox = new Uint8Array(INBOX);
    let size = 0;
    await db.execProtocolRawStream(messages, {
      syncToFs: false,
      // A view of the WebAssembly heap, which the next write reuses: copied at once.
      onRawData: (chunk) => {
        if (size + chunk.length > inbox.length) {
          const grown = new Uint8Array(Math.max(inbox.length * 2, size + chunk.length));
          grown.set(inbox.subarray(0, size));
          inbox = grown;
        }
        inbox.set(chunk, size);
        size += chunk.length;
      },
    });
    await db.syncToFs();
    return inbox.subarray(0, size);
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
  /**
   * The rows the reply's last statement answered, as their DataRow messages (one run of bytes),
   * and how many; a database error in the reply is thrown as `parsed` throws it. Notices, and the
   * rows of a scope's statement before it, pass.
   */
  const lastRows = (reply: Uint8Array): { readonly dataRows: Uint8Array; readonly rowCount: number } => {
    const view = new DataView(reply.buffer, reply.byteOffset, reply.byteLength);
    let first = 0;
    let last = 0;
    let rowCount = 0;
    let at = 0;
    while (at + 5 <= reply.length) {
      const type = reply[at];
      const end = at + 1 + view.getInt32(at + 1);
      if (end < at + 5 || end > reply.length) break;
      if (type === ERROR_RESPONSE) parsed(reply);
      if (type === BIND_COMPLETE) rowCount = 0;
      else if (type === DATA_ROW) {
        if (rowCount++ === 0) first = at;
        last = end;
      }
      at = end;
    }
    if (at !== reply.length) throw new Error("the database's reply was cut short");
    return { dataRows: reply.slice(first, rowCount === 0 ? first : last), rowCount };
  };
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
    /** Each result column's format (a statement with parameters only). */
    formats?: ReadonlyArray<number>,
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
                ...extendedMessages(db, text, types, params, prepared, formats),
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

  const forms = rowForms("binary");

  /**
   * The rows of `text` as arrays, or as its binary form's DataRow messages when it has one (see
   * `Layout`). A text is run as it is the first time, which tells its columns.
   */
  const queryInArrays = async (
    scope: SessionScope,
    text: string,
    params?: ReadonlyArray<unknown>,
  ): Promise<RowArrays> => {
    const form = forms.of(text);
    if (form) {
      const { dataRows, rowCount } = await execute(scope, text, params, lastRows, form.formats);
      return { fields: form.fields, dataRows, types: form.types, rowCount };
    }
    const result = await execute(scope, text, params, lastOf("array"));
    const rows = (result?.rows ?? []) as unknown[][];
    const fields = (result?.fields ?? []).map((f) => f.name);
    if (form === undefined) forms.learn(text, params, result?.fields ?? []);
    // The command tag's count, as pg answers: PGlite's affectedRows is 0 for a SELECT.
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

type BackendMessage = Parameters<typeof pgliteParse.parseResults>[0][number];

/** The rows of a `json` aggregate form's answer (its JSON text) as objects. */
const aggregateRows = <R>(aggregate: JsonForm, json: unknown): QueryResult<R> =>
  rowObjects<R>({
    fields: aggregate.fields,
    json: typeof json === "string" ? json : "[]",
    floats: aggregate.floats,
    rowCount: -1,
  });

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
    // An int8 as a JS number, as on a server (`types` above) and in the binary form: PGlite's
    // own parser answers a BigInt past 2^53, which JSON.stringify refuses.
    parsers: { [INT8]: (value: string) => Number(value) },
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

import pg from "pg";
import { sharedLanes, switchedRun } from "./lanes.js";
import { type JsonForm, rowForms, rowObjects } from "./row-forms.js";
import {
  INT8,
  type Queryable,
  type QueryResult,
  type SessionScope,
  type SqlDatabase,
  statementNames,
} from "./sql.js";
import { neutralInTransaction, neutralSession } from "./tenancy.js";

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
  // A server never reached was not lost: the start that needs it fails, saying so (`vod`'s
  // start-failure line), without a warning before it.
  let reached = false;
  const lost = (error: Error) => {
    lastLoss = Date.now();
    if (!healthy || !reached) return;
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
  pool.on("connect", (client) => {
    reached = true;
    client.on("error", (error: Error) => {
      faults.set(client, error);
      lost(error);
    });
  });
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
   * The rows of a SELECT the aggregate way when it has one: one JSON text to parse costs the
   * client less than a field to parse per column and row.
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

/** The rows of a `json` aggregate form's answer (its JSON text) as objects. */
const aggregateRows = <R>(aggregate: JsonForm, json: unknown): QueryResult<R> =>
  rowObjects<R>({
    fields: aggregate.fields,
    json: typeof json === "string" ? json : "[]",
    floats: aggregate.floats,
    rowCount: -1,
  });

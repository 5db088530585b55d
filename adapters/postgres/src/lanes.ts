import type { Writable } from "node:stream";
import pg from "pg";
import type { SessionScope } from "./sql.js";

/**
 * A connection that statements share, each written behind the last without waiting for its
 * answer (pg's pipeline mode). `scope` is the scope the session will be in once every statement
 * written on it has run, as far as that is known.
 */
interface Shared {
  readonly client: pg.Client;
  readonly ready: Promise<pg.Client>;
  scope: string;
  /** Scope switches written whose outcome is not known yet. */
  switching: number;
  /** The number of the last switch written. */
  switches: number;
  /** Statements written and not answered. */
  inFlight: number;
  dead: boolean;
  /** Whether the socket is held corked until the end of this turn of the event loop. */
  corked: boolean;
}

/** What a lane's connection is opened with: the pool's settings, in pipeline mode. */
export type LaneConfig = pg.ClientConfig;

export interface Lanes {
  /** Runs `statement` on a shared connection whose session is in `scope` when it runs. */
  query(scope: SessionScope, statement: pg.QueryConfig): Promise<pg.QueryResult>;
  close(): Promise<void>;
}

const UNKNOWN = "";
/** Statements a lane takes before the next one goes to a lane with fewer, at the cost of a switch. */
const BUSY = 16;

/** A client's socket: pg's own, not typed. */
const socketOf = (client: pg.ClientBase): Partial<Writable> | undefined =>
  (client as unknown as { connection?: { stream?: Partial<Writable> } }).connection?.stream;

/**
 * What a scope switch with its statement came to (`switchedRun`): the statement's result, or the
 * first failure among the four (the statement then ran in no scope of the caller's), and whether
 * BEGIN or COMMIT failed (`broken`: the session is in no known state, the connection should go).
 */
export type Switched =
  /** One result per statement of the text: a text of several, without parameters, answers many. */
  | { readonly ok: true; readonly result: pg.QueryResult | pg.QueryResult[] }
  | { readonly ok: false; readonly failure: unknown; readonly broken?: Error };

/**
 * BEGIN, the scope set for the session, the statement and COMMIT, written at once (pg's pipeline
 * mode; one write, the socket corked across the four), so that the statement never runs unless
 * the scope took: after a failure before it, the server answers COMMIT with a ROLLBACK, which
 * undoes the switch too. Both the pool (`queryIn`) and the lanes switch this way.
 */
export const switchedRun = async (
  client: pg.ClientBase,
  scope: SessionScope,
  statement: pg.QueryConfig,
): Promise<Switched> => {
  const stream = socketOf(client);
  stream?.cork?.();
  let sent: Promise<pg.QueryResult | pg.QueryResult[]>[];
  try {
    sent = [
      client.query("BEGIN"),
      client.query(scope.set.text, scope.set.params as unknown[]),
      client.query(statement),
      client.query("COMMIT"),
    ];
  } finally {
    stream?.uncork?.();
  }
  const settled = await Promise.allSettled(sent);
  const failed = settled.find((s) => s.status === "rejected");
  const broken = [settled[0], settled[3]].find((s) => s?.status === "rejected");
  if (failed === undefined)
    return { ok: true, result: (settled[2] as PromiseFulfilledResult<pg.QueryResult>).value };
  return {
    ok: false,
    failure: failed.reason,
    ...(broken?.status === "rejected" ? { broken: broken.reason as Error } : {}),
  };
};

/**
 * A few connections that the tenants' statements outside transactions share, instead of each
 * taking a pooled connection for itself (`SqlDatabase.queryIn` in a tenant's or a lookup's
 * scope). Statements from concurrent requests leave in one write and come back in one read, and
 * the server's backend runs them back to back, which costs both the host and the server less per
 * request than a connection each (docs/postgres.md). A statement takes the least busy lane whose
 * session is already in its scope, else the least busy lane.
 *
 * Row-level security depends on each statement running in its own scope, and nothing is waited
 * for between the statements of one lane. So a statement goes alone only when its scope is the
 * lane's and no switch written before it is still unanswered (should a switch fail, the
 * statements behind it must not run in the scope before it); else it goes with its own switch,
 * BEGIN, the scope's statement, itself and COMMIT, in one write. A failed statement in a switch
 * rolls the switch back with it, and the lane's scope is unknown until the next one.
 *
 * A connection that fails (a restart, `pg_terminate_backend`) fails the statements on it, as a
 * pooled one would, and the lane opens a new one for the next statement.
 */
export const sharedLanes = (
  count: number,
  config: LaneConfig,
  neutral: string,
  lost: (error: Error) => void,
): Lanes => {
  const lanes: Array<Shared | undefined> = new Array(count).fill(undefined);
  let closed = false;

  const open = (index: number): Shared => {
    const client = new pg.Client({ ...config, pipeline: true });
    const shared: Shared = {
      client,
      ready: client.connect().then(() => client),
      scope: neutral,
      switching: 0,
      switches: 0,
      inFlight: 0,
      dead: false,
      corked: false,
    };
    const fail = (error?: Error) => {
      if (shared.dead) return;
      shared.dead = true;
      if (lanes[index] === shared) lanes[index] = undefined;
      if (error) lost(error);
    };
    client.on("error", fail);
    client.on("end", () => fail());
    // A failed connect is reported by the statement that waited for it.
    shared.ready.catch(() => fail());
    lanes[index] = shared;
    return shared;
  };

  const pick = (key: string): Shared => {
    let best: Shared | undefined;
    let empty = -1;
    for (let i = 0; i < count; i++) {
      const lane = lanes[i];
      if (lane === undefined) {
        if (empty < 0) empty = i;
        continue;
      }
      if (lane.scope === key && lane.switching === 0 && lane.inFlight < BUSY) return lane;
      if (best === undefined || lane.inFlight < best.inFlight) best = lane;
    }
    // Lanes open as the load asks for them.
    if (empty >= 0 && (best === undefined || best.inFlight > 0)) return open(empty);
    return best as Shared;
  };

  /** A broken session (BEGIN or COMMIT refused): the connection goes, with what is on it. */
  const discard = (shared: Shared, error: Error) => {
    lost(error);
    socketOf(shared.client)?.destroy?.();
  };

  const run = async (shared: Shared, scope: SessionScope, statement: pg.QueryConfig) => {
    const client = await shared.ready;
    // pg writes each query apart: the socket held corked until the end of this turn of the event
    // loop, the statements of every request the turn runs leave in one write, not one syscall
    // each. The socket is pg's own, not typed.
    if (!shared.corked) {
      const stream = socketOf(client);
      shared.corked = true;
      stream?.cork?.();
      process.nextTick(() => {
        shared.corked = false;
        stream?.uncork?.();
      });
    }
    if (shared.switching === 0 && shared.scope === scope.key) return client.query(statement);
    const number = ++shared.switches;
    shared.switching++;
    shared.scope = scope.key;
    const switched = await switchedRun(client, scope, statement);
    shared.switching--;
    // A lane's statements have parameters: one statement, one result.
    if (switched.ok) return switched.result as pg.QueryResult;
    if (shared.switches === number) shared.scope = UNKNOWN;
    if (switched.broken) discard(shared, switched.broken);
    throw switched.failure;
  };

  return {
    query: async (scope, statement) => {
      if (closed) throw new Error("database closed");
      const shared = pick(scope.key);
      shared.inFlight++;
      try {
        return await run(shared, scope, statement);
      } finally {
        shared.inFlight--;
      }
    },
    close: async () => {
      closed = true;
      await Promise.all(
        lanes.map((lane) => lane?.ready.then((client) => client.end()).catch(() => undefined)),
      );
    },
  };
};

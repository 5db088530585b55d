// The embedded database's own process: PGlite on one data directory, driven by the host over IPC
// (see pglite-process.ts for the protocol), and by other processes of the same data directory
// (`vod tenant suspend`, `vod backup`) over a local socket, with the same requests. It ends only
// when the host closes it or goes away, so that no orphan keeps the data directory open.
import { randomBytes, timingSafeEqual } from "node:crypto";
import { writeFileSync } from "node:fs";
import type { Server, Socket } from "node:net";
import { createServer } from "node:net";
import type { PGlite } from "@electric-sql/pglite";
import { initdbApart } from "./initdb.js";
import { pgliteSnapshot, type Snapshot } from "./pglite-backup.js";
import { createPglite, type PgliteOptions, pgliteSession } from "./pglite-session.js";
import {
  DataDirectoryInUse,
  frame,
  type Holder,
  holdDirectory,
  readFrames,
  shareAddress,
  shareKeyPath,
} from "./pglite-share.js";
import type { Queryable, SessionScope } from "./sql.js";

export type Request =
  | {
      readonly id: number;
      readonly op: "query";
      readonly tx?: number;
      readonly text: string;
      readonly params?: unknown[];
    }
  | { readonly id: number; readonly op: "exec"; readonly tx?: number; readonly sql: string }
  | {
      readonly id: number;
      readonly op: "queryIn";
      readonly scope: SessionScope;
      readonly text: string;
      readonly params?: unknown[];
    }
  | { readonly id: number; readonly op: "begin" }
  | { readonly id: number; readonly op: "end"; readonly tx: number; readonly commit: boolean }
  | { readonly id: number; readonly op: "close" }
  /** Who owns the directory (`Holder`); the one request answered before `auth`. */
  | { readonly id: number; readonly op: "hello" }
  /** The key in `shareKeyPath`: a process that cannot read it gets nothing else. */
  | { readonly id: number; readonly op: "auth"; readonly key: string }
  /** Passed on to every other process on this database (`Reply` `broadcast`). */
  | { readonly id: number; readonly op: "publish"; readonly message: unknown }
  /** A consistent copy of the data directory, with its tables' row counts (`Snapshot`). */
  | { readonly id: number; readonly op: "snapshot" };

export type Reply =
  | { readonly ready: true }
  | { readonly inUse: Holder }
  | { readonly broadcast: unknown }
  | { readonly id: number; readonly ok: true; readonly result?: unknown }
  | { readonly id: number; readonly ok: false; readonly error: Record<string, unknown> };

export interface ChildOptions extends PgliteOptions {
  /** The process that owns the directory through this one, as others are told. */
  readonly owner: { readonly pid: number; readonly command: string };
}

/** What of a database error the host needs: the message, and SQLSTATE and its details. */
const describe = (error: unknown): Record<string, unknown> => {
  if (!(error instanceof Error)) return { message: String(error) };
  const fields: Record<string, unknown> = { message: error.message };
  for (const key of ["code", "detail", "constraint", "severity", "schema", "table", "column", "hint"])
    if (key in error) fields[key] = (error as unknown as Record<string, unknown>)[key];
  return fields;
};

/**
 * Replies go in batches, one message for those of a turn of the event loop (see `flush` in
 * pglite-process.ts), but none waits more than `HOLD_MS` for the rest of its turn. A turn can
 * hold the host's whole burst of requests, run one after another; held to its end, their replies
 * reached the host at once, which then answered them while this process sat idle: the two took
 * turns on two cores instead of working side by side.
 */
const HOLD_MS = 1;

/** One process this database answers: the host over IPC, or another over the socket. */
interface Peer {
  readonly host: boolean;
  /** It showed the key (the host needs none). */
  authenticated: boolean;
  send(reply: Reply): void;
  flush(): void;
}

const peer = (host: boolean, write: (batch: Reply[]) => void): Peer => {
  let outbox: Reply[] = [];
  let oldest = 0;
  const flush = () => {
    if (outbox.length === 0) return;
    const batch = outbox;
    outbox = [];
    write(batch);
  };
  return {
    host,
    authenticated: host,
    flush,
    send: (reply) => {
      outbox.push(reply);
      if (outbox.length === 1) {
        oldest = performance.now();
        setImmediate(flush);
      } else if (performance.now() - oldest >= HOLD_MS) flush();
    },
  };
};

const main = async () => {
  const [dataDir = "", options] = process.argv.slice(2);
  const { owner, ...pgliteOptions } = JSON.parse(options ?? "{}") as ChildOptions;
  const holder: Holder = { ...owner, shares: true };
  const hostPeer = peer(true, (batch) => process.send?.(batch));
  const peers = new Set<Peer>([hostPeer]);
  const key = Buffer.from(randomBytes(32).toString("hex"));

  /** Open transactions: their connection, how to end them, and whose they are. */
  const open = new Map<
    number,
    { readonly sql: Queryable; finish(commit: boolean): void; done: Promise<void>; owner: Peer }
  >();
  let nextTx = 1;
  const rollback = Symbol("rollback");
  let opened!: (database: { db: PGlite; plain: ReturnType<typeof pgliteSession> }) => void;
  const database = new Promise<{ db: PGlite; plain: ReturnType<typeof pgliteSession> }>((resolve) => {
    opened = resolve;
  });
  // Other processes are answered from the moment the directory is taken: who holds it at once,
  // their queries once the database has opened.
  const server: Server = createServer((socket: Socket) => {
    const other = peer(false, (batch) => {
      if (!socket.destroyed) socket.write(frame(batch));
    });
    peers.add(other);
    readFrames(socket, (requests) => receive(requests as ReadonlyArray<Request>, other, () => socket.end()));
    socket.on("error", () => socket.destroy());
    socket.on("close", () => abandon(other));
  });

  const handle = async (request: Request, from: Peer): Promise<unknown> => {
    if (request.op === "hello") return holder;
    if (request.op === "auth") {
      const given = Buffer.from(String(request.key));
      from.authenticated = given.length === key.length && timingSafeEqual(given, key);
      if (!from.authenticated) throw new Error("wrong key");
      return undefined;
    }
    if (!from.authenticated) throw new Error("not authenticated: show the key first");
    const { db, plain } = await database;
    const on = (tx: number | undefined) => {
      if (tx === undefined) return plain;
      const found = open.get(tx);
      if (!found) throw new Error(`no open transaction ${tx}`);
      return found.sql;
    };
    switch (request.op) {
      case "query":
        return on(request.tx).query(request.text, request.params);
      case "exec":
        return on(request.tx).exec(request.sql);
      case "queryIn":
        return plain.queryInArrays(request.scope, request.text, request.params);
      case "begin": {
        const tx = nextTx++;
        // PGlite's transaction holds its lock until the callback settles: it settles when the
        // host ends the transaction, and other queries wait for it as they would in-process.
        let started!: () => void;
        const entered = new Promise<void>((resolve) => {
          started = resolve;
        });
        const done = plain
          .transaction(async (sql) => {
            const commit = await new Promise<boolean>((finish) => {
              open.set(tx, { sql, finish, done, owner: from });
              started();
            });
            if (!commit) throw rollback;
          })
          .catch((error: unknown) => {
            if (error !== rollback) throw error;
          });
        // Either the transaction is entered, or it failed before (its BEGIN did).
        await Promise.race([entered, done.then(() => undefined)]);
        if (!open.has(tx)) throw new Error("the transaction could not begin");
        return tx;
      }
      case "end": {
        const found = open.get(request.tx);
        if (!found) throw new Error(`no open transaction ${request.tx}`);
        open.delete(request.tx);
        found.finish(request.commit);
        await found.done;
        return undefined;
      }
      case "close":
        // Another process closing its side leaves the database to the host.
        if (from.host) {
          server.close();
          await db.close();
        }
        return undefined;
      case "publish":
        for (const other of peers) if (other !== from) other.send({ broadcast: request.message });
        return undefined;
      case "snapshot":
        return (await pgliteSnapshot(db, plain)) satisfies Snapshot;
    }
  };

  const receive = (requests: ReadonlyArray<Request>, from: Peer, afterClose: () => void) => {
    for (const request of requests)
      handle(request, from).then(
        (result) => {
          from.send({ id: request.id, ok: true, result });
          if (request.op !== "close") return;
          from.flush();
          afterClose();
        },
        (error: unknown) => from.send({ id: request.id, ok: false, error: describe(error) }),
      );
  };

  /** A process gone with a transaction open would hold the database's one lock forever. */
  const abandon = (gone: Peer) => {
    peers.delete(gone);
    for (const [tx, found] of open)
      if (found.owner === gone) {
        open.delete(tx);
        found.finish(false);
      }
  };

  // The host is gone (exited, killed): close the database and go too.
  let current: PGlite | undefined;
  process.on("disconnect", () => {
    server.close();
    if (!current) process.exit(0);
    void current.close().finally(() => process.exit(0));
  });

  // The directory is taken before anything in it is touched, its creation included.
  try {
    await holdDirectory(dataDir, shareAddress(dataDir), server);
  } catch (error) {
    if (!(error instanceof DataDirectoryInUse)) throw error;
    process.send?.([{ inUse: { pid: error.pid, command: error.command, shares: true } }]);
    process.disconnect();
    return;
  }
  writeFileSync(shareKeyPath(dataDir), key, { mode: 0o600 });
  await initdbApart(dataDir);
  // The same PGlite, with the same options, as openPglite would make in-process.
  const db = await createPglite(dataDir, pgliteOptions);
  current = db;
  opened({ db, plain: pgliteSession(db) });

  process.on("message", (requests: ReadonlyArray<Request>) =>
    receive(requests, hostPeer, () => process.disconnect()),
  );
  // SIGTERM or SIGINT to the whole process group (a supervisor, Ctrl-C in a terminal) reaches
  // this process too. The host drains on it and needs its database until done, then closes it
  // last: the signal is the host's to act on, not ours.
  for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => undefined);
  hostPeer.send({ ready: true });
};

main().catch((error: unknown) => {
  console.error(
    `vod: the embedded database could not start: ${error instanceof Error ? error.stack : String(error)}`,
  );
  process.exit(1);
});

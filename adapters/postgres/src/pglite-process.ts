import { type ChildProcess, fork } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import type { Socket } from "node:net";
import { fileURLToPath } from "node:url";
import type { Snapshot } from "./pglite-backup.js";
import type { ChildOptions, Reply, Request } from "./pglite-child.js";
import type { PgliteOptions } from "./pglite-session.js";
import {
  commandLine,
  DataDirectoryInUse,
  frame,
  type Holder,
  liveOwner,
  readFrames,
  shareAddress,
  shareKeyPath,
} from "./pglite-share.js";
import { type RowArrays, rowObjects } from "./row-forms.js";
import type { Queryable, QueryResult, SessionScope, SqlDatabase } from "./sql.js";

/** Distributive Omit: `id` is added when a request is sent. */
type Unsent = Request extends infer R ? (R extends Request ? Omit<R, "id"> : never) : never;

export interface PgliteProcessOptions extends PgliteOptions {
  /**
   * Called when the database process ends without being closed (killed, out of memory), or, for
   * a process that reached another's database, when that one went away. Every query from then on
   * fails; a host should stop, so that its supervisor starts it afresh.
   */
  readonly onExit?: (reason: string) => void;
  /**
   * When another process owns the data directory: `refuse` (the default) fails with
   * `DataDirectoryInUse`, naming it; `reach` sends every query to that process's database, so
   * that what this process writes is what the owner serves, and stays written.
   */
  readonly whenInUse?: "refuse" | "reach";
}

/** The embedded database: SQL, plus what only a data directory's single owner can offer. */
export interface EmbeddedDatabase extends SqlDatabase {
  readonly engine: "pglite";
  /** True when another process owns the directory and this one reached it (`whenInUse: "reach"`). */
  readonly reached: boolean;
  /** A consistent copy of the data directory and its tables' row counts, taken while it serves. */
  snapshot(): Promise<Snapshot>;
  /** Tells every other process on this database (`onBroadcast`); resolves once it is passed on. */
  publish(message: unknown): Promise<void>;
  onBroadcast(listener: (message: unknown) => void): void;
}

/** The child's script beside this module; run from sources (tests), the built one. */
const childScript = () => {
  const beside = fileURLToPath(new URL("./pglite-child.js", import.meta.url));
  return existsSync(beside) ? beside : fileURLToPath(new URL("../dist/pglite-child.js", import.meta.url));
};

/** A database error as the child described it, with SQLSTATE `code` where it had one. */
const rebuilt = (fields: Record<string, unknown>) =>
  Object.assign(new Error(String(fields.message ?? "database error")), fields);

/** How requests reach the database process: the host's IPC, or another process's socket. */
interface Channel {
  send(batch: Request[], done: (error: Error | null) => void): void;
  /** Ends it once the close request is answered. */
  end(): Promise<void>;
}

/**
 * The SqlDatabase over a channel to the database process: `receive` takes its replies, `lost`
 * fails what waits when the channel goes away.
 */
const overChannel = (channel: Channel, reached: boolean, firstId = 1) => {
  const pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  const listeners = new Set<(message: unknown) => void>();
  let nextId = firstId;
  let gone: string | undefined;
  let closing = false;

  const receive = (replies: ReadonlyArray<Reply>) => {
    for (const reply of replies) {
      if ("broadcast" in reply) {
        for (const listener of listeners) listener(reply.broadcast);
        continue;
      }
      if (!("id" in reply)) continue;
      const waiting = pending.get(reply.id);
      if (!waiting) continue;
      pending.delete(reply.id);
      if (reply.ok) waiting.resolve(reply.result);
      else waiting.reject(rebuilt(reply.error));
    }
  };
  const lost = (reason: string) => {
    gone = reason;
    for (const waiting of pending.values()) waiting.reject(new Error(reason));
    pending.clear();
    return !closing;
  };

  /**
   * The requests of one turn of the event loop go as one message: a burst of HTTP requests makes
   * one write to the pipe, not one each (a write each was a noticeable part of the host's work per request).
   */
  let outbox: Request[] = [];
  const flush = () => {
    const batch = outbox;
    outbox = [];
    channel.send(batch, (error) => {
      if (!error) return;
      for (const request of batch) {
        const waiting = pending.get(request.id);
        if (!waiting) continue;
        pending.delete(request.id);
        waiting.reject(error);
      }
    });
  };
  const call = (request: Unsent) =>
    new Promise<unknown>((resolve, reject) => {
      if (gone !== undefined) return reject(new Error(gone));
      const id = nextId++;
      pending.set(id, { resolve, reject });
      outbox.push({ ...request, id } as Request);
      if (outbox.length === 1) setImmediate(flush);
    });

  const over = (tx?: number): Queryable => ({
    query: async <R>(text: string, params?: ReadonlyArray<unknown>) =>
      (await call({
        op: "query",
        text,
        ...(tx === undefined ? {} : { tx }),
        ...(params ? { params: [...params] } : {}),
      })) as QueryResult<R>,
    exec: async (sql) => {
      await call({ op: "exec", sql, ...(tx === undefined ? {} : { tx }) });
    },
  });

  const db: EmbeddedDatabase = {
    engine: "pglite",
    reached,
    ...over(),
    transaction: async (fn) => {
      const tx = (await call({ op: "begin" })) as number;
      let result: Awaited<ReturnType<typeof fn>>;
      try {
        result = await fn(over(tx));
      } catch (error) {
        // The work's failure is the answer; a failed ROLLBACK (the process gone) adds nothing.
        await call({ op: "end", tx, commit: false }).catch(() => undefined);
        throw error;
      }
      await call({ op: "end", tx, commit: true });
      return result;
    },
    // One message, so one round trip over IPC, as on a server.
    // Rows cross as arrays (`queryInArrays`) and become objects here.
    queryIn: async <R>(scope: SessionScope, text: string, params?: ReadonlyArray<unknown>) =>
      rowObjects<R>(
        (await call({
          op: "queryIn",
          scope: { key: scope.key, set: { text: scope.set.text, params: [...scope.set.params] } },
          text,
          ...(params ? { params: [...params] } : {}),
        })) as RowArrays,
      ),
    // One connection is all PGlite has: session state (advisory locks) lives on it anyway.
    withConnection: (fn) => fn(over()),
    snapshot: async () => (await call({ op: "snapshot" })) as Snapshot,
    publish: async (message) => {
      await call({ op: "publish", message });
    },
    onBroadcast: (listener) => void listeners.add(listener),
    close: async () => {
      if (gone !== undefined) return;
      closing = true;
      await call({ op: "close" }).catch(() => undefined);
      await channel.end();
    },
  };
  return { db, receive, lost, call };
};

/** The database of the process that owns the directory, through its socket. */
const reach = async (
  dataDir: string,
  socket: Socket,
  options: PgliteProcessOptions,
): Promise<EmbeddedDatabase> => {
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  const { db, receive, lost, call } = overChannel(
    {
      send: (batch, done) => {
        socket.write(frame(batch), (error) => done(error ?? null));
      },
      end: async () => {
        socket.end();
        await closed;
      },
    },
    true,
  );
  readFrames(socket, (replies) => receive(replies as ReadonlyArray<Reply>));
  socket.on("error", () => socket.destroy());
  socket.once("close", () => {
    const reason = "the process that owns the embedded database went away";
    if (lost(reason)) options.onExit?.(reason);
  });
  let key: string;
  try {
    key = await readFile(shareKeyPath(dataDir), "utf8");
  } catch (error) {
    socket.destroy();
    throw new Error(
      `cannot read the key of the process that owns ${dataDir} (${error instanceof Error ? error.message : String(error)}): run this as the user that runs it`,
    );
  }
  await call({ op: "auth", key });
  return db;
};

/** PGlite in a child process that takes the directory, or who holds it already. */
const spawnOwner = async (
  dataDir: string,
  options: PgliteProcessOptions,
): Promise<EmbeddedDatabase | { readonly inUse: Holder }> => {
  const childOptions: ChildOptions = {
    sharedBuffersMb: options.sharedBuffersMb,
    owner: { pid: process.pid, command: commandLine() },
  };
  const child: ChildProcess = fork(childScript(), [dataDir, JSON.stringify(childOptions)], {
    serialization: "advanced",
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const { db, receive, lost } = overChannel(
    {
      send: (batch, done) => {
        child.send(batch, (error) => done(error ?? null));
      },
      end: async () => {
        await exited;
      },
    },
    false,
  );
  return new Promise((resolve, reject) => {
    let started = false;
    // Replies come in batches (the child's turn of its event loop), like the requests.
    child.on("message", (replies: ReadonlyArray<Reply>) => {
      for (const reply of replies) {
        if ("ready" in reply) {
          started = true;
          resolve(db);
        } else if ("inUse" in reply) resolve({ inUse: reply.inUse });
      }
      receive(replies);
    });
    child.on("exit", (code, signal) => {
      const reason = `the embedded database process exited (${signal ?? `code ${code}`})`;
      const unexpected = lost(reason);
      reject(new Error(reason));
      if (started && unexpected) options.onExit?.(reason);
    });
    child.on("error", (error) => reject(error));
  });
};

/**
 * PGlite in a process of its own, on `dataDir`, driven over IPC: the same SQL, transactions and
 * single-connection semantics as `openPglite`, but Postgres' work (its executor runs synchronously
 * in WebAssembly) and its memory (a WebAssembly heap several times the host's own) stay out of the
 * host's process, off the event loop that serves uploads and playback. That process owns the directory
 * (pglite-share.ts): while it runs, another process fails to open it, or with `whenInUse:
 * "reach"` sends its queries there.
 */
export const openPgliteProcess = async (
  dataDir: string,
  options: PgliteProcessOptions = {},
): Promise<EmbeddedDatabase> => {
  const address = shareAddress(dataDir);
  for (let attempt = 0; ; attempt++) {
    const owner = await liveOwner(address);
    if (owner) {
      if (options.whenInUse === "reach" && owner.holder.shares) return reach(dataDir, owner.socket, options);
      owner.socket.destroy();
      throw new DataDirectoryInUse(dataDir, owner.holder.pid, owner.holder.command);
    }
    const opened = await spawnOwner(dataDir, options);
    if (!("inUse" in opened)) return opened;
    // Another process took the directory between the look and the child's start.
    if (options.whenInUse !== "reach" || attempt > 2)
      throw new DataDirectoryInUse(dataDir, opened.inUse.pid, opened.inUse.command);
  }
};

import { type ChildProcess, fork } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { initdbApart } from "./initdb.js";
import type { Reply, Request } from "./pglite-child.js";
import type { PgliteOptions } from "./pglite-session.js";
import { type RowArrays, rowObjects } from "./row-forms.js";
import type { Queryable, QueryResult, SessionScope, SqlDatabase } from "./sql.js";

/** Distributive Omit: `id` is added when a request is sent. */
type Unsent = Request extends infer R ? (R extends Request ? Omit<R, "id"> : never) : never;

export interface PgliteProcessOptions extends PgliteOptions {
  /**
   * Called when the database process ends without being closed (killed, out of memory). Every
   * query from then on fails; a host should stop, so that its supervisor starts it afresh.
   */
  readonly onExit?: (reason: string) => void;
}

/** The child's script beside this module; run from sources (tests), the built one. */
const childScript = () => {
  const beside = fileURLToPath(new URL("./pglite-child.js", import.meta.url));
  return existsSync(beside) ? beside : fileURLToPath(new URL("../dist/pglite-child.js", import.meta.url));
};

/** A database error as the child described it, with SQLSTATE `code` where it had one. */
const rebuilt = (fields: Record<string, unknown>) =>
  Object.assign(new Error(String(fields.message ?? "database error")), fields);

/**
 * PGlite in a process of its own, on `dataDir`, driven over IPC: the same SQL, transactions and
 * single-connection semantics as `openPglite`, but Postgres' work (its executor runs synchronously
 * in WebAssembly) and its memory (a WebAssembly heap several times the host's own) stay out of the
 * host's process, off the event loop that serves uploads and playback.
 */
export const openPgliteProcess = async (
  dataDir: string,
  options: PgliteProcessOptions = {},
): Promise<SqlDatabase> => {
  await initdbApart(dataDir);
  const child: ChildProcess = fork(
    childScript(),
    [dataDir, JSON.stringify({ sharedBuffersMb: options.sharedBuffersMb })],
    {
      serialization: "advanced",
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    },
  );
  const pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  let nextId = 1;
  let gone: string | undefined;
  let closing = false;

  const ready = new Promise<void>((resolve, reject) => {
    // Replies come in batches (the child's turn of its event loop), like the requests.
    child.on("message", (replies: ReadonlyArray<Reply>) => {
      for (const reply of replies) {
        if ("ready" in reply) {
          resolve();
          continue;
        }
        const waiting = pending.get(reply.id);
        if (!waiting) continue;
        pending.delete(reply.id);
        if (reply.ok) waiting.resolve(reply.result);
        else waiting.reject(rebuilt(reply.error));
      }
    });
    child.on("exit", (code, signal) => {
      gone = `the embedded database process exited (${signal ?? `code ${code}`})`;
      for (const waiting of pending.values()) waiting.reject(new Error(gone));
      pending.clear();
      reject(new Error(gone));
      if (!closing) options.onExit?.(gone);
    });
    child.on("error", (error) => reject(error));
  });
  await ready;

  /**
   * The requests of one turn of the event loop go as one message: a burst of HTTP requests makes
   * one write to the pipe, not one each (a write each was a noticeable part of the host's work per request).
   */
  let outbox: Request[] = [];
  const flush = () => {
    const batch = outbox;
    outbox = [];
    child.send(batch, (error) => {
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

  return {
    engine: "pglite",
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
    close: async () => {
      if (gone !== undefined) return;
      closing = true;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      await call({ op: "close" }).catch(() => undefined);
      await exited;
    },
  };
};

// The embedded database's own process: PGlite on one data directory, driven by the host over IPC
// (see pglite-process.ts for the protocol). It ends only when the host closes it or goes away, so
// that no orphan keeps the data directory open.
import { createPglite, type PgliteOptions, pgliteSession } from "./pglite-session.js";
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
  | { readonly id: number; readonly op: "close" };

export type Reply =
  | { readonly ready: true }
  | { readonly id: number; readonly ok: true; readonly result?: unknown }
  | { readonly id: number; readonly ok: false; readonly error: Record<string, unknown> };

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
let outbox: Reply[] = [];
let oldest = 0;
const flush = () => {
  if (outbox.length === 0) return;
  const batch = outbox;
  outbox = [];
  process.send?.(batch);
};
const send = (reply: Reply) => {
  outbox.push(reply);
  if (outbox.length === 1) {
    oldest = performance.now();
    setImmediate(flush);
  } else if (performance.now() - oldest >= HOLD_MS) flush();
};

const main = async () => {
  const [dataDir, options] = process.argv.slice(2);
  // The same PGlite, with the same options, as openPglite would make in-process.
  const db = await createPglite(dataDir, JSON.parse(options ?? "{}") as PgliteOptions);
  const plain = pgliteSession(db);
  /** Open transactions: their connection, and how to end them. */
  const open = new Map<
    number,
    { readonly sql: Queryable; finish(commit: boolean): void; done: Promise<void> }
  >();
  let nextTx = 1;
  const rollback = Symbol("rollback");

  const on = (tx: number | undefined) => {
    if (tx === undefined) return plain;
    const found = open.get(tx);
    if (!found) throw new Error(`no open transaction ${tx}`);
    return found.sql;
  };

  const handle = async (request: Request): Promise<unknown> => {
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
              open.set(tx, { sql, finish, done });
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
        await db.close();
        return undefined;
    }
  };

  process.on("message", (requests: ReadonlyArray<Request>) => {
    for (const request of requests)
      handle(request).then(
        (result) => {
          send({ id: request.id, ok: true, result });
          if (request.op !== "close") return;
          flush();
          process.disconnect();
        },
        (error: unknown) => send({ id: request.id, ok: false, error: describe(error) }),
      );
  });
  // SIGTERM or SIGINT to the whole process group (a supervisor, Ctrl-C in a terminal) reaches
  // this process too. The host drains on it and needs its database until done, then closes it
  // last: the signal is the host's to act on, not ours.
  for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => undefined);
  // The host is gone (exited, killed): close the database and go too.
  process.on("disconnect", () => {
    void db.close().finally(() => process.exit(0));
  });
  send({ ready: true });
};

main().catch((error: unknown) => {
  console.error(
    `vod: the embedded database could not start: ${error instanceof Error ? error.stack : String(error)}`,
  );
  process.exit(1);
});

import { PGlite, parse as pgliteParse, protocol } from "@electric-sql/pglite";
import { initdbApart } from "./initdb.js";
import { holdHere } from "./pglite-share.js";
import { type RowArrays, rowForms, rowObjects } from "./row-forms.js";
import {
  INT8,
  type Queryable,
  type QueryResult,
  type SessionScope,
  type SqlDatabase,
  statementNames,
} from "./sql.js";
import { neutralInTransaction, neutralSession } from "./tenancy.js";

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
    // With formats, the columns are known: their description would be work for nothing.
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
 * runs unless the scope took; `db.query` would make six calls and `db.transaction` sixteen,
 * each crossing into WebAssembly. Without parameters a text may hold several statements, which go by
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
export const createPglite = (dataDir: string | undefined, options: PgliteOptions = {}, loadDataDir?: Blob) =>
  PGlite.create(dataDir, {
    ...(loadDataDir ? { loadDataDir } : {}),
    startParams: [...PGlite.defaultStartParams, "-c", `shared_buffers=${options.sharedBuffersMb ?? 16}MB`],
    // An int8 as a JS number, as on a server (`pg-pool.ts`) and in the binary form: PGlite's
    // own parser answers a BigInt past 2^53, which JSON.stringify refuses.
    parsers: { [INT8]: (value: string) => Number(value) },
  });

/**
 * Postgres compiled to WebAssembly, in this process, its files under `dataDir` (in memory when
 * omitted). One process owns a data directory at a time: while this one is open, another
 * process fails to open it (`DataDirectoryInUse`, pglite-share.ts). Its transactions queue the
 * other queries, so they are serializable.
 */
export const openPglite = async (dataDir?: string, options: PgliteOptions = {}): Promise<SqlDatabase> => {
  const hold = dataDir === undefined ? undefined : await holdHere(dataDir);
  try {
    if (dataDir !== undefined) await initdbApart(dataDir);
    const db = await createPglite(dataDir, options);
    const session = pgliteSession(db);
    return {
      engine: "pglite",
      ...session,
      // One connection is all PGlite has; each statement on it is neutral (session locks).
      withConnection: (fn) => fn({ query: session.query, exec: session.exec }),
      close: async () => {
        await db.close();
        await hold?.release();
      },
    };
  } catch (error) {
    await hold?.release();
    throw error;
  }
};

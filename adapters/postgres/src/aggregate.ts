import type { QueryResult } from "./sql.js";

/**
 * A SELECT's aggregate form: its rows as one value of one row, so that a page of rows leaves the
 * database as one field rather than a field per column and row. Which form is the engine's:
 *
 * - `json`, on a Postgres server: one JSON array of rows, each an array of its values (json_agg
 *   of json_build_array); pg then parses one text instead of a field per column and row (client
 *   CPU for 51 asset rows 107-191 -> 78-83 µs).
 * - `records`, on PGlite: one array of records in Postgres' binary form (array_agg of ROW).
 *   PGlite spends most of a SELECT's time writing each field of each row out of WebAssembly (51
 *   rows of the 17 asset columns: 0.96-1.16 ms as rows); as one JSON text Postgres still worked
 *   out how to write each value, and escaped it (190-220 µs); as binary records it copies the
 *   values (106-119 µs), and decoding them here costs 35 µs where JSON.parse cost 21.
 *
 * A Postgres server gained nothing from either change (its CPU per page 146-156 µs in every
 * form): it keeps JSON, which pg's text results take.
 */
export type Layout = "json" | "records";

/**
 * Rows as arrays of values in the order of `fields`: as the driver parsed them (`rows`), or as
 * an aggregate form's answer, decoded where the rows are used (`rowObjects`).
 */
export type RowArrays =
  | {
      readonly fields: ReadonlyArray<string>;
      readonly rows: ReadonlyArray<ReadonlyArray<unknown>>;
      readonly rowCount: number;
    }
  | {
      readonly fields: ReadonlyArray<string>;
      /** A JSON array of rows, each an array of values. */
      readonly json: string;
      /** The float columns: JSON writes NaN and the infinities as strings. */
      readonly floats: ReadonlyArray<number>;
      readonly rowCount: -1;
    }
  | {
      readonly fields: ReadonlyArray<string>;
      /** A binary array of records, one per row (null for none). */
      readonly records: Uint8Array | null;
      /** Each column's type (its OID), which tells how its value is written. */
      readonly types: ReadonlyArray<number>;
      readonly rowCount: -1;
    };

const BOOL = 16;
const INT8 = 20;
const INT2 = 21;
const INT4 = 23;
const TEXT = 25;
const JSON_TYPE = 114;
const FLOAT4 = 700;
const FLOAT8 = 701;
const BPCHAR = 1042;
const VARCHAR = 1043;
const JSONB = 3802;

/**
 * Column types whose aggregate form decodes to the value the drivers' parsers give: bool, int2,
 * int4, int8 (epoch milliseconds, safe integers), text, bpchar, varchar, json, jsonb and the
 * floats. Arrays, bytea, numeric and the date types are not among them: a text with such a
 * column is never aggregated.
 */
const AGGREGABLE = new Set([BOOL, INT8, INT2, INT4, TEXT, BPCHAR, VARCHAR, JSON_TYPE, JSONB, FLOAT4, FLOAT8]);

export interface Aggregate {
  readonly layout: Layout;
  readonly text: string;
  readonly fields: ReadonlyArray<string>;
  /** `json`: the float columns. */
  readonly floats: ReadonlyArray<number>;
  /** `records`: each column's type. */
  readonly types: ReadonlyArray<number>;
}

/**
 * The aggregate form of a SELECT, in its own order (an aggregate over a sorted subquery takes
 * the rows in that order when, as here, nothing else is joined or grouped). Only a single SELECT
 * (callers ask only of texts run with parameters, the repositories' reads) whose columns are all
 * `AGGREGABLE` and have distinct names has one.
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
    !fields.every((f) => AGGREGABLE.has(f.dataTypeID))
  )
    return null;
  const columns = names.map((name) => `q."${name.replaceAll('"', '""')}"`);
  // The text on a line of its own: one ending in a -- comment would comment out `) q`.
  const from = `FROM (${text}\n) q`;
  const types = fields.map((f) => f.dataTypeID);
  return {
    layout,
    text:
      layout === "json"
        ? `SELECT coalesce(json_agg(json_build_array(${columns.join(", ")})), '[]')::text AS json ${from}`
        : // A float4 goes as text: its binary value, widened to a JS number, is not the shortest
          // decimal Postgres writes (0.1 would read 0.10000000149011612).
          `SELECT array_agg(ROW(${columns.map((c, i) => (types[i] === FLOAT4 ? `${c}::text` : c)).join(", ")})) AS records ${from}`,
    fields: names,
    floats: types.flatMap((t, i) => (t === FLOAT4 || t === FLOAT8 ? [i] : [])),
    types,
  };
};

/**
 * Each text's aggregate form, learnt from its first answer: `of` is undefined for a text not yet
 * seen, null for one without a form. Texts run without parameters may hold several statements:
 * never aggregated, nor kept. Bounded like the statement names (the adapter's texts are a fixed
 * set).
 */
export const aggregateForms = (layout: Layout) => {
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

type Decoder = (bytes: Uint8Array, view: DataView, at: number) => unknown;

/**
 * A fixed-size column's value from its binary form at `at`, as the drivers parse its text;
 * undefined for the types written as text (see `decodeRecords`).
 */
const decoderOf = (type: number): Decoder | undefined => {
  switch (type) {
    case BOOL:
      return (bytes, _, at) => bytes[at] !== 0;
    case INT2:
      return (_, view, at) => view.getInt16(at);
    case INT4:
      return (_, view, at) => view.getInt32(at);
    case INT8:
      // Epoch milliseconds: exact up to 2^53, as the drivers' Number(text).
      return (_, view, at) => Number(view.getBigInt64(at));
    case FLOAT8:
      return (_, view, at) => view.getFloat64(at);
    default:
      return undefined;
  }
};

/**
 * The rows of a binary array of records (array_send of record_send): a header (dimensions, a
 * flag, the element type, then each dimension's length and lower bound), then each record as its
 * length, its column count and each column as its type, its length (-1 for NULL) and its bytes.
 */
export const decodeRecords = (records: Uint8Array, types: ReadonlyArray<number>): unknown[][] => {
  const view = new DataView(records.buffer, records.byteOffset, records.byteLength);
  // Buffer's toString makes a string of a range faster than TextDecoder of a subarray (a page's
  // 250 short texts: 18 µs against 24).
  const bytes = Buffer.from(records.buffer, records.byteOffset, records.byteLength);
  const dimensions = view.getInt32(0);
  if (dimensions === 0) return [];
  if (dimensions !== 1) throw new Error(`an aggregate form answered ${dimensions} dimensions`);
  const count = view.getInt32(12);
  let at = 20;
  const fixed = types.map((type) => decoderOf(type));
  const rows = new Array<unknown[]>(count);
  for (let r = 0; r < count; r++) {
    const columns = view.getInt32(at + 4);
    if (columns !== types.length) throw new Error(`an aggregate form answered ${columns} columns`);
    at += 8;
    const row = new Array<unknown>(columns);
    for (let c = 0; c < columns; c++) {
      const size = view.getInt32(at + 4);
      at += 8;
      if (size < 0) {
        row[c] = null;
        continue;
      }
      const decode = fixed[c];
      if (decode !== undefined) row[c] = decode(records, view, at);
      else {
        const type = types[c];
        // jsonb's binary form is a version byte, then its text.
        const text = bytes.toString("utf8", type === JSONB ? at + 1 : at, at + size);
        row[c] =
          type === JSON_TYPE || type === JSONB ? JSON.parse(text) : type === FLOAT4 ? Number(text) : text;
      }
      at += size;
    }
    rows[r] = row;
  }
  return rows;
};

/** The rows as objects keyed by column name, as `queryIn` answers. */
export const rowObjects = <R>(result: RowArrays): QueryResult<R> => {
  if ("rows" in result)
    return { rows: objectsOf(result.fields)(result.rows) as R[], rowCount: result.rowCount };
  let rows: unknown[][];
  if ("json" in result) {
    rows = JSON.parse(result.json) as unknown[][];
    for (const column of result.floats)
      for (const row of rows) if (typeof row[column] === "string") row[column] = Number(row[column]);
  } else rows = result.records === null ? [] : decodeRecords(result.records, result.types);
  const objects = objectsOf(result.fields)(rows) as R[];
  return { rows: objects, rowCount: objects.length };
};

type RowsToObjects = (rows: ReadonlyArray<ReadonlyArray<unknown>>) => Record<string, unknown>[];
const rowsToObjects = new Map<string, RowsToObjects>();

/**
 * Rows as objects, by a function written for the columns: each row one object literal, so every
 * row of a text has the same shape from the start (and what reads them stays monomorphic), where a
 * loop setting the names one by one took 13.7 µs for 51 rows of 17 columns against 2.2 µs
 * (microbenchmark). Names are quoted with JSON.stringify; a `__proto__` column, which a literal
 * would take for the prototype, goes by the loop. Made once per column list (a fixed set: the
 * adapter's texts), bounded all the same.
 */
const objectsOf = (fields: ReadonlyArray<string>): RowsToObjects => {
  const key = fields.join("\u0000");
  let build = rowsToObjects.get(key);
  if (build === undefined) {
    if (fields.includes("__proto__")) {
      build = (rows) =>
        rows.map((values) => {
          const row: Record<string, unknown> = {};
          // Defined, not assigned: assigning `__proto__` would set the prototype.
          for (let j = 0; j < fields.length; j++)
            Object.defineProperty(row, fields[j] as string, {
              value: values[j],
              enumerable: true,
              writable: true,
              configurable: true,
            });
          return row;
        });
    } else {
      const literal = fields.map((name, j) => `${JSON.stringify(name)}: v[${j}]`).join(", ");
      build = new Function(
        "rows",
        `const out = new Array(rows.length);
        for (let i = 0; i < rows.length; i++) { const v = rows[i]; out[i] = { ${literal} }; }
        return out;`,
      ) as RowsToObjects;
    }
    if (rowsToObjects.size >= 1000) rowsToObjects.clear();
    rowsToObjects.set(key, build);
  }
  return build;
};

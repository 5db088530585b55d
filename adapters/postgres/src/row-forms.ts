import type { QueryResult } from "./sql.js";

/**
 * A text's fast form: how its rows come back once its first answer has told their columns.
 *
 * - `json`, on a Postgres server: its aggregate form, one JSON array of rows, each an array of
 *   its values (json_agg of json_build_array over the text); pg then parses one text, which
 *   costs the client less than a field per column and row.
 * - `binary`, on PGlite: the text as it is, its results in binary, its DataRow messages kept
 *   as bytes and decoded where the rows are used (`decodeDataRows`). PGlite's own reading of a
 *   reply parses every field of every row into a string. An aggregate form would avoid that but
 *   moves the work into Postgres (escaping each value into JSON, or building records), which
 *   costs more than sending the rows in binary and reading them raw, as done here.
 */
export type Layout = "json" | "binary";

/**
 * Rows as arrays of values in the order of `fields`: as the driver parsed them (`rows`), or as
 * a fast form's answer, decoded where the rows are used (`rowObjects`).
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
      /** The rows' DataRow messages, each column in the format `BinaryForm.formats` asked for. */
      readonly dataRows: Uint8Array;
      /** Each column's type (its OID), which tells how its value is written. */
      readonly types: ReadonlyArray<number>;
      readonly rowCount: number;
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
 * Column types whose `json` or `binary` form decodes to the value the drivers' parsers give:
 * bool, int2, int4, int8 (epoch milliseconds, safe integers), text, bpchar, varchar, json, jsonb
 * and the floats. Arrays, bytea, numeric and the date types are not among them: a text with such
 * a column always answers as the driver parses it.
 */
const FORM_TYPES = new Set([BOOL, INT8, INT2, INT4, TEXT, BPCHAR, VARCHAR, JSON_TYPE, JSONB, FLOAT4, FLOAT8]);

/** A SELECT's aggregate form: `text` runs in its place. */
export interface JsonForm {
  readonly layout: "json";
  readonly text: string;
  readonly fields: ReadonlyArray<string>;
  /** The float columns: JSON writes NaN and the infinities as strings. */
  readonly floats: ReadonlyArray<number>;
}

/** The text itself, its results in binary. */
export interface BinaryForm {
  readonly layout: "binary";
  readonly fields: ReadonlyArray<string>;
  /** Each column's type. */
  readonly types: ReadonlyArray<number>;
  /** Each result column's format (0 text, 1 binary). */
  readonly formats: ReadonlyArray<number>;
}

type FormOf<L extends Layout> = L extends "json" ? JsonForm : BinaryForm;

/**
 * A text's form, when its columns are all `FORM_TYPES` and have distinct names. The `json` form
 * is only a single SELECT's (callers ask only of texts run with parameters, the repositories'
 * reads) of at most 100 columns (json_build_array's arguments), and keeps its order (an
 * aggregate over a sorted subquery takes the rows in that order when, as here, nothing else is
 * joined or grouped).
 */
const formOf = (
  text: string,
  fields: ReadonlyArray<{ readonly name: string; readonly dataTypeID: number }>,
  layout: Layout,
): JsonForm | BinaryForm | null => {
  const names = fields.map((f) => f.name);
  if (
    names.length === 0 ||
    new Set(names).size !== names.length ||
    !fields.every((f) => FORM_TYPES.has(f.dataTypeID))
  )
    return null;
  const types = fields.map((f) => f.dataTypeID);
  if (layout === "binary")
    return {
      layout,
      fields: names,
      types,
      // A float4 comes as text: its binary value, widened to a JS number, is not the shortest
      // decimal Postgres writes (0.1 would read 0.10000000149011612).
      formats: types.map((t) => (t === FLOAT4 ? 0 : 1)),
    };
  if (names.length > 100 || !/^\s*select\s/i.test(text) || text.includes(";")) return null;
  const columns = names.map((name) => `q."${name.replaceAll('"', '""')}"`).join(", ");
  return {
    layout,
    // The text on a line of its own: one ending in a -- comment would comment out `) q`.
    text: `SELECT coalesce(json_agg(json_build_array(${columns})), '[]')::text AS json FROM (${text}\n) q`,
    fields: names,
    floats: types.flatMap((t, i) => (t === FLOAT4 || t === FLOAT8 ? [i] : [])),
  };
};

/**
 * Each text's fast form, learnt from its first answer: `of` is undefined for a text not yet
 * seen, null for one without a form. Texts run without parameters may hold several statements:
 * never given a form, nor kept. Bounded like the statement names (the adapter's texts are a fixed
 * set).
 */
export const rowForms = <L extends Layout>(layout: L) => {
  const forms = new Map<string, FormOf<L> | null>();
  return {
    of: (text: string) => forms.get(text),
    learn: (
      text: string,
      params: ReadonlyArray<unknown> | undefined,
      fields: ReadonlyArray<{ readonly name: string; readonly dataTypeID: number }>,
    ) => {
      if (params !== undefined && params.length > 0 && forms.size < 1000)
        forms.set(text, formOf(text, fields, layout) as FormOf<L> | null);
    },
  };
};

/**
 * The rows of DataRow messages (each its type byte, its length, its column count, then each
 * column as its length, -1 for NULL, and its bytes), each column in the format `BinaryForm.formats`
 * asked for: binary, or text for a float4. Each value is what the drivers parse of its text.
 *
 * One switch on the type, not a decoder function per column: calls through a column's function
 * from one place did not inline, and the loop written out is markedly faster. Texts: the
 * reply as one latin1 string, each ASCII text a substring of it (cheaper than Buffer's toString
 * of each range, a page holding hundreds); a text with any byte past 0x7f is decoded as UTF-8.
 * The substrings keep that string alive while the rows live.
 */
const decodeDataRows = (dataRows: Uint8Array, types: ReadonlyArray<number>): unknown[][] => {
  const view = new DataView(dataRows.buffer, dataRows.byteOffset, dataRows.byteLength);
  const bytes = Buffer.from(dataRows.buffer, dataRows.byteOffset, dataRows.byteLength);
  const latin1 = bytes.toString("latin1");
  const rows: unknown[][] = [];
  let at = 0;
  while (at < dataRows.length) {
    const end = at + 1 + view.getInt32(at + 1);
    const columns = view.getInt16(at + 5);
    if (columns !== types.length)
      throw new Error(`a row of ${columns} columns where ${types.length} were described`);
    at += 7;
    const row = new Array<unknown>(columns);
    for (let c = 0; c < columns; c++) {
      const size = view.getInt32(at);
      at += 4;
      if (size < 0) {
        row[c] = null;
        continue;
      }
      const type = types[c];
      switch (type) {
        case BOOL:
          row[c] = dataRows[at] !== 0;
          break;
        case INT2:
          row[c] = view.getInt16(at);
          break;
        case INT4:
          row[c] = view.getInt32(at);
          break;
        case INT8:
          // Epoch milliseconds: exact up to 2^53; past it rounded once, as Number(text) rounds.
          row[c] = view.getInt32(at) * 4294967296 + view.getUint32(at + 4);
          break;
        case FLOAT8:
          row[c] = view.getFloat64(at);
          break;
        default: {
          // jsonb's binary form is a version byte, then its text.
          const from = type === JSONB ? at + 1 : at;
          const to = at + size;
          let high = 0;
          for (let i = from; i < to; i++) high |= dataRows[i] as number;
          const text = high > 0x7f ? bytes.toString("utf8", from, to) : latin1.slice(from, to);
          row[c] =
            type === JSON_TYPE || type === JSONB ? JSON.parse(text) : type === FLOAT4 ? Number(text) : text;
        }
      }
      at += size;
    }
    if (at !== end) throw new Error("a row's columns did not fill its message");
    rows.push(row);
  }
  return rows;
};

/** The rows as objects keyed by column name, as `queryIn` answers. */
export const rowObjects = <R>(result: RowArrays): QueryResult<R> => {
  if ("rows" in result)
    return { rows: objectsOf(result.fields)(result.rows) as R[], rowCount: result.rowCount };
  if ("json" in result) {
    const rows = JSON.parse(result.json) as unknown[][];
    for (const column of result.floats)
      for (const row of rows) if (typeof row[column] === "string") row[column] = Number(row[column]);
    const objects = objectsOf(result.fields)(rows) as R[];
    return { rows: objects, rowCount: objects.length };
  }
  const objects = objectsOf(result.fields)(decodeDataRows(result.dataRows, result.types)) as R[];
  return { rows: objects, rowCount: result.rowCount };
};

type RowsToObjects = (rows: ReadonlyArray<ReadonlyArray<unknown>>) => Record<string, unknown>[];
const rowsToObjects = new Map<string, RowsToObjects>();

/**
 * Rows as objects, by a function written for the columns: each row one object literal, so every
 * row of a text has the same shape from the start (and what reads them stays monomorphic); a
 * loop setting the names one by one was several times slower. Names are quoted with
 * JSON.stringify; a `__proto__` column, which a literal
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

import { neutralSession, type QueryResult, type SqlDatabase } from "@vod/adapter-postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { onEachEngine } from "./engines.js";

/**
 * A text run with parameters answers as written the first time; from then on, when its columns
 * allow, in its fast form (`row-forms.ts`): on a server one JSON text of its rows (an aggregate
 * over the text), on PGlite its rows in binary. Every test runs a text several times and holds
 * the later answers to the first one and to literal values: the form is an optimisation, never a
 * difference a caller could see.
 */
onEachEngine(({ name, open }) => {
  describe(`a text's fast form on ${name}`, () => {
    let db: SqlDatabase;
    beforeAll(async () => {
      db = await open();
      // The server's schema is made by migrations, which these tests have no need of.
      if (db.schema !== undefined) await db.exec(`CREATE SCHEMA IF NOT EXISTS ${db.schema}`);
    }, 120_000);
    afterAll(() => db?.close());

    const run = <R = Record<string, unknown>>(text: string, params: ReadonlyArray<unknown>) =>
      db.queryIn<R>(neutralSession, text, params);

    /** The same text `times` times with the same parameters: the first plain, the others aggregated when it can be. */
    const repeated = async <R = Record<string, unknown>>(
      text: string,
      params: ReadonlyArray<unknown>,
      times = 3,
    ) => {
      const answers: QueryResult<R>[] = [];
      for (let i = 0; i < times; i++) answers.push(await run<R>(text, params));
      return answers;
    };

    /**
     * What a text with a fast form has prepared: on a server the text and its aggregate form; on
     * PGlite the text alone, whose fast form is the same statement with its results in binary.
     */
    const fast = name === "postgres" ? ["aggregate", "plain"] : ["plain"];

    /**
     * How the connection has prepared `text`: as written, in its aggregate form, or both. Each
     * engine prepares a text run with parameters once per connection, so its prepared statements
     * tell which form ran; on the server the pool hands back the connection just released (the
     * tests run one statement at a time), the one that ran `text`.
     */
    const preparedForms = async (text: string) => {
      const { rows } = await db.query<{ statement: string }>(
        "SELECT statement FROM pg_prepared_statements WHERE strpos(statement, $1) > 0",
        [text],
      );
      return [
        ...new Set(
          rows.map((r) =>
            r.statement === text
              ? "plain"
              : r.statement.startsWith("SELECT coalesce(json_agg(")
                ? "aggregate"
                : r.statement,
          ),
        ),
      ].sort();
    };

    it("keeps the order of an ORDER BY ... DESC LIMIT, with no, one and many rows", async () => {
      await db.exec(`CREATE TABLE agg_order (id int4 PRIMARY KEY, at int8 NOT NULL, title text NOT NULL);
        INSERT INTO agg_order
          SELECT i, 1790000000000 + ((i * 7) % 25) * 1000, 'asset ' || i FROM generate_series(1, 25) i;`);
      const text = "SELECT id, at, title FROM agg_order ORDER BY at DESC, id DESC LIMIT $1";
      // Newest first: at = 1790000000000 + ((id * 7) % 25) s, so the largest offsets lead.
      const all = Array.from({ length: 25 }, (_, i) => i + 1)
        .map((id) => ({ id, at: 1790000000000 + ((id * 7) % 25) * 1000, title: `asset ${id}` }))
        .sort((a, b) => b.at - a.at || b.id - a.id);
      expect(all.slice(0, 3).map((r) => r.id)).toEqual([7, 14, 21]);

      // Learned from an empty answer: its columns are known all the same.
      const none = await run(text, [0]);
      expect(none).toEqual({ rows: [], rowCount: 0 });
      expect(await run(text, [1])).toEqual({ rows: all.slice(0, 1), rowCount: 1 });
      expect(await run(text, [25])).toEqual({ rows: all, rowCount: 25 });
      expect(await run(text, [10])).toEqual({ rows: all.slice(0, 10), rowCount: 10 });
      expect(await run(text, [0])).toEqual({ rows: [], rowCount: 0 });
      expect(await preparedForms(text)).toEqual(fast);

      // And learned from a full answer, the plain answer is the one the aggregate form repeats.
      const other = "SELECT title, id FROM agg_order ORDER BY at DESC, id DESC LIMIT $1";
      const answers = await repeated(other, [25]);
      expect(answers[0]?.rows.map((r) => r.id)).toEqual(all.map((r) => r.id));
      expect(answers[1]).toEqual(answers[0]);
      expect(answers[2]).toEqual(answers[0]);
      expect(await preparedForms(other)).toEqual(fast);
    });

    it("answers every JSON-safe type and NULL exactly as the plain form does", async () => {
      const awkward = 'it\'s "quoted" \\ back\\slash\nnew line\ttab\r\u0001 é 🎬 𝄞 \u2028 {}[],:';
      await db.exec(`CREATE TABLE agg_values (
        n int4 PRIMARY KEY, t text, b bool, i2 int2, i4 int4, i8 int8, f8 float8, f4 float4,
        jb jsonb, js json, c char(5), v varchar(20))`);
      const insert =
        "INSERT INTO agg_values VALUES ($1, $2, $3, $4, $5, $6, $7::float8, $8::float4, $9::jsonb, $10::json, $11, $12)";
      const values: ReadonlyArray<ReadonlyArray<unknown>> = [
        [
          1,
          awkward,
          true,
          32767,
          -2147483648,
          1790000000123,
          "29.97",
          "29.97",
          '{"a": [1, "x", null, 1.5], "b": {"c": true}, "\\"k": "é🎬"}',
          '{"z": 1, "a": [2]}',
          "ab",
          "varchar",
        ],
        [
          2,
          "",
          false,
          -32768,
          2147483647,
          -1790000000123,
          String(0.1 + 0.2),
          "-0",
          '"a string"',
          "[]",
          "abcde",
          "",
        ],
        [3, "x", true, 0, 0, 9007199254740991, "NaN", "NaN", "null", "null", "", "v"],
        [4, "y", false, 1, -1, -9007199254740991, "Infinity", "-Infinity", "[]", "{}", "a", "w"],
        [5, "z", true, -1, 1, 0, "-Infinity", "Infinity", "0", '"s"', " b ", "x"],
        [6, "-0", false, 2, 2, "-9223372036854775808", "-0", "1e-45", "1e100", "1.0", "c", "y"],
        [
          7,
          "max",
          true,
          3,
          3,
          "9007199254740993",
          "1.7976931348623157e308",
          "3.4028235e38",
          "{}",
          "[]",
          "d",
          "z",
        ],
        [8, null, null, null, null, null, null, null, null, null, null, null],
      ];
      for (const row of values) await db.query(insert, row);

      const text =
        "SELECT n, t, b, i2, i4, i8, f8, f4, jb, js, c, v FROM agg_values WHERE n >= $1 ORDER BY n";
      const answers = await repeated(text, [1]);
      expect(await preparedForms(text)).toEqual(fast);
      const nulls = { t: null, b: null, i2: null, i4: null, i8: null, f8: null, f4: null, jb: null };
      const expected = [
        {
          n: 1,
          t: awkward,
          b: true,
          i2: 32767,
          i4: -2147483648,
          i8: 1790000000123,
          f8: 29.97,
          f4: 29.97,
          jb: { a: [1, "x", null, 1.5], b: { c: true }, '"k': "é🎬" },
          js: { z: 1, a: [2] },
          c: "ab   ",
          v: "varchar",
        },
        {
          n: 2,
          t: "",
          b: false,
          i2: -32768,
          i4: 2147483647,
          i8: -1790000000123,
          f8: 0.30000000000000004,
          f4: -0,
          jb: "a string",
          js: [],
          c: "abcde",
          v: "",
        },
        {
          n: 3,
          t: "x",
          b: true,
          i2: 0,
          i4: 0,
          i8: 9007199254740991,
          f8: Number.NaN,
          f4: Number.NaN,
          jb: null,
          js: null,
          c: "     ",
          v: "v",
        },
        {
          n: 4,
          t: "y",
          b: false,
          i2: 1,
          i4: -1,
          i8: -9007199254740991,
          f8: Number.POSITIVE_INFINITY,
          f4: Number.NEGATIVE_INFINITY,
          jb: [],
          js: {},
          c: "a    ",
          v: "w",
        },
        {
          n: 5,
          t: "z",
          b: true,
          i2: -1,
          i4: 1,
          i8: 0,
          f8: Number.NEGATIVE_INFINITY,
          f4: Number.POSITIVE_INFINITY,
          jb: 0,
          js: "s",
          c: " b   ",
          v: "x",
        },
        {
          n: 6,
          t: "-0",
          b: false,
          i2: 2,
          i4: 2,
          // Past 2^53 an int8 is rounded once, as Number(text) rounds it.
          i8: Number("-9223372036854775808"),
          f8: -0,
          f4: 1e-45,
          jb: 1e100,
          js: 1,
          c: "c    ",
          v: "y",
        },
        {
          n: 7,
          t: "max",
          b: true,
          i2: 3,
          i4: 3,
          i8: Number("9007199254740993"),
          f8: 1.7976931348623157e308,
          f4: 3.4028235e38,
          jb: {},
          js: [],
          c: "d    ",
          v: "z",
        },
        { n: 8, ...nulls, js: null, c: null, v: null },
      ];
      expect(answers[0]).toEqual({ rows: expected, rowCount: 8 });
      expect(answers[1]).toEqual(answers[0]);
      expect(answers[2]).toEqual(answers[0]);
      // toEqual tells -0 from 0 and NaN from anything else; said outright, as it is the point.
      for (const answer of answers) {
        const [, second, third, , , sixth] = answer.rows;
        expect(Object.is(second?.f4, -0)).toBe(true);
        expect(Object.is(sixth?.f8, -0)).toBe(true);
        expect(Number.isNaN(third?.f8)).toBe(true);
        expect(typeof answer.rows[0]?.i8).toBe("number");
      }

      // One row with every column NULL, alone: the aggregate form's nulls are the plain form's.
      const one = "SELECT t, b, i2, i4, i8, f8, f4, jb, js, c, v FROM agg_values WHERE n = $1";
      const nullAnswers = await repeated(one, [8]);
      const allNull = { ...nulls, js: null, c: null, v: null };
      for (const answer of nullAnswers) expect(answer).toEqual({ rows: [allNull], rowCount: 1 });
      expect(await preparedForms(one)).toEqual(fast);
    });

    it("runs a text with a column of any other type as written, every time", async () => {
      await db.exec(`CREATE TABLE agg_unsafe (
        id int4 PRIMARY KEY, tags text[], data bytea, amount numeric, at timestamptz, uid uuid);
        INSERT INTO agg_unsafe VALUES
          (1, ARRAY['a', 'b,c', '"q"'], '\\x0001ff', 12.50, '2026-09-21 10:00:00.123+00',
           '6f1c2a4e-0000-4000-8000-000000000001');`);
      const at = new Date("2026-09-21T10:00:00.123Z");
      const columns = {
        tags: (v: unknown) => expect(v).toEqual(["a", "b,c", '"q"']),
        data: (v: unknown) => expect([...(v as Uint8Array)]).toEqual([0, 1, 255]),
        amount: (v: unknown) => expect(v).toBe("12.50"),
        at: (v: unknown) => expect(v).toEqual(at),
        uid: (v: unknown) => expect(v).toBe("6f1c2a4e-0000-4000-8000-000000000001"),
      };
      for (const [column, check] of Object.entries(columns)) {
        // One unsafe column among safe ones is enough to keep the whole text plain.
        const text = `SELECT id, ${column}, 'x'::text AS label FROM agg_unsafe WHERE id = $1`;
        const answers = await repeated(text, [1]);
        expect(answers[0]?.rowCount).toBe(1);
        check(answers[0]?.rows[0]?.[column]);
        expect(answers[0]?.rows[0]).toMatchObject({ id: 1, label: "x" });
        expect(answers[1]).toEqual(answers[0]);
        expect(answers[2]).toEqual(answers[0]);
        expect(await preparedForms(text)).toEqual(["plain"]);
      }
    });

    it("runs a text with two columns of one name as written, answering as the plain form did", async () => {
      await db.exec(`CREATE TABLE agg_dup (id int4 PRIMARY KEY, title text, note text);
        INSERT INTO agg_dup VALUES (1, 'first', 'second'), (2, 'third', NULL);`);
      const texts = [
        "SELECT title, title FROM agg_dup WHERE id >= $1 ORDER BY id",
        "SELECT id, title AS x, note AS x FROM agg_dup WHERE id >= $1 ORDER BY id",
      ];
      const expected = [
        [{ title: "first" }, { title: "third" }],
        // The last column of a name wins, as pg and PGlite both make objects.
        [
          { id: 1, x: "second" },
          { id: 2, x: null },
        ],
      ];
      for (const [i, text] of texts.entries()) {
        const answers = await repeated(text, [1]);
        expect(answers[0]).toEqual({ rows: expected[i], rowCount: 2 });
        expect(answers[1]).toEqual(answers[0]);
        expect(answers[2]).toEqual(answers[0]);
        expect(await preparedForms(text)).toEqual(["plain"]);
      }
    });

    it("fails in its aggregate form with the SQLSTATE the plain form fails with", async () => {
      // Never run with 1: the plain form's own failure.
      await expect(run("SELECT 1 / $1::int AS y", [0])).rejects.toMatchObject({ code: "22012" });
      const text = "SELECT 1 / $1::int AS x";
      expect(await run(text, [1])).toEqual({ rows: [{ x: 1 }], rowCount: 1 });
      await expect(run(text, [0])).rejects.toMatchObject({ code: "22012" });
      await expect(run(text, [0])).rejects.toMatchObject({ code: "22012" });
      // The failure leaves the text and the connection as they were.
      expect(await run(text, [-1])).toEqual({ rows: [{ x: -1 }], rowCount: 1 });
      expect(await preparedForms(text)).toEqual(fast);
      // A failure only some rows reach, past the first of them.
      await db.exec(`CREATE TABLE agg_fail (id int4 PRIMARY KEY, d int4 NOT NULL);
        INSERT INTO agg_fail VALUES (1, 1), (2, 2), (3, 0);`);
      const rows = "SELECT id, 6 / d AS q FROM agg_fail WHERE id <= $1 ORDER BY id";
      expect(await run(rows, [2])).toEqual({
        rows: [
          { id: 1, q: 6 },
          { id: 2, q: 3 },
        ],
        rowCount: 2,
      });
      await expect(run(rows, [3])).rejects.toMatchObject({ code: "22012" });
      expect(await run(rows, [1])).toEqual({ rows: [{ id: 1, q: 6 }], rowCount: 1 });
    });

    it("answers a text of any size and script whole, and a reply with a notice as the plain form does", async () => {
      // Past Postgres' 8 KiB send buffer, which writes a reply in pieces, and split inside characters.
      const title = `"\\\u2028é🎬${"é🎬ü".repeat(6_000)}`;
      await db.exec(`CREATE TABLE agg_big (id int4 PRIMARY KEY, title text NOT NULL)`);
      await db.query("INSERT INTO agg_big SELECT g, $1 || g FROM generate_series(1, 25) g", [title]);
      const text = "SELECT id, title FROM agg_big WHERE id <= $1 ORDER BY id";
      const answers = await repeated(text, [5]);
      expect(answers[0]?.rows.map((r) => r.title)).toEqual([1, 2, 3, 4, 5].map((i) => `${title}${i}`));
      expect(answers[1]).toEqual(answers[0]);
      expect(answers[2]).toEqual(answers[0]);
      expect(await preparedForms(text)).toEqual(fast);
      // Replies of 1.4 MB and of one row after it, each whole.
      const all = await run<{ id: number; title: string }>(text, [25]);
      expect(all.rows.map((r) => r.title)).toEqual(Array.from({ length: 25 }, (_, i) => `${title}${i + 1}`));
      expect((await run(text, [1])).rows).toEqual([{ id: 1, title: `${title}1` }]);

      // A notice comes in the reply before the row.
      await db.exec(`CREATE FUNCTION agg_noisy(n int4) RETURNS int4 LANGUAGE plpgsql AS $$
        BEGIN RAISE NOTICE 'noisy %', n; RETURN n * 2; END $$`);
      const noisy = "SELECT agg_noisy($1) AS twice";
      const loud = await repeated(noisy, [21]);
      expect(loud.map((a) => a.rows)).toEqual([[{ twice: 42 }], [{ twice: 42 }], [{ twice: 42 }]]);
      expect(await preparedForms(noisy)).toEqual(fast);
    });

    it("counts the rows of a SELECT in rowCount, in either form", async () => {
      await db.exec(`CREATE TABLE agg_count (id int4 PRIMARY KEY);
        INSERT INTO agg_count SELECT generate_series(1, 51);`);
      const text = "SELECT id FROM agg_count WHERE id <= $1 ORDER BY id";
      for (const limit of [51, 51, 3, 1, 0]) expect((await run(text, [limit])).rowCount).toBe(limit);
      expect(await preparedForms(text)).toEqual(fast);
      // A fresh text learns from its first answer, whose count is the plain form's.
      const fresh = "SELECT id, id + 1 AS next FROM agg_count WHERE id <= $1";
      const answers = await repeated(fresh, [7]);
      expect(answers.map((a) => a.rowCount)).toEqual([7, 7, 7]);
      expect(answers.map((a) => a.rows.length)).toEqual([7, 7, 7]);
    });

    it("takes a text that ends in a line comment, or with quoted column names", async () => {
      await db.exec(`CREATE TABLE agg_odd (id int4 PRIMARY KEY, title text);
        INSERT INTO agg_odd VALUES (1, 'one');`);
      const texts = [
        "SELECT id, title FROM agg_odd WHERE id = $1 -- the one row",
        `SELECT id AS "Id", title AS "we""ird name", $1::text AS "?column?" FROM agg_odd WHERE id = $1::int`,
        "SELECT $1 AS untyped",
        `SELECT id, title AS "__proto__" FROM agg_odd WHERE id = $1::int`,
      ];
      const expected = [
        { id: 1, title: "one" },
        { Id: 1, 'we"ird name': "one", "?column?": "1" },
        { untyped: "1" },
        JSON.parse('{"id": 1, "__proto__": "one"}'),
      ];
      for (const [i, text] of texts.entries()) {
        const answers = await repeated(text, ["1"]);
        expect(answers[0]).toEqual({ rows: [expected[i]], rowCount: 1 });
        // A column named __proto__ is a field like any other, not the row's prototype.
        expect(answers.map((a) => Object.keys(a.rows[0] as object))).toEqual(
          Array(3).fill(Object.keys(expected[i] as object)),
        );
        expect(answers[1]).toEqual(answers[0]);
        expect(answers[2]).toEqual(answers[0]);
        expect(await preparedForms(text)).toEqual(fast);
      }
    });

    it("aggregates up to 100 columns, and runs a text of more as written", async () => {
      const select = (n: number) =>
        `SELECT ${Array.from({ length: n }, (_, i) => `$1::int + ${i} AS c${i}`).join(", ")}`;
      const row = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`c${i}`, 10 + i]));
      for (const [n, forms] of [
        [100, fast],
        [101, ["plain"]],
      ] as const) {
        const answers = await repeated(select(n), [10]);
        expect(answers[0]).toEqual({ rows: [row(n)], rowCount: 1 });
        expect(answers[1]).toEqual(answers[0]);
        expect(answers[2]).toEqual(answers[0]);
        expect(await preparedForms(select(n))).toEqual(forms);
      }
    });
  });
});

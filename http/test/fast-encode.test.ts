import { Arbitrary, FastCheck, Schema } from "effect";
import { describe, expect, it } from "vitest";
import { compileEncoder, failed } from "../src/fast-encode.js";
import { operations } from "../src/index.js";

// The host's own routes answer from the process, through their own replies rather than the encoder.
const outputs = operations.flatMap((op) =>
  op.output === null || op.stateless ? [] : [{ id: op.id, output: op.output }],
);
const slow = (schema: Schema.Schema.AnyNoContext, value: unknown) => {
  try {
    return { ok: true, json: JSON.stringify(Schema.encodeUnknownSync(schema)(value)) };
  } catch {
    return { ok: false };
  }
};

/** Extra fields a core value may carry (a domain object's tenant_id) that encoding drops. */
const withExtras = (value: unknown, seed: number): unknown => {
  if (Array.isArray(value)) return value.map((v, i) => withExtras(v, seed + i));
  if (typeof value !== "object" || value === null) return value;
  const out: Record<string, unknown> = { internal_secret: `x${seed}`, tenant_id: "t" };
  for (const [k, v] of Object.entries(value)) out[k] = withExtras(v, seed + 1);
  return out;
};

describe("the compiled response encoder", () => {
  it("checks a union of literals in one lookup and NullOr by its null first, as Schema.encode does", () => {
    const schema = Schema.Struct({
      status: Schema.Literal("pending", "ready", 0, true),
      code: Schema.NullOr(Schema.Literal("a", "b")),
      size: Schema.NullOr(Schema.Int.pipe(Schema.nonNegative())),
      owner: Schema.NullOr(Schema.Struct({ id: Schema.String })),
      any: Schema.NullOr(Schema.Unknown),
    });
    const fast = compileEncoder(schema.ast);
    if (!fast) throw new Error("not compiled");
    const base = { status: "ready", code: null, size: null, owner: null, any: null };
    for (const value of [
      base,
      { ...base, status: 0, code: "b", size: 3, owner: { id: "u", extra: 1 }, any: { x: 1 } },
      { ...base, status: true, any: 5 },
    ])
      expect(fast(value)).toEqual(Schema.encodeUnknownSync(schema)(value));
    for (const value of [
      { ...base, status: "done" },
      { ...base, status: "0" },
      { ...base, status: false },
      { ...base, code: "c" },
      { ...base, size: -1 },
      { ...base, size: 1.5 },
      { ...base, owner: { id: 1 } },
      { ...base, owner: undefined },
    ]) {
      expect(failed(fast(value))).toBe(true);
      expect(() => Schema.encodeUnknownSync(schema)(value)).toThrow();
    }
  });

  it("compiles every output schema of the catalog", () => {
    expect(outputs.filter(({ output }) => compileEncoder(output.ast) === undefined).map((o) => o.id)).toEqual(
      [],
    );
  });

  for (const { id, output } of outputs)
    it(`answers what Schema.encode answers, byte for byte, for ${id}`, () => {
      const fast = compileEncoder(output.ast);
      if (!fast) throw new Error("not compiled");
      const others = outputs.filter((o) => o.id !== id);
      FastCheck.assert(
        FastCheck.property(
          Arbitrary.make(output),
          FastCheck.integer({ min: 0, max: others.length - 1 }),
          (value, other) => {
            // A valid value, the same with fields the schema does not know, and another
            // operation's reply (mostly invalid here): the fast path never answers otherwise.
            const foreign = FastCheck.sample(Arbitrary.make(others[other]?.output ?? output), {
              numRuns: 1,
              seed: other,
            })[0];
            for (const candidate of [value, withExtras(value, other), foreign]) {
              const encoded = fast(candidate);
              const reference = slow(output, candidate);
              if (failed(encoded)) continue;
              expect(reference).toEqual({ ok: true, json: JSON.stringify(encoded) });
            }
            expect(failed(fast(value))).toBe(false);
            expect(failed(fast(withExtras(value, other)))).toBe(false);
          },
        ),
        { numRuns: 60, seed: 13 },
      );
    });
});

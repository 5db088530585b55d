import { Arbitrary, FastCheck, Schema } from "effect";
import { describe, expect, it } from "vitest";
import { compileEncoder, failed } from "../src/api/fast-encode.js";
import { operations } from "../src/index.js";

const outputs = operations.flatMap((op) => (op.output === null ? [] : [{ id: op.id, output: op.output }]));
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

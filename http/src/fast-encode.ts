import { Option, type SchemaAST } from "effect";

/** What a compiled encoder answers for a value its schema does not accept. */
const FAIL: unique symbol = Symbol("fail");
type Encoder = (value: unknown) => unknown;

/**
 * An encoder for an output schema whose encoded side is its type side (structs, arrays, unions,
 * literals, primitives and refinements of them: every response schema of the catalog): it keeps
 * the schema's fields in the schema's order and drops the others, as `Schema.encode` does, and
 * checks every field's type and refinement, in a plain walk instead of Effect's interpreter
 * (which the profile of GET /v1/assets?limit=50 showed as the host's largest cost after I/O).
 * Undefined for a schema with anything else (a transformation, a record, a suspension): those go
 * through `Schema.encode`. The result is `FAIL` where `Schema.encode` would fail; the caller then
 * runs `Schema.encode` for its error.
 */
export const compileEncoder = (ast: SchemaAST.AST): Encoder | undefined => compile(ast);

export const failed = (result: unknown): boolean => result === FAIL;

/** Whether a member's encoded value can differ from its input: objects and arrays are rebuilt. */
const rebuilds = (ast: SchemaAST.AST): boolean =>
  ast._tag === "TypeLiteral" ||
  ast._tag === "TupleType" ||
  (ast._tag === "Refinement" && rebuilds(ast.from)) ||
  (ast._tag === "Union" && ast.types.some(rebuilds));

const compile = (ast: SchemaAST.AST): Encoder | undefined => {
  switch (ast._tag) {
    case "StringKeyword":
      return (v) => (typeof v === "string" ? v : FAIL);
    case "NumberKeyword":
      return (v) => (typeof v === "number" ? v : FAIL);
    case "BooleanKeyword":
      return (v) => (typeof v === "boolean" ? v : FAIL);
    case "UndefinedKeyword":
      return (v) => (v === undefined ? v : FAIL);
    case "UnknownKeyword":
      return (v) => v;
    case "Literal": {
      const literal = ast.literal;
      return (v) => (v === literal ? v : FAIL);
    }
    case "Refinement": {
      const from = compile(ast.from);
      if (!from) return undefined;
      const { filter } = ast;
      return (v) => {
        const encoded = from(v);
        return encoded === FAIL || Option.isSome(filter(v, {}, ast)) ? FAIL : encoded;
      };
    }
    case "Union": {
      // A union of literals (a status, a code) is one lookup, not a call per member; Set.has
      // compares as `===` does, but for NaN, whose unions keep the call per member.
      if (ast.types.every((t) => t._tag === "Literal" && !Number.isNaN((t as SchemaAST.Literal).literal))) {
        const literals = new Set<unknown>(ast.types.map((t) => (t as SchemaAST.Literal).literal));
        return (v) => (literals.has(v) ? v : FAIL);
      }
      // NullOr(X): null, or what X makes of the value, when X refuses null itself.
      if (ast.types.length === 2) {
        const nullAt = ast.types.findIndex((t) => t._tag === "Literal" && t.literal === null);
        const other = nullAt === -1 ? undefined : compile(ast.types[1 - nullAt] as SchemaAST.AST);
        if (other !== undefined && other(null) === FAIL) return (v) => (v === null ? v : other(v));
      }
      const members = ast.types.map(compile);
      if (members.some((m) => m === undefined)) return undefined;
      const all = members as Encoder[];
      // Primitive members give back the value itself, whichever accepts it. Of members that
      // rebuild, Effect may try another first than the first that accepts (it looks at literal
      // fields first): only a value exactly one of them accepts is encoded here.
      if (!ast.types.some(rebuilds))
        return (v) => {
          for (const member of all) if (member(v) !== FAIL) return v;
          return FAIL;
        };
      return (v) => {
        let found: unknown = FAIL;
        for (const member of all) {
          const encoded = member(v);
          if (encoded === FAIL) continue;
          if (found !== FAIL) return FAIL;
          found = encoded;
        }
        return found;
      };
    }
    case "TupleType": {
      // Arrays only: no fixed elements, one rest type.
      if (ast.elements.length > 0 || ast.rest.length !== 1) return undefined;
      const item = compile((ast.rest[0] as SchemaAST.Type).type);
      if (!item) return undefined;
      return (v) => {
        if (!Array.isArray(v)) return FAIL;
        const out = new Array<unknown>(v.length);
        for (let i = 0; i < v.length; i++) {
          const encoded = item(v[i]);
          if (encoded === FAIL) return FAIL;
          out[i] = encoded;
        }
        return out;
      };
    }
    case "TypeLiteral": {
      if (ast.indexSignatures.length > 0) return undefined;
      const fields: Array<{ name: string; optional: boolean; encode: Encoder }> = [];
      for (const p of ast.propertySignatures) {
        const encode = compile(p.type);
        if (!encode || typeof p.name !== "string") return undefined;
        fields.push({ name: p.name, optional: p.isOptional, encode });
      }
      return structEncoder(fields);
    }
    default:
      return undefined;
  }
};

/**
 * A struct's encoder as a function written for its fields: each field read and written under its
 * own name, where a loop over the names made every read and write a lookup by a changing key (the
 * encoder of 50 assets took ~40 µs, most of it there). The names are the schema's own, quoted
 * with JSON.stringify; nothing a client sends reaches the source.
 */
const structEncoder = (
  fields: ReadonlyArray<{ name: string; optional: boolean; encode: Encoder }>,
): Encoder => {
  const steps = fields.map(({ name, optional }, i) => {
    const key = JSON.stringify(name);
    return `if (Object.hasOwn(v, ${key})) { e = encoders[${i}](v[${key}]); if (e === FAIL) return FAIL; out[${key}] = e; }${optional ? "" : " else return FAIL;"}`;
  });
  const source = `return (v) => {
    if (typeof v !== "object" || v === null || Array.isArray(v)) return FAIL;
    const out = {};
    let e;
    ${steps.join("\n    ")}
    return out;
  };`;
  return new Function("FAIL", "encoders", source)(
    FAIL,
    fields.map((f) => f.encode),
  ) as Encoder;
};

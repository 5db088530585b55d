import { Effect, ParseResult, Schema } from "effect";
import { InternalError, InvalidRequest, type VodError, type VodErrorTag } from "../errors.js";
import { inputProblems } from "../schema/input.js";
import { authorize, type Credentials, type Principal, type Requirement } from "../use-cases/authenticate.js";
import { enforceRate } from "../use-cases/support.js";
import type { Vod } from "../vod.js";
import { compileEncoder, failed } from "./fast-encode.js";

/** A request as any host hands it over: decoded JSON, no framework types. */
export interface RawRequest {
  readonly params: Readonly<Record<string, string>>;
  readonly query: unknown;
  readonly body: unknown;
  readonly credentials: Credentials;
  readonly clientIp: string;
  readonly requestId: string;
}

export interface Reply {
  readonly status: number;
  /** Absent for 204. */
  readonly body?: unknown;
}

export interface PublicCall {
  readonly clientIp: string;
  readonly requestId: string;
}
export interface AuthedCall extends PublicCall {
  readonly principal: Principal;
}

export type HttpMethod = "GET" | "POST" | "DELETE";

/** What every operation of the catalog exposes: enough to route it, document it and run it. */
export interface Operation {
  readonly id: string;
  readonly method: HttpMethod;
  /** Path with `:name` parameters, e.g. `/v1/assets/:id`. */
  readonly path: string;
  readonly summary: string;
  readonly auth: Requirement | "none";
  readonly status: 200 | 201 | 202 | 204;
  readonly input: Schema.Schema.AnyNoContext;
  readonly output: Schema.Schema.AnyNoContext | null;
  /**
   * The errors the use case raises beyond those the OpenAPI generator derives from the rest of
   * the definition (credential, path ids, body): a duplicate email, an upload in progress.
   */
  readonly errors?: ReadonlyArray<VodErrorTag>;
  /** Authenticates, authorizes, decodes, runs the use case and encodes the reply. */
  readonly execute: (vod: Vod, request: RawRequest) => Effect.Effect<Reply, VodError>;
}

interface Definition<I, IE, O, OE> {
  readonly id: string;
  readonly method: HttpMethod;
  readonly path: string;
  readonly summary: string;
  readonly status: 200 | 201 | 202 | 204;
  /** Decodes `{ params, query, body }`. */
  readonly input: Schema.Schema<I, IE>;
  readonly output: Schema.Schema<O, OE> | null;
  readonly errors?: ReadonlyArray<VodErrorTag>;
}

type FieldPath = ReadonlyArray<string | number>;

/** One `{ path, message }` per failing field, the path relative to body, query or params. */
export const toInvalidRequest = (error: ParseResult.ParseError): InvalidRequest => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => ({
    path: issue.path.slice(1).map((p) => (typeof p === "symbol" ? String(p) : p)),
    // Effect's own words list the known keys; the field's path already says which one.
    message: issue._tag === "Unexpected" ? "is not a known field" : issue.message,
  }));
  // An optional field fails once per member of its union ("Expected undefined, ..."): keep the
  // first, most specific message per path, and none for a path whose inner fields are named.
  const key = (path: FieldPath) => JSON.stringify(path);
  const inner = new Set(
    issues.flatMap((i) => i.path.slice(0, -1).map((_, n) => key(i.path.slice(0, n + 1)))),
  );
  const seen = new Set<string>();
  const fields = issues.filter((field) => {
    const k = key(field.path);
    if (seen.has(k) || inner.has(k)) return false;
    seen.add(k);
    return true;
  });
  return invalidFields(fields, "request failed validation");
};

const invalidFields = (
  fields: ReadonlyArray<{ path: FieldPath; message: string }>,
  fallback: string,
): InvalidRequest => {
  const first = fields[0];
  const where = first && first.path.length > 0 ? `${first.path.join(".")}: ` : "";
  return new InvalidRequest({
    message: first ? `${where}${first.message}` : fallback,
    details: { fields },
  });
};

/** The shape of the input itself, before any schema (`inputProblems`), in params, query and body. */
const refuseHostile = (input: { params?: unknown; query?: unknown; body?: unknown }) => {
  const fields = [
    ...inputProblems(input.params),
    ...inputProblems(input.query),
    ...inputProblems(input.body),
  ];
  return fields.length === 0 ? Effect.void : Effect.fail(invalidFields(fields, "request refused"));
};

const strictBodies = new WeakMap<object, Schema.Schema.AnyNoContext>();

/**
 * The input schema with unknown fields of the JSON body refused (a typo like `titel` must not
 * create an "Untitled" asset), at every depth of the body. Query strings stay lenient: proxies
 * and players add parameters of their own (cache busters).
 */
const withStrictBody = <I, IE>(schema: Schema.Schema<I, IE>): Schema.Schema<I, IE> => {
  const known = strictBodies.get(schema);
  if (known) return known as unknown as Schema.Schema<I, IE>;
  const fields = (schema as { fields?: Schema.Struct.Fields }).fields;
  const body = fields?.body;
  const strict =
    fields !== undefined && body !== undefined && Schema.isSchema(body)
      ? Schema.Struct({ ...fields, body: body.annotations({ parseOptions: { onExcessProperty: "error" } }) })
      : schema;
  strictBodies.set(schema, strict as Schema.Schema.AnyNoContext);
  return strict as unknown as Schema.Schema<I, IE>;
};

/**
 * The one decode of a request's `{ params, query, body }`: NULs and deep nesting first, then the schema,
 * unknown body fields refused. Every field that fails is named in `details.fields`.
 */
export const decodeRequest = <I, IE>(
  schema: Schema.Schema<I, IE>,
  input: { readonly params?: unknown; readonly query?: unknown; readonly body?: unknown },
): Effect.Effect<I, InvalidRequest> =>
  Effect.zipRight(
    refuseHostile(input),
    Effect.mapError(
      Schema.decodeUnknown(withStrictBody(schema), { errors: "all", onExcessProperty: "ignore" })(input),
      toInvalidRequest,
    ),
  );

const decode = <I, IE>(schema: Schema.Schema<I, IE>, request: RawRequest) =>
  decodeRequest(schema, {
    params: request.params,
    query: request.query ?? {},
    // No body reads as an empty object, so a missing required field is named as such.
    body: request.body ?? {},
  });

const encoders = new WeakMap<object, ((value: unknown) => unknown) | null>();

/** The output schema's compiled encoder (`fast-encode.ts`), once per schema; null where it has none. */
const encoderOf = (output: Schema.Schema.AnyNoContext) => {
  let encoder = encoders.get(output);
  if (encoder === undefined) {
    encoder = compileEncoder(output.ast) ?? null;
    encoders.set(output, encoder);
  }
  return encoder;
};

const encode = <O, OE>(
  def: Definition<unknown, unknown, O, OE>,
  value: O,
): Effect.Effect<Reply, InternalError> => {
  if (def.output === null) return Effect.succeed({ status: def.status });
  const fast = encoderOf(def.output as Schema.Schema.AnyNoContext)?.(value);
  if (fast !== undefined && !failed(fast)) return Effect.succeed({ status: def.status, body: fast });
  // No compiled encoder, or a value it refuses: Effect's own encode, for its answer or its error.
  return Effect.map(
    Effect.mapError(
      Schema.encode(def.output)(value),
      (cause) => new InternalError({ message: `response of ${def.id} failed its schema`, cause }),
    ),
    (body) => ({ status: def.status, body }),
  );
};

/** An operation without credentials (sign-up, sign-in, refresh). */
export const publicOperation = <I, IE, O, OE>(
  def: Definition<I, IE, O, OE> & {
    readonly run: (vod: Vod, input: I, call: PublicCall) => Effect.Effect<O, VodError>;
  },
): Operation => ({
  ...def,
  auth: "none",
  execute: (vod, request) =>
    Effect.gen(function* () {
      const input = yield* decode(def.input, request);
      const value = yield* def.run(vod, input, request);
      return yield* encode(def as Definition<unknown, unknown, O, OE>, value);
    }),
});

/**
 * An operation that needs a credential. Credentials are checked before the input, so a caller
 * without access learns nothing from validation errors.
 */
export const authedOperation = <I, IE, O, OE>(
  def: Definition<I, IE, O, OE> & {
    readonly auth: Requirement;
    readonly run: (vod: Vod, input: I, call: AuthedCall) => Effect.Effect<O, VodError>;
  },
): Operation => ({
  ...def,
  execute: (vod, request) =>
    Effect.gen(function* () {
      const principal = yield* vod.authenticate(request.credentials);
      yield* authorize(principal, def.auth);
      const credentialId = principal.kind === "user" ? principal.sessionId : principal.keyId;
      yield* enforceRate(
        vod.ports.rateLimiter,
        `api:${principal.kind}:${credentialId}`,
        { limit: vod.config.rateLimits.apiPerCredentialPerMinute, windowMs: 60_000 },
        vod.ports.clock.now(),
      );
      const input = yield* decode(def.input, request);
      const value = yield* def.run(vod, input, { ...request, principal });
      return yield* encode(def as Definition<unknown, unknown, O, OE>, value);
    }),
});

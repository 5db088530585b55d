import {
  type Credentials,
  enforceRate,
  InternalError,
  type InvalidRequest,
  inputProblems,
  type Principal,
  type RequestedRange,
  type Requirement,
  refusal,
  type Vod,
  type VodError,
  type VodErrorTag,
} from "@vod/core";
import { Effect, Either, Exit, ParseResult, Schema } from "effect";
import { invalidInput } from "./errors.js";
import { compileEncoder, failed } from "./fast-encode.js";
import { type IdempotencyRule, idempotencyPrincipal, idempotent } from "./idempotency.js";
import type { RawRequest, Reply } from "./request.js";

export { headerOf, type RawRequest, type Reply } from "./request.js";

export interface PublicCall {
  readonly clientIp: string;
  readonly requestId: string;
  readonly credentials: Credentials;
  readonly headers?: RawRequest["headers"];
  readonly stream?: RawRequest["stream"];
  readonly range?: RequestedRange;
  readonly method?: string;
  readonly path?: string;
  readonly host?: RawRequest["host"];
}
export interface AuthedCall extends PublicCall {
  readonly principal: Principal;
}

/** HEAD is served by the GET route; OPTIONS is a CORS preflight. */
export type HttpMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS";

/** Which app serves the route: the API (`{base_url}`), media (`{media_url}`) or DRM (`{drm_url}`). */
export type App = "api" | "media" | "drm";

/**
 * What the route reads as its body:
 * - `json`: a JSON body (Content-Type JSON, at most 64 KiB), parsed by the host;
 * - `text`: raw text of any content type, refused with 413 past `maxBytes` before it is read
 *   whole, read as JSON by the one decode (`decodeRequest`); `mediaTypes` are those documented;
 * - `stream`: bytes streamed to the use case (`call.stream`), never buffered;
 * - `none`: never read.
 */
export type BodyKind =
  | { readonly kind: "json" }
  | { readonly kind: "text"; readonly maxBytes: number; readonly mediaTypes: ReadonlyArray<string> }
  | { readonly kind: "stream"; readonly mediaType: string }
  | { readonly kind: "none" };

/** A credential of its own kind, checked by the use case (the API's credentials are `auth`). */
export type TokenCredential =
  /** A playback session's token: in the path's `:token`, the JSON body's `token`, or as a bearer. */
  | { readonly token: "playback"; readonly in: "path" | "body" | "bearer" }
  /** The licence token an entitlement gives, in its header. */
  | { readonly token: "license"; readonly in: "header"; readonly name: string }
  /** The signature of a part upload URL, in its query (`t`, `e`, `s`). */
  | { readonly token: "part-signature"; readonly in: "query" }
  /** The operator's metrics token (VOD_METRICS_TOKEN), when one is set, as a bearer. */
  | { readonly token: "metrics"; readonly in: "bearer" };

/**
 * A success that is not the output schema's JSON:
 * - `headers`: no body, the value said by headers (described here);
 * - `file`: a file body of one of `mediaTypes` (whole, or a range with 206), a redirect (302),
 *   or 416 with the error body; HEAD answers too;
 * - `opaque`: a body of one of `mediaTypes` that no schema here describes (metrics, a document).
 */
export type ReplyKind =
  | { readonly kind: "json" }
  | { readonly kind: "headers"; readonly headers: Readonly<Record<string, string>> }
  /** `headers`: what the file's answers may carry beside the usual ones, each with its description. */
  | {
      readonly kind: "file";
      readonly mediaTypes: ReadonlyArray<string>;
      readonly headers?: Readonly<Record<string, string>>;
    }
  | { readonly kind: "opaque"; readonly mediaTypes: ReadonlyArray<string> };

/** CORS for routes browsers call from other origins: the headers a page may send and read. */
export interface Cors {
  readonly allowHeaders: ReadonlyArray<string>;
  readonly exposeHeaders?: ReadonlyArray<string>;
}

/** What every operation of the catalog exposes: enough to route it, document it and run it. */
export interface Operation {
  readonly id: string;
  readonly method: HttpMethod;
  /** Path with `:name` parameters and, last, one `*name` for the rest of the path. */
  readonly path: string;
  readonly summary: string;
  readonly auth: Requirement | "none";
  /** With `auth: "none"`, the credential of its own the route takes, if any. */
  readonly credential?: TokenCredential;
  readonly app: App;
  readonly body: BodyKind;
  readonly reply: ReplyKind;
  readonly cors?: Cors;
  readonly status: 200 | 201 | 202 | 204;
  readonly input: Schema.Schema.AnyNoContext;
  readonly output: Schema.Schema.AnyNoContext | null;
  /** What the decode lets through that it refuses elsewhere: unknown body fields, NULs. */
  readonly lenient?: Lenience;
  /**
   * The errors the use case raises beyond those the OpenAPI generator derives from the rest of
   * the definition (credential, path ids, body): a duplicate email, an upload in progress.
   */
  readonly errors?: ReadonlyArray<VodErrorTag>;
  /** How an Idempotency-Key applies, on an authenticated POST; recorded, with no secret, when absent. */
  readonly idempotency?: IdempotencyRule;
  /**
   * Answers from the process itself (health, metrics, this API's document): no storage behind it
   * and no input to refuse, so none of the errors those bring.
   */
  readonly stateless?: boolean;
  /** Authenticates, authorizes, decodes, runs the use case and encodes the reply. */
  readonly execute: (vod: Vod, request: RawRequest) => Effect.Effect<Reply, VodError>;
}

/**
 * Leave to the use case what the decode refuses elsewhere: NUL characters (a media file name
 * with one is no file: 404; a telemetry event with one is dropped, not its batch). Unknown body
 * fields are refused everywhere (DECISIONS "Hostile input"); a field whose schema is `unknown`
 * (a telemetry event) keeps its keys.
 */
export interface Lenience {
  readonly nul?: boolean;
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
  /** Authenticated POSTs: whether an Idempotency-Key is recorded, and which reply fields are secret. */
  readonly idempotency?: IdempotencyRule;
  /** Default `api`. */
  readonly app?: App;
  /** Default `{ kind: "json" }`. */
  readonly body?: BodyKind;
  readonly cors?: Cors;
  readonly lenient?: Lenience;
  readonly stateless?: boolean;
  /**
   * How the use case's value becomes the reply (status, headers, a streamed body), where it is
   * not the output's JSON with the success status: its `ReplyKind` and the reply.
   */
  readonly reply?: {
    readonly kind: ReplyKind;
    readonly of: (value: NoInfer<O>, vod: Vod) => Reply;
  };
}

type FieldPath = ReadonlyArray<string | number>;

/** `invalidInput` named by its first field; `fallback` when no field is named. */
const invalidFields = (
  fields: ReadonlyArray<{ path: FieldPath; message: string }>,
  fallback: string,
): InvalidRequest => {
  const first = fields[0];
  const where = first && first.path.length > 0 ? `${first.path.join(".")}: ` : "";
  return invalidInput(first ? `${where}${first.message}` : fallback, fields);
};

/** A schema's refusal of the input as `invalidFields`. */
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

type Input = { readonly params?: unknown; readonly query?: unknown; readonly body?: unknown };

/** The shape of the input itself, before any schema (`inputProblems`), in params, query and body. */
const hostileInput = (input: Input, nul: boolean): InvalidRequest | undefined => {
  const options = { nul };
  const fields = [
    ...inputProblems(input.params, options),
    ...inputProblems(input.query, options),
    ...inputProblems(input.body, options),
  ];
  return fields.length === 0 ? undefined : invalidFields(fields, "request refused");
};

const DECODE_OPTIONS = { errors: "all", onExcessProperty: "ignore" } as const;
type SyncDecoder = (input: unknown) => Either.Either<unknown, ParseResult.ParseError>;
const syncDecoders = new WeakMap<object, SyncDecoder>();

/**
 * The schema's decoder without Effect's runtime, made once per schema: every input schema of the
 * catalog decodes synchronously, and `Schema.decodeUnknown` per request (a parser looked up, an
 * Effect to run) cost several times the decode itself.
 */
const syncDecoderOf = (schema: Schema.Schema.AnyNoContext): SyncDecoder => {
  let decoder = syncDecoders.get(schema);
  if (decoder === undefined) {
    decoder = Schema.decodeUnknownEither(schema, DECODE_OPTIONS) as SyncDecoder;
    syncDecoders.set(schema, decoder);
  }
  return decoder;
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

const notJson = () => invalidFields([{ path: [], message: "not JSON" }], "body is not JSON");

/**
 * The one decode of a request's `{ params, query, body }`: a text body read as JSON, then NULs
 * (unless `lenient` lets them through) and deep nesting, then the schema, unknown body fields
 * refused. Every field that fails is named in `details.fields`.
 */
export const decodeRequest = <I, IE>(
  schema: Schema.Schema<I, IE>,
  input: Input,
  options: { readonly textBody?: boolean; readonly lenient?: Lenience } = {},
): Effect.Effect<I, InvalidRequest> => {
  let value = input;
  if (options.textBody) {
    try {
      value = { ...input, body: JSON.parse(String(input.body ?? "")) as unknown };
    } catch {
      return Exit.fail(notJson());
    }
  }
  const lenient = options.lenient;
  const hostile = hostileInput(value, lenient?.nul !== true);
  if (hostile !== undefined) return Exit.fail(hostile);
  const target = withStrictBody(schema) as Schema.Schema.AnyNoContext;
  const decoded = syncDecoderOf(target)(value);
  if (Either.isRight(decoded)) return Exit.succeed(decoded.right as I);
  // A schema that cannot decode synchronously (none in the catalog today) gets Effect's own decode.
  if (decoded.left.issue._tag === "Forbidden")
    return Effect.mapError(
      Schema.decodeUnknown(target, DECODE_OPTIONS)(value) as Effect.Effect<I, ParseResult.ParseError>,
      toInvalidRequest,
    );
  return Exit.fail(toInvalidRequest(decoded.left));
};

const JSON_BODY: BodyKind = { kind: "json" };
const JSON_REPLY: ReplyKind = { kind: "json" };

const decoderOf = <I, IE>(def: Definition<I, IE, unknown, unknown>) => {
  const options = { textBody: def.body?.kind === "text", lenient: def.lenient };
  return (request: RawRequest) =>
    decodeRequest(
      def.input,
      {
        params: request.params,
        query: request.query ?? {},
        // No body reads as an empty object, so a missing required field is named as such.
        body: options.textBody ? request.body : (request.body ?? {}),
      },
      options,
    );
};

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
  vod: Vod,
  value: O,
): Effect.Effect<Reply, InternalError> => {
  if (def.reply) return Effect.succeed(def.reply.of(value, vod));
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

/** The operation's description, its defaults filled in. */
const describe = (
  def: Definition<unknown, unknown, unknown, unknown>,
  auth: Requirement | "none",
  credential: TokenCredential | undefined,
) => ({
  ...def,
  auth,
  ...(credential ? { credential } : {}),
  app: def.app ?? "api",
  body: def.body ?? JSON_BODY,
  reply: def.reply?.kind ?? JSON_REPLY,
});

/**
 * An operation without API credentials: sign-up, sign-in, refresh; and the routes that take a
 * credential of their own (`credential`), which their use case checks (media, telemetry, DRM).
 * One that travels outside the input (a header) is checked by `verify` before the input is
 * decoded, as API credentials are, and its claims handed to `run`.
 */
export const publicOperation = <I, IE, O, OE, C = undefined>(
  def: Definition<I, IE, O, OE> & {
    readonly credential?: TokenCredential;
    readonly verify?: (vod: Vod, call: PublicCall) => Effect.Effect<C, VodError>;
    readonly run: (
      vod: Vod,
      input: I,
      call: PublicCall & { readonly claims: C },
    ) => Effect.Effect<O, VodError>;
  },
): Operation => {
  const decode = decoderOf(def as Definition<I, IE, unknown, unknown>);
  const verify = def.verify;
  return {
    ...describe(def as Definition<unknown, unknown, unknown, unknown>, "none", def.credential),
    execute: (vod, request) =>
      Effect.gen(function* () {
        const claims = verify === undefined ? undefined : yield* verify(vod, request);
        const input = yield* decode(request);
        const call = (verify === undefined ? request : { ...request, claims }) as PublicCall & { claims: C };
        const value = yield* def.run(vod, input, call);
        return yield* encode(def as Definition<unknown, unknown, O, OE>, vod, value);
      }),
  };
};

/**
 * An operation that needs a credential. Credentials are checked before the input, so a caller
 * without access learns nothing from validation errors.
 */
export const authedOperation = <I, IE, O, OE>(
  def: Definition<I, IE, O, OE> & {
    readonly auth: Requirement;
    readonly run: (vod: Vod, input: I, call: AuthedCall) => Effect.Effect<O, VodError>;
  },
): Operation => {
  const decode = decoderOf(def as Definition<I, IE, unknown, unknown>);
  const rule = (vod: Vod) => ({ limit: vod.config.rateLimits.apiPerCredentialPerMinute, windowMs: 60_000 });
  // Steps chained by hand rather than in Effect.gen: the generator and a fiber step per `yield*`
  // were a visible share of a cached-credential request's CPU.
  const authorized = (
    vod: Vod,
    request: RawRequest,
    principal: Principal,
  ): Effect.Effect<Reply, VodError> => {
    const refused = refusal(principal, def.auth);
    if (refused !== undefined) return Exit.fail(refused);
    const credentialId = principal.kind === "user" ? principal.sessionId : principal.keyId;
    return Effect.flatMap(
      enforceRate(
        vod.ports.rateLimiter,
        `api:${principal.kind}:${credentialId}`,
        rule(vod),
        vod.ports.clock.now(),
      ),
      (): Effect.Effect<Reply, VodError> => {
        const decoded = decode(request);
        const work = (input: I) =>
          idempotent(
            vod,
            request,
            {
              tenantId: principal.tenant.id,
              principal: idempotencyPrincipal(principal),
              method: def.method,
              path: def.path,
              rule: def.idempotency,
            },
            Effect.flatMap(def.run(vod, input, { ...request, principal }), (value) =>
              encode(def as Definition<unknown, unknown, O, OE>, vod, value),
            ),
          );
        if (Exit.isExit(decoded)) {
          const exit = decoded as Exit.Exit<I, InvalidRequest>;
          return Exit.isSuccess(exit) ? work(exit.value) : Exit.failCause(exit.cause);
        }
        return Effect.flatMap(decoded, work);
      },
    );
  };
  return {
    ...describe(def as Definition<unknown, unknown, unknown, unknown>, def.auth, undefined),
    execute: (vod, request) =>
      Effect.flatMap(vod.authenticate(request.credentials), (principal) =>
        authorized(vod, request, principal),
      ),
  };
};

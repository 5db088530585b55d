import { errorCode, Resources, type VodErrorTag } from "@vod/core";
import { SchemaAST as AST, JSONSchema, Schema } from "effect";
import { errorStatus } from "./errors.js";
import type { App, BodyKind, Cors, HttpMethod, Operation } from "./operation.js";

type Json = Record<string, unknown>;

/** How a route takes its credential; decides its security and its 401/403/429. */
type Credential =
  /** Authorization: Bearer <access token> or X-API-Key; `userOnly` when only an access token does. */
  | { readonly kind: "api"; readonly userOnly: boolean; readonly scope: string }
  /** A token of its own (playback, licence, signed part URL), in `scheme` or in the path or body. */
  | { readonly kind: "token"; readonly scheme?: "playbackToken" | "licenseToken" | "metricsToken" }
  | { readonly kind: "none" };

/** A response header: its description, or that and whether every such answer carries it. */
type Header = string | { readonly description: string; readonly required: true };

/** A JSON body's schema, the error body with one of `errorCodes`, or the media types of a body that is not JSON. */
type Content =
  | Schema.Schema.AnyNoContext
  | { readonly errorCodes: ReadonlyArray<string> }
  | { readonly mediaTypes: ReadonlyArray<string> };

/** The spec's error body (part 7), its `error` and `code` one of `codes`. */
const errorContent = (codes: ReadonlyArray<string>): Json => ({
  "application/json": {
    schema: {
      allOf: [
        { $ref: "#/components/schemas/Error" },
        { type: "object", properties: { error: { enum: codes }, code: { enum: codes } } },
      ],
    },
  },
});

interface Answer {
  readonly description: string;
  readonly headers?: Readonly<Record<string, Header>>;
  readonly content?: Content;
}

/** One route as the document describes it. */
interface DocumentedRoute {
  readonly id: string;
  readonly method: HttpMethod | "HEAD";
  /** Express-style: `:name` parameters, `*name` for the rest of the path. */
  readonly path: string;
  readonly summary: string;
  readonly app: App;
  readonly credential: Credential;
  /** Decodes `{ params, query, body }`. */
  readonly input: Schema.Schema.AnyNoContext;
  readonly body: BodyKind;
  readonly success: Answer & { readonly status: number };
  /** Other answers than the success and the errors of `errorsOf` (a range, a redirect), by status. */
  readonly otherAnswers?: Readonly<Record<string, Answer>>;
  /** False for routes that answer from memory (health, this document): no storage error. */
  readonly stateful: boolean;
  /** Errors beyond those derived from the rest (see `errorsOf`). */
  readonly errors: ReadonlyArray<VodErrorTag>;
  /** An authenticated POST whose Idempotency-Key is never recorded (logout, password change). */
  readonly unrecorded?: boolean;
}

const credentialOf = (op: Operation): Credential => {
  if (op.auth !== "none")
    return {
      kind: "api",
      userOnly: op.auth.kinds?.length === 1 && op.auth.kinds[0] === "user",
      scope: op.auth.scope,
    };
  const token = op.credential;
  if (token === undefined) return { kind: "none" };
  if (token.token === "metrics") return { kind: "token", scheme: "metricsToken" };
  if (token.in === "bearer") return { kind: "token", scheme: "playbackToken" };
  if (token.in === "header") return { kind: "token", scheme: "licenseToken" };
  return { kind: "token" };
};

/**
 * A file's other answers: a range of it (in the file's type), a redirect to the store, a range
 * past its end (the error body, with the file's size in Content-Range).
 */
const fileAnswers = (mediaTypes: ReadonlyArray<string>): Readonly<Record<string, Answer>> => ({
  "206": {
    description: "The requested byte range",
    headers: { "Content-Range": { description: "the range sent, and the file's size", required: true } },
    content: { mediaTypes },
  },
  "302": {
    description: "The file at a short-lived signed URL of the object store",
    headers: { Location: { description: "the signed URL", required: true } },
  },
  "416": {
    description:
      "Error: invalid_request, `details.reason` range_not_satisfiable; the range lies outside the file",
    headers: { "Content-Range": { description: "bytes */<the file's size>", required: true } },
    content: { errorCodes: [errorCode.InvalidRequest] },
  },
});

const successOf = (op: Operation): DocumentedRoute["success"] => {
  switch (op.reply.kind) {
    case "file":
      return {
        status: op.status,
        description: "The file, in its own media type",
        content: { mediaTypes: op.reply.mediaTypes },
        ...(op.reply.headers ? { headers: op.reply.headers } : {}),
      };
    case "headers":
      return { status: op.status, description: "Done; the outcome in headers", headers: op.reply.headers };
    case "opaque":
      return { status: op.status, description: "Success", content: { mediaTypes: op.reply.mediaTypes } };
    case "json":
      return op.output === null
        ? { status: op.status, description: "Done; no content" }
        : { status: op.status, description: "Success", content: op.output };
  }
};

/**
 * The CORS preflight a route browsers call answers itself, for any origin: its path parameters,
 * and the headers a page may send and read.
 */
const preflightOf = (op: Operation, cors: Cors): DocumentedRoute => {
  const params = (op.input as { fields?: Schema.Struct.Fields }).fields?.params;
  const methods = op.method === "GET" ? "GET, HEAD, OPTIONS" : `${op.method}, OPTIONS`;
  return {
    id: `${op.id}Preflight`,
    method: "OPTIONS",
    path: op.path,
    summary: `CORS preflight of ${op.id}: any origin may call it.`,
    app: op.app,
    credential: { kind: "none" },
    input: (params !== undefined && Schema.isSchema(params)
      ? Schema.Struct({ params })
      : Schema.Struct({})) as Schema.Schema.AnyNoContext,
    body: { kind: "none" },
    success: {
      status: 204,
      description: "What a page of any origin may send and read",
      headers: {
        "Access-Control-Allow-Origin": { description: "the page's origin, or *", required: true },
        "Access-Control-Allow-Methods": { description: methods, required: true },
        "Access-Control-Allow-Headers": { description: cors.allowHeaders.join(", "), required: true },
        ...(cors.exposeHeaders
          ? {
              "Access-Control-Expose-Headers": { description: cors.exposeHeaders.join(", "), required: true },
            }
          : {}),
        "Access-Control-Max-Age": "600",
      },
    },
    stateful: false,
    errors: [],
  };
};

/**
 * An operation as documented; a file's GET answers HEAD as well, which players send; a route
 * browsers call answers its CORS preflight.
 */
const fromOperation = (op: Operation): ReadonlyArray<DocumentedRoute> => {
  const route: DocumentedRoute = {
    id: op.id,
    method: op.method,
    path: op.path,
    summary: op.summary,
    app: op.app,
    credential: credentialOf(op),
    input: op.input,
    body: op.body,
    success: successOf(op),
    ...(op.reply.kind === "file" ? { otherAnswers: fileAnswers(op.reply.mediaTypes) } : {}),
    stateful: op.stateless !== true,
    errors: op.errors ?? [],
    ...(op.idempotency?.recorded === false ? { unrecorded: true } : {}),
  };
  return [
    route,
    ...(op.reply.kind === "file" && op.method === "GET"
      ? [{ ...route, id: `${op.id}Head`, method: "HEAD" as const }]
      : []),
    ...(op.cors ? [preflightOf(op, op.cors)] : []),
  ];
};

/** An optional field's type is a union with `undefined`, which a parameter says by `required`. */
const withoutUndefined = (ast: AST.AST): AST.AST => {
  if (!AST.isUnion(ast)) return ast;
  const members = ast.types.filter((t) => !AST.isUndefinedKeyword(t));
  return members.length === 1 && members[0] ? members[0] : AST.Union.make(members);
};

const propertiesOf = (ast: AST.AST): ReadonlyArray<AST.PropertySignature> =>
  AST.isTypeLiteral(ast) ? ast.propertySignatures : [];

/** Fields whose name says they point at another resource (`asset_id`): that resource may not exist. */
const namesResource = (input: AST.AST) =>
  propertiesOf(AST.encodedAST(input)).some(
    (p) => p.name === "body" && propertiesOf(p.type).some((f) => String(f.name).endsWith("_id")),
  );

/**
 * Every error a route can answer, derived from what it is: any request can be malformed (400);
 * what reads state can meet unavailable storage (503); a credential can be missing or wrong (401),
 * lack the scope or kind, or belong to a suspended tenant (403), and API credentials are rate
 * limited (429); an id in the path or the body may name nothing (404); a JSON body may be too
 * large (413). Use-case errors (a duplicate email, an upload in progress) come from the route.
 */
export const errorsOf = (route: DocumentedRoute): ReadonlyArray<VodErrorTag> => {
  if (!route.stateful) return route.errors;
  const tags = new Set<VodErrorTag>(["InvalidRequest", "StorageError", ...route.errors]);
  if (route.credential.kind !== "none") tags.add("Unauthorized");
  if (route.credential.kind === "api") for (const tag of ["Forbidden", "RateLimited"] as const) tags.add(tag);
  if (/[:*]/.test(route.path) || namesResource(route.input.ast)) tags.add("NotFound");
  if (route.body.kind === "json" || route.body.kind === "text") tags.add("PayloadTooLarge");
  return [...tags];
};

/** The error responses, one per status, shared by every route as `#/components/responses/`. */
const errorResponses = (): Record<string, Json> => {
  const byStatus = new Map<number, VodErrorTag[]>();
  for (const tag of Object.keys(errorCode) as VodErrorTag[]) {
    if (tag === "InternalError") continue;
    byStatus.set(errorStatus[tag], [...(byStatus.get(errorStatus[tag]) ?? []), tag]);
  }
  const responses: Record<string, Json> = {};
  for (const [status, tags] of byStatus)
    responses[`Error${status}`] = {
      description: `Error: ${tags.map((t) => errorCode[t]).join(" or ")}`,
      ...(status === 401
        ? { headers: { "WWW-Authenticate": { description: "Bearer challenge", schema: { type: "string" } } } }
        : status === 429
          ? {
              headers: {
                "Retry-After": {
                  description: "seconds to wait",
                  required: true,
                  schema: { type: "integer", minimum: 0 },
                },
              },
            }
          : {}),
      content: errorContent(tags.map((t) => errorCode[t])),
    };
  return responses;
};

const securityOf = (credential: Credential): Json[] => {
  switch (credential.kind) {
    case "none":
      return [];
    case "api":
      return credential.userOnly ? [{ bearer: [] }] : [{ bearer: [] }, { apiKey: [] }];
    case "token":
      return credential.scheme ? [{ [credential.scheme]: [] }] : [];
  }
};

/**
 * Effect marks `unknown` and `{}` with an `$id` (`/schemas/unknown`); several of them in one
 * document are duplicate ids, which JSON Schema 2020-12 forbids. They constrain nothing.
 */
const withoutSchemaIds = (node: unknown): unknown => {
  if (Array.isArray(node)) return node.map(withoutSchemaIds);
  if (typeof node !== "object" || node === null) return node;
  return Object.fromEntries(
    Object.entries(node)
      .filter(
        ([key, value]) => !(key === "$id" && typeof value === "string" && value.startsWith("/schemas/")),
      )
      .map(([key, value]) => [key, withoutSchemaIds(value)]),
  );
};

/**
 * A refined schema (`Int` between 1 and 100) comes out as a `$ref` with its bounds beside it.
 * JSON Schema 2020-12 applies both, but OpenAPI 3.0 tools and JSON Schema draft 7 validators
 * ignore whatever sits beside a `$ref`, so the bounds would not exist for them: a leaf
 * (`{"type": "integer"}`) is written in place instead, anything else wrapped in `allOf`.
 */
const withoutRefSiblings = (node: unknown, schemas: Readonly<Record<string, unknown>>): unknown => {
  if (Array.isArray(node)) return node.map((n) => withoutRefSiblings(n, schemas));
  if (typeof node !== "object" || node === null) return node;
  const entries = Object.entries(node).map(
    ([key, value]) => [key, withoutRefSiblings(value, schemas)] as const,
  );
  const { $ref, ...siblings } = Object.fromEntries(entries) as Json;
  if (typeof $ref !== "string" || Object.keys(siblings).length === 0) return Object.fromEntries(entries);
  const target = schemas[$ref.replace("#/components/schemas/", "")] as Json | undefined;
  const leaf =
    target !== undefined &&
    typeof target.type === "string" &&
    !["object", "array"].includes(target.type) &&
    target.$ref === undefined;
  if (!leaf) return { allOf: [{ $ref }], ...siblings };
  const { title: _title, description: _description, ...type } = target;
  return { ...type, ...siblings };
};

const headersOf = (headers: Readonly<Record<string, Header>>) =>
  Object.fromEntries(
    Object.entries(headers).map(([name, header]) => [
      name,
      typeof header === "string"
        ? { description: header, schema: { type: "string" } }
        : { ...header, schema: { type: "string" } },
    ]),
  );

/** Every authenticated POST takes an Idempotency-Key (idempotency.ts), but those never recorded. */
const idempotencyKeyParameter: Json = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  description:
    "Within 24 hours, the same key with the same request replays the first response; with another request, 400; while the first runs, 409.",
  schema: { type: "string", minLength: 1, maxLength: 255, pattern: "^[\\x20-\\x7e]+$" },
};
const replayedHeader = { "Idempotent-Replayed": "true when this is the replay of an earlier response" };

/** The value a query field takes when absent: what decoding an empty query gives it. */
const defaultsOf = (query: AST.AST | undefined): Record<string, unknown> => {
  if (query === undefined) return {};
  const decoded = Schema.decodeUnknownOption(Schema.make(query))({});
  return decoded._tag === "Some" && typeof decoded.value === "object" && decoded.value !== null
    ? (decoded.value as Record<string, unknown>)
    : {};
};

/** The server of a media or DRM route: `{media_url}` or `{drm_url}`, its value when known. */
const serverOf = (app: Exclude<App, "api">, url: string | undefined) => ({
  url: `{${app}_url}`,
  variables: {
    [`${app}_url`]: {
      default: url ?? "http://localhost:8080",
      description: `VOD_${app.toUpperCase()}_URL`,
    },
  },
});

/** The reference's introduction (info.description): a first integration's calls, and the credentials. */
const DESCRIPTION = [
  "A multi-tenant video-on-demand API. A first integration: `POST /v1/auth/signup` (an access token),",
  "`POST /v1/api-keys` (a key for servers), `POST /v1/assets` (a draft), `POST /v1/uploads` (one signed URL",
  "per part), a `PUT` of each part, `POST /v1/uploads/{id}/complete`, `GET /v1/assets/{id}` until `ready`,",
  "then `POST /v1/playback/sessions` for a token and its HLS URL (and, for an asset made with `drm: true`,",
  "`POST /v1/drm/entitlement` for its licence URL and token).\n\nCredentials: an access token as",
  "`Authorization: Bearer <token>`, or an API key as `X-API-Key: vod_…`. A key has exactly one scope,",
  "`read`, `write` or `admin`, each including the ones before it; when a key is created with several,",
  "the highest is kept and the key lists that one.",
].join(" ");

const capitalized = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

/**
 * The OpenAPI 3.1 document of a catalog and of the routes the host mounts beside it, generated
 * from the same schemas that validate requests and encode responses, so it cannot drift from what
 * the service does. Parameters are described by their decoded values (`limit` an integer), as
 * OpenAPI serializes parameter values; bodies by their JSON.
 */
export const openApiDocument = (
  operations: ReadonlyArray<Operation>,
  info: {
    title: string;
    version: string;
    serverUrl?: string;
    /** Where the media and DRM apps answer, when known; else the document names them. */
    urls?: Partial<Record<Exclude<App, "api">, string>>;
  },
): Json => {
  const definitions: Record<string, JSONSchema.JsonSchema7> = {};
  const toSchema = (ast: AST.AST) =>
    JSONSchema.fromAST(ast, {
      definitions,
      definitionPath: "#/components/schemas/",
      target: "openApi3.1",
    });
  toSchema(Resources.ErrorBody.ast);

  const paths: Record<string, Record<string, Json>> = {};
  for (const route of operations.flatMap(fromOperation)) {
    const input = route.input.ast;
    // Encoded: what is optional on the wire; decoded: the values, with their bounds.
    const encodedParts = propertiesOf(AST.encodedAST(input));
    const decodedParts = propertiesOf(AST.typeAST(input));
    const part = (parts: ReadonlyArray<AST.PropertySignature>, name: string) =>
      parts.find((p) => p.name === name);
    const parameters: Json[] = [];
    for (const [where, name] of [
      ["path", "params"],
      ["query", "query"],
    ] as const) {
      const decoded = propertiesOf(part(decodedParts, name)?.type ?? AST.neverKeyword);
      const defaults = defaultsOf(propertiesOf(input).find((p) => p.name === name)?.type);
      for (const field of propertiesOf(part(encodedParts, name)?.type ?? AST.neverKeyword)) {
        const type = decoded.find((d) => d.name === field.name)?.type ?? field.type;
        const fallback = defaults[String(field.name)];
        parameters.push({
          name: String(field.name),
          in: where,
          required: where === "path" || !field.isOptional,
          schema: {
            ...toSchema(withoutUndefined(type)),
            ...(fallback === undefined ? {} : { default: fallback }),
          },
        });
      }
    }
    const idempotent = route.method === "POST" && route.credential.kind === "api" && !route.unrecorded;
    if (idempotent) parameters.push(idempotencyKeyParameter);
    // The typed side of the body keeps its refinements (bounds, patterns); its name is the route's.
    const body = propertiesOf(input).find((p) => p.name === "body");
    const bodySchema = () =>
      body === undefined
        ? {}
        : toSchema(
            AST.annotations(body.type, { [AST.IdentifierAnnotationId]: `${capitalized(route.id)}Request` }),
          );
    const mediaTypes =
      route.body.kind === "json"
        ? ["application/json"]
        : route.body.kind === "text"
          ? route.body.mediaTypes
          : [];
    const schema = mediaTypes.length > 0 && body ? bodySchema() : undefined;
    const requestBody =
      route.body.kind === "stream"
        ? { required: true, content: { [route.body.mediaType]: { schema: {} } } }
        : schema
          ? {
              required: route.body.kind === "text" || !body?.isOptional,
              content: Object.fromEntries(mediaTypes.map((type) => [type, { schema }])),
            }
          : undefined;
    const contentOf = (content: Content | undefined) =>
      content === undefined
        ? undefined
        : Schema.isSchema(content)
          ? { "application/json": { schema: toSchema(content.ast) } }
          : "errorCodes" in content
            ? errorContent(content.errorCodes)
            : Object.fromEntries(content.mediaTypes.map((type) => [type, { schema: {} }]));
    const response = (answer: Answer) => {
      const content = contentOf(answer.content);
      return {
        description: answer.description,
        ...(answer.headers ? { headers: headersOf(answer.headers) } : {}),
        ...(content ? { content } : {}),
      };
    };
    const { success } = route;
    const responses: Json = {
      [String(success.status)]: response(
        idempotent ? { ...success, headers: { ...success.headers, ...replayedHeader } } : success,
      ),
    };
    for (const [status, answer] of Object.entries(route.otherAnswers ?? {}))
      responses[status] = response(answer);
    for (const tag of errorsOf(route)) {
      const status = errorStatus[tag];
      responses[String(status)] = { $ref: `#/components/responses/Error${status}` };
    }
    const path = route.path.replace(/[:*](\w+)/g, "{$1}");
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = {
      operationId: route.id,
      summary: route.summary,
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(requestBody ? { requestBody } : {}),
      responses,
      ...(route.app === "api" ? {} : { servers: [serverOf(route.app, info.urls?.[route.app])] }),
      security: securityOf(route.credential),
      ...(route.credential.kind === "api" ? { "x-required-scope": route.credential.scope } : {}),
    };
  }
  const document = withoutSchemaIds({
    openapi: "3.1.0",
    info: { title: info.title, version: info.version, description: DESCRIPTION },
    ...(info.serverUrl ? { servers: [{ url: info.serverUrl }] } : {}),
    paths,
    components: {
      schemas: definitions,
      responses: errorResponses(),
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "JWT",
          description: "an access token (from signup, login or refresh); never an API key",
        },
        apiKey: {
          type: "apiKey",
          in: "header",
          name: "X-API-Key",
          description:
            "an API key `vod_…` with its one scope; sent as `Authorization: Bearer` instead, it is refused 401 with a hint naming this header",
        },
        playbackToken: { type: "http", scheme: "bearer", description: "a playback session's token" },
        licenseToken: { type: "apiKey", in: "header", name: "x-vod-license-token" },
        metricsToken: { type: "http", scheme: "bearer", description: "VOD_METRICS_TOKEN, when set" },
      },
    },
  }) as Json;
  return withoutRefSiblings(document, definitions) as Json;
};

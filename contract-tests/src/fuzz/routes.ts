import type { Requirement } from "@vod/core";
import { type HttpMethod, type Lenience, type Operation, operations } from "@vod/http";
import { Schema, SchemaAST } from "effect";

/** How a route is given its credential. */
export type CredentialSlot =
  /** Authorization: Bearer <access token> or X-API-Key, as the requirement allows. */
  | { readonly kind: "api"; readonly requirement: Requirement }
  | { readonly kind: "none" }
  /** The playback token as a bearer (entitlement). */
  | { readonly kind: "playback-bearer" }
  /** The licence token in x-vod-license-token (ClearKey licence). */
  | { readonly kind: "license-header" }
  /** The playback token as the path's `:token` (media files). */
  | { readonly kind: "playback-path" }
  /** The playback token in the JSON body's `token` (telemetry). */
  | { readonly kind: "playback-body" }
  /** The signed query of a part upload URL. */
  | { readonly kind: "signed-url" }
  /** The operator's metrics token as a bearer, when one is set. */
  | { readonly kind: "metrics-bearer" };

export interface FuzzRoute {
  readonly id: string;
  readonly method: HttpMethod | "HEAD";
  /** Express-style: `:name` parameters, `*path` for the rest of the path. */
  readonly path: string;
  readonly credential: CredentialSlot;
  /** Decodes `{ params, query, body }` as the route does; its arbitrary makes valid-ish requests. */
  readonly input: Schema.Schema.AnyNoContext;
  /** What the fuzz sends as its body: JSON (a JSON or JSON-text body), bytes, or none. */
  readonly body: "json" | "bytes" | "none";
  /** Whether the route reads its body at all. */
  readonly readsBody: boolean;
  /** What the route's decode lets through (unknown body fields, NULs), left to its use case. */
  readonly lenient: Lenience;
}

const slotOf = (op: Operation): CredentialSlot => {
  if (op.auth !== "none") return { kind: "api", requirement: op.auth };
  const token = op.credential;
  if (token === undefined) return { kind: "none" };
  if (token.token === "part-signature") return { kind: "signed-url" };
  if (token.token === "license") return { kind: "license-header" };
  if (token.token === "metrics") return { kind: "metrics-bearer" };
  return {
    kind: token.in === "path" ? "playback-path" : token.in === "body" ? "playback-body" : "playback-bearer",
  };
};

const bodyOf = (op: Operation): FuzzRoute["body"] => {
  switch (op.body.kind) {
    case "json":
      // A GET or DELETE carries no body a client means.
      return op.method === "GET" || op.method === "DELETE" ? "none" : "json";
    case "text":
      return "json";
    case "stream":
      return "bytes";
    case "none":
      return "none";
  }
};

/**
 * Every route of the operation catalog, as the fuzz sees it: nothing here names an operation. A
 * file's GET is sent as HEAD too, as players do.
 */
export const allRoutes: ReadonlyArray<FuzzRoute> = operations.flatMap((op) => {
  const route: FuzzRoute = {
    id: op.id,
    method: op.method,
    path: op.path,
    credential: slotOf(op),
    input: op.input,
    body: bodyOf(op),
    readsBody: op.body.kind !== "none",
    lenient: op.lenient ?? {},
  };
  return op.reply.kind === "file" && op.method === "GET"
    ? [route, { ...route, id: `${op.id}Head`, method: "HEAD" }]
    : [route];
});

/** Where an input field sits. */
export type Location = "params" | "query" | "body";

export interface Field {
  readonly location: Location;
  readonly name: string;
}

/** The property names of a struct schema's AST (refinements and transformations unwrapped). */
const propertiesOf = (ast: SchemaAST.AST): ReadonlyArray<{ name: string; ast: SchemaAST.AST }> => {
  if (SchemaAST.isTypeLiteral(ast))
    return ast.propertySignatures.map((p) => ({ name: String(p.name), ast: p.type }));
  if (SchemaAST.isRefinement(ast)) return propertiesOf(ast.from);
  if (SchemaAST.isTransformation(ast)) return propertiesOf(ast.from);
  return [];
};

/** The top-level fields of a route's params, query and body, read from its input schema. */
export const fieldsOf = (route: FuzzRoute): ReadonlyArray<Field> =>
  propertiesOf(route.input.ast).flatMap(({ name, ast }) =>
    name === "params" || name === "query" || name === "body"
      ? propertiesOf(ast).map((p) => ({ location: name as Location, name: p.name }))
      : [],
  );

/**
 * The kind of resource an id-shaped field names: `asset_id` an asset; a path's `:id` the resource
 * of the segment before it (`/v1/api-keys/:id` an api-key, `/v1/playback/sessions/:id` a session).
 * Undefined for fields that are not ids.
 */
export const idKindOf = (route: FuzzRoute, field: Field): string | undefined => {
  if (field.name.endsWith("_id")) return field.name.slice(0, -3).replace(/_/g, "-");
  if (field.name !== "id" || field.location !== "params") return undefined;
  const segments = route.path.split("/");
  const before = segments[segments.indexOf(":id") - 1] ?? "";
  return before.endsWith("s") ? before.slice(0, -1) : before;
};

/** The id-shaped fields of a route with the kind of each. */
export const idFieldsOf = (route: FuzzRoute) =>
  fieldsOf(route).flatMap((field) => {
    const kind = idKindOf(route, field);
    return kind === undefined ? [] : [{ ...field, kind }];
  });

/** The path with `values` put in for its parameters, each as it is (already encoded). */
export const fillPath = (route: FuzzRoute, values: Readonly<Record<string, string>>): string =>
  route.path.replace(/[:*](\w+)/g, (_, name: string) => values[name] ?? "x");

/** An arbitrary of the route's valid-ish input, in its encoded form (what goes on the wire). */
export const encodeInput = (route: FuzzRoute) => Schema.encodeSync(route.input);

import { operations, Requests, type Requirement } from "@vod/core";
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
  | { readonly kind: "signed-url" };

export interface FuzzRoute {
  readonly id: string;
  readonly method: "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** Express-style: `:name` parameters, `*path` for the rest of the path. */
  readonly path: string;
  readonly credential: CredentialSlot;
  /** Decodes `{ params, query, body }` as the route does; its arbitrary makes valid-ish requests. */
  readonly input: Schema.Schema.AnyNoContext;
  /** What the route reads as its body. */
  readonly body: "json" | "bytes" | "none";
  /** True for routes taken from the operation catalog. */
  readonly catalog: boolean;
}

/** Every route of the operation catalog, as the fuzz sees it: nothing here names an operation. */
export const catalogRoutes: ReadonlyArray<FuzzRoute> = operations.map((op) => ({
  id: op.id,
  method: op.method,
  path: op.path,
  credential: op.auth === "none" ? { kind: "none" } : { kind: "api", requirement: op.auth },
  input: op.input,
  body: op.method === "POST" || op.method === "PATCH" ? "json" : "none",
  catalog: true,
}));

/**
 * NOT YET IN THE CATALOG: the routes the host mounts beside the catalog's operations (part PUT,
 * media files, telemetry, entitlement, ClearKey licence). Drop each entry when its route joins the
 * catalog; the coverage test fails while an entry duplicates a catalog route.
 */
export const routesOutsideCatalog: ReadonlyArray<FuzzRoute> = [
  {
    id: "uploadPart",
    method: "PUT",
    path: "/v1/uploads/:id/parts/:number",
    credential: { kind: "signed-url" },
    input: Schema.Struct({ params: Requests.PartParams, query: Requests.PartUrlQuery }),
    body: "bytes",
    catalog: false,
  },
  ...(["GET", "HEAD"] as const).map(
    (method): FuzzRoute => ({
      id: method === "GET" ? "playFile" : "playFileHead",
      method,
      path: "/v1/play/:token/*path",
      credential: { kind: "playback-path" },
      input: Schema.Struct({ params: Schema.Struct({ token: Schema.String, path: Schema.String }) }),
      body: "none",
      catalog: false,
    }),
  ),
  {
    id: "telemetry",
    method: "POST",
    path: "/v1/telemetry",
    credential: { kind: "playback-body" },
    input: Schema.Struct({ body: Requests.TelemetryBatch }),
    body: "json",
    catalog: false,
  },
  {
    id: "entitlement",
    method: "POST",
    path: "/v1/drm/entitlement",
    credential: { kind: "playback-bearer" },
    input: Schema.Struct({}),
    body: "none",
    catalog: false,
  },
  {
    id: "clearKeyLicense",
    method: "POST",
    path: "/v1/drm/clearkey/license",
    credential: { kind: "license-header" },
    input: Schema.Struct({ body: Requests.ClearKeyRequest }),
    body: "json",
    catalog: false,
  },
];

export const allRoutes: ReadonlyArray<FuzzRoute> = [...catalogRoutes, ...routesOutsideCatalog];

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

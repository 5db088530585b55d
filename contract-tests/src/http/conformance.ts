import { brotliDecompressSync, gunzipSync, inflateSync } from "node:zlib";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import ajvFormats from "ajv-formats";
import { describe, expect, it } from "vitest";
import { expectStatus, type MakeHttpSubject, withSubject } from "./client.js";
import type { Exchange, Recording } from "./exchanges.js";

type Json = Record<string, unknown>;

interface Response {
  readonly description?: string;
  readonly headers?: Readonly<Record<string, { readonly required?: boolean }>>;
  readonly content?: Readonly<Record<string, { readonly schema?: Json }>>;
}

interface Document {
  readonly paths: Readonly<Record<string, Readonly<Record<string, Json>>>>;
  readonly components: { readonly schemas: Json; readonly responses: Readonly<Record<string, Response>> };
}

/** What the check found: every disagreement, and how the exchanges were counted. */
export interface Conformance {
  readonly disagreements: ReadonlyArray<string>;
  /** Exchanges held against a documented operation, by operationId. */
  readonly byOperation: Readonly<Record<string, number>>;
  /** Requests to routes the document does not have, each answered with the error body. */
  readonly unknownRoutes: number;
  /** CORS preflights, which the Fetch standard defines and the document leaves out. */
  readonly preflights: number;
}

const BASE = "https://openapi.invalid/";

/** The media type of a Content-Type header, without parameters, in lower case. */
const mediaTypeOf = (header: string | undefined) => header?.split(";")[0]?.trim().toLowerCase();

const isJson = (mediaType: string) => mediaType === "application/json" || mediaType.endsWith("+json");

interface Route {
  readonly template: string;
  readonly item: Readonly<Record<string, Json>>;
  readonly single: RegExp;
  /** The template with its last parameter taking the rest of the path (a file under a token). */
  readonly rest: RegExp | undefined;
  /** Characters outside parameters: the most specific template wins. */
  readonly literal: number;
}

const routesOf = (doc: Document): ReadonlyArray<Route> =>
  Object.entries(doc.paths).map(([template, item]) => {
    const source = (last: string) =>
      `^${template
        .split(/(\{\w+\})/)
        .map((piece, n, all) =>
          /^\{\w+\}$/.test(piece)
            ? n === all.length - 2 && all[n + 1] === ""
              ? last
              : "[^/]+"
            : piece.replace(/[.*+?^$()|[\]\\]/g, "\\$&"),
        )
        .join("")}$`;
    return {
      template,
      item,
      single: new RegExp(source("[^/]+")),
      rest: /\}$/.test(template) ? new RegExp(source(".+")) : undefined,
      literal: template.replace(/\{\w+\}/g, "").length,
    };
  });

/**
 * The documented route of a method and path: its templates with one segment per parameter first,
 * among those that document the method (a catch-all of one method names no other's path).
 */
const routeOf = (routes: ReadonlyArray<Route>, method: string, path: string): Route | undefined => {
  const best = (matching: ReadonlyArray<Route>) => [...matching].sort((a, b) => b.literal - a.literal)[0];
  const candidates = routes.filter((r) => r.item[method.toLowerCase()] !== undefined);
  return (
    best(candidates.filter((r) => r.single.test(path))) ??
    best(candidates.filter((r) => r.rest?.test(path) === true))
  );
};

/**
 * Holds each exchange against the document: the operation its method and path name, the status
 * among that operation's responses, the content type among the response's media types (no body
 * where none is documented), the JSON body against the schema, and the headers it requires.
 * A route the document does not have must answer with its error body.
 */
export const checkConformance = (doc: Document, exchanges: ReadonlyArray<Exchange>): Conformance => {
  // One schema resource per component, so that `$ref`s resolve without the rest of the document.
  const absolute = JSON.parse(
    JSON.stringify(doc).replaceAll('"#/components/schemas/', `"${BASE}components/schemas/`),
  ) as Document;
  const ajv = new Ajv2020({ allErrors: true, strict: true });
  // A CommonJS module: its export is the plugin, which carries itself as `default` for TypeScript.
  ajvFormats.default(ajv);
  for (const [name, schema] of Object.entries(absolute.components.schemas))
    ajv.addSchema(schema as Json, `${BASE}components/schemas/${name}`);
  /** Schemas compiled in strict mode: one Ajv refuses (a bound with no type) is a disagreement too. */
  const validators = new Map<string, ValidateFunction | string>();
  const validatorOf = (key: string, schema: Json): ValidateFunction | string => {
    let validate = validators.get(key);
    if (validate === undefined) {
      try {
        validate = ajv.compile(schema);
      } catch (error) {
        validate = `its schema does not compile: ${(error as Error).message}`;
      }
      validators.set(key, validate);
    }
    return validate;
  };
  const resolve = (response: Json): Response => {
    const ref = response.$ref;
    if (typeof ref !== "string") return response as Response;
    const name = ref.replace("#/components/responses/", "");
    const found = absolute.components.responses[name];
    if (found === undefined) throw new Error(`${ref} resolves to nothing`);
    return found;
  };
  const routes = routesOf(absolute);
  const errorSchema = { $ref: `${BASE}components/schemas/Error` };

  /** Each disagreement once, with how often it was seen. */
  const seen = new Map<string, number>();
  const byOperation: Record<string, number> = {};
  let unknownRoutes = 0;
  let preflights = 0;
  const text = (body: Uint8Array) => new TextDecoder().decode(body);
  const parse = (body: Uint8Array): { ok: true; value: unknown } | { ok: false } => {
    try {
      return { ok: true, value: JSON.parse(text(body)) };
    } catch {
      return { ok: false };
    }
  };

  /** A request the document refuses must not succeed: its JSON body against the request schema. */
  const checkRequest = (
    id: string,
    operation: Json,
    exchange: Exchange,
    disagree: (what: string) => void,
  ) => {
    const documented = (operation.requestBody as { content?: Record<string, { schema?: Json }> } | undefined)
      ?.content;
    if (documented === undefined || exchange.requestBody === undefined) return;
    const sentType = mediaTypeOf(exchange.requestHeaders["content-type"]) ?? "";
    // A JSON body under any documented media type (beacons send JSON as text/plain); a body sent
    // with no type is read as the first one.
    const entry = sentType === "" ? Object.values(documented)[0] : documented[sentType];
    if (entry?.schema === undefined || Object.keys(entry.schema).length === 0) return;
    const encoding = exchange.requestHeaders["content-encoding"]?.trim().toLowerCase();
    const decoders: Record<string, (bytes: Uint8Array) => Uint8Array> = {
      gzip: gunzipSync,
      deflate: inflateSync,
      br: brotliDecompressSync,
    };
    const decode =
      encoding === undefined || encoding === "identity" ? (b: Uint8Array) => b : decoders[encoding];
    if (decode === undefined) return disagree(`${id} took a body in ${encoding}`);
    const parsed = parse(decode(exchange.requestBody));
    if (!parsed.ok) return disagree(`${id} took a ${sentType} body that is not JSON`);
    const validate = validatorOf(`${id} request ${sentType}`, entry.schema);
    if (typeof validate === "string") disagree(`${id}'s request body: ${validate}`);
    else if (!validate(parsed.value))
      disagree(`${id} took a body the document refuses: ${ajv.errorsText(validate.errors)}`);
  };

  for (const exchange of exchanges) {
    const path = exchange.target.split("?")[0] ?? "";
    const contentType = mediaTypeOf(exchange.headers["content-type"]);
    const route = routeOf(routes, exchange.method, path);
    // Named by the route's template: one disagreement, however many tokens and ids showed it.
    const said = `${exchange.method} ${route?.template ?? path.slice(0, 120)} → ${exchange.status}`;
    const disagree = (what: string) => {
      const line = `${said}: ${what}`;
      seen.set(line, (seen.get(line) ?? 0) + 1);
    };
    const operation = route?.item[exchange.method.toLowerCase()];

    if (route === undefined || operation === undefined) {
      if (exchange.method === "OPTIONS" && exchange.requestHeaders["access-control-request-method"]) {
        preflights += 1;
        if (exchange.status < 400 && exchange.body.byteLength > 0)
          disagree("a preflight answered with a body");
        if (exchange.status < 400) continue;
      } else unknownRoutes += 1;
      if (exchange.status < 400) {
        disagree(`no documented operation, yet ${exchange.status}`);
        continue;
      }
      const parsed = parse(exchange.body);
      if (contentType !== "application/json" || !parsed.ok) {
        disagree(`no documented operation, and not the error body (${contentType ?? "no content type"})`);
        continue;
      }
      const validate = validatorOf("Error", errorSchema);
      if (typeof validate === "string") disagree(`error body: ${validate}`);
      else if (!validate(parsed.value)) disagree(`error body: ${ajv.errorsText(validate.errors)}`);
      continue;
    }

    const id = String(operation.operationId);
    byOperation[id] = (byOperation[id] ?? 0) + 1;
    const responses = (operation.responses ?? {}) as Readonly<Record<string, Json>>;
    const documented = responses[String(exchange.status)] ?? responses.default;
    if (documented === undefined) {
      disagree(`${id} documents no ${exchange.status} (${Object.keys(responses).join(", ")})`);
      continue;
    }
    const response = resolve(documented);
    if (exchange.status < 300) checkRequest(id, operation, exchange, disagree);
    for (const [name, header] of Object.entries(response.headers ?? {}))
      if (header.required && exchange.headers[name.toLowerCase()] === undefined)
        disagree(`${id}: the required header ${name} is missing`);

    const content = response.content;
    const head = exchange.method === "HEAD";
    if (content === undefined) {
      if (exchange.body.byteLength > 0)
        disagree(`${id} documents no body for ${exchange.status}, got ${contentType}`);
      continue;
    }
    if (contentType === undefined || content[contentType] === undefined) {
      disagree(
        `${id}: content type ${contentType ?? "(none)"}, documented ${Object.keys(content).join(", ")}`,
      );
      continue;
    }
    if (head) {
      if (exchange.body.byteLength > 0) disagree(`${id}: a HEAD answered with a body`);
      continue;
    }
    if (exchange.body.byteLength === 0) {
      disagree(`${id}: no body, documented ${contentType}`);
      continue;
    }
    if (!isJson(contentType)) continue;
    const parsed = parse(exchange.body);
    if (!parsed.ok) {
      disagree(`${id}: ${contentType} that is not JSON`);
      continue;
    }
    const schema = content[contentType]?.schema ?? {};
    const validate = validatorOf(`${id} ${exchange.status} ${contentType}`, schema);
    if (typeof validate === "string") disagree(`${id}: ${validate}`);
    else if (!validate(parsed.value))
      disagree(`${id}: ${ajv.errorsText(validate.errors)} in ${text(exchange.body).slice(0, 200)}`);
  }
  const disagreements = [...seen].map(([line, times]) => (times > 1 ? `${line} (×${times})` : line));
  return { disagreements, byOperation, unknownRoutes, preflights };
};

/**
 * The document tells the truth (issue 25): every exchange the suites before this one had with
 * their hosts (`recordExchanges`), held against the OpenAPI document a host serves. Declared
 * after the suites whose exchanges it checks, so it runs after them.
 */
export const describeDocumentConformance = (makeSubject: MakeHttpSubject, recording: Recording): void => {
  describe("the OpenAPI document", () => {
    it("documents every response the suites saw: its status, content type, body and required headers", async () => {
      const exchanges = await recording.exchanges();
      recording.stop();
      const doc = await withSubject(
        makeSubject,
        {},
        async (h) => expectStatus(await h.api.get<Document>("/v1/openapi.json"), 200).body,
      );
      const result = checkConformance(doc, exchanges);
      const operations = Object.keys(result.byOperation).length;
      const checked = Object.values(result.byOperation).reduce((a, b) => a + b, 0);
      console.info(
        `OpenAPI conformance: ${exchanges.length} exchanges, ${checked} over ${operations} operations, ` +
          `${result.unknownRoutes} to unknown routes, ${result.preflights} preflights; ` +
          `${result.disagreements.length} disagreements`,
      );
      // The suites cover the catalog: a check over a handful of exchanges would prove little.
      expect(operations).toBeGreaterThan(30);
      expect(result.disagreements).toEqual([]);
    });
  });
};

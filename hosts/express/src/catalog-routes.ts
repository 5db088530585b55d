import type { Vod } from "@vod/core";
import type { Operation } from "@vod/http";
import express from "express";
import {
  answeredBy,
  cors,
  type Handler,
  type HttpRequest,
  type HttpResponse,
  handle,
  type Next,
  type ProxyTrust,
  readText,
  requireJsonBody,
  targetPathOf,
} from "./http.js";

/** A request the catalog takes: its route and path parameters, or the error decoding them raised. */
export type CatalogMatch =
  | { readonly route: Route; readonly params: Record<string, string> }
  | { readonly error: unknown };

interface Route {
  readonly op: Operation;
  readonly pattern: RegExp;
  readonly names: ReadonlyArray<string>;
  readonly cors: Handler | undefined;
  readonly read: Handler | undefined;
  readonly json: boolean;
  readonly run: (req: HttpRequest, res: HttpResponse) => Promise<void>;
}

export interface CatalogRoutes {
  /**
   * The route of the catalog that takes the request, if any: the first whose pattern matches the
   * path and whose method is the request's (HEAD served by GET, a CORS preflight by any route
   * browsers call). A parameter that is not valid percent-encoding is an error whatever the
   * method, as in Express, whose router tries every route's pattern before its method; so is a
   * request target that is no URL at all (Express would answer it with its own HTML page).
   */
  match(req: HttpRequest): CatalogMatch | undefined;
  /** Answers a request `match` took; `fail` hears of what went wrong outside the operation. */
  serve(match: CatalogMatch, req: HttpRequest, res: HttpResponse, fail: Next): void;
  /** What it routes, as `METHOD /path/:param`, for whoever lists the routes an app mounts. */
  readonly mounted: ReadonlyArray<string>;
}

/**
 * The catalog's routes, served on node's request and response rather than through Express (see
 * `HttpRequest`): a request finds its operation in one pass over precompiled patterns, and each
 * route reads its body as its operation says: JSON through the parser, text up to its cap, a
 * stream left to the use case, or nothing at all (media files stay lean).
 *
 * It answers as `app.get/post/put/delete(op.path, ...parsers, handle)` would, in catalog order:
 * the same patterns as Express's router builds (case-insensitive, one optional trailing slash,
 * `:name` a non-empty segment, `*name` the rest of the path), HEAD served by the GET route, CORS
 * preflights answered for the routes browsers call.
 */
export const catalogRoutes = (
  vod: Vod,
  ops: ReadonlyArray<Operation>,
  { trust }: { readonly trust?: ProxyTrust } = {},
): CatalogRoutes => {
  const json = express.json({ limit: "64kb", type: ["application/json", "application/*+json"] });
  const parseJson: Handler = (req, res, next) =>
    requireJsonBody(req, res, (error?: unknown) =>
      error === undefined ? json(req, res, next) : next(error),
    );
  const routes: ReadonlyArray<Route> = ops.map((op) => {
    const names: string[] = [];
    const source = op.path
      .split("/")
      .map((segment) => {
        if (segment.startsWith(":") || segment.startsWith("*")) names.push(segment.slice(1));
        if (segment.startsWith(":")) return "([^\\/]+)";
        if (segment.startsWith("*")) return "(.+)";
        return segment.replace(/[.+*?^${}()[\]|\\]/g, "\\$&");
      })
      .join("\\/");
    const body = op.body;
    return {
      op,
      pattern: new RegExp(`^(?:${source})(?:\\/$)?$`, "i"),
      names,
      cors:
        op.cors &&
        cors(
          op.method === "GET" ? "GET, HEAD, OPTIONS" : `${op.method}, OPTIONS`,
          op.cors.allowHeaders.join(", "),
          op.cors.exposeHeaders?.join(", "),
        ),
      read: body.kind === "json" ? parseJson : body.kind === "text" ? readText(body.maxBytes) : undefined,
      json: body.kind === "json",
      run: handle(vod, op, trust),
    };
  });
  const match = (req: HttpRequest): CatalogMatch | undefined => {
    let path: string;
    try {
      path = targetPathOf(req);
    } catch (error) {
      return { error };
    }
    const method = req.method === "HEAD" ? "GET" : req.method;
    for (const route of routes) {
      const found = route.pattern.exec(path);
      if (found === null) continue;
      const params: Record<string, string> = Object.create(null);
      try {
        for (let i = 0; i < route.names.length; i++)
          params[route.names[i] as string] = decodeParam(found[i + 1]);
      } catch (error) {
        return { error };
      }
      if (route.op.method === method || (method === "OPTIONS" && route.cors !== undefined))
        return { route, params };
    }
    return undefined;
  };
  const serve = (found: CatalogMatch, req: HttpRequest, res: HttpResponse, fail: Next) => {
    if ("error" in found) return fail(found.error);
    const { route } = found;
    req.params = found.params;
    answeredBy(res, route.op.path);
    const run = () => void route.run(req, res).catch(fail);
    // CORS headers on every answer, errors included; a preflight ends there.
    if (route.cors === undefined) return readThen(route, req, res, fail, run);
    route.cors(req, res, () => readThen(route, req, res, fail, run));
  };
  const mounted = ops.flatMap((op) => [
    `${op.method} ${op.path}`,
    ...(op.reply.kind === "file" && op.method === "GET" ? [`HEAD ${op.path}`] : []),
    ...(op.cors ? [`OPTIONS ${op.path}`] : []),
  ]);
  return { match, serve, mounted };
};

/** Reads the body as the route's operation says, then runs it. */
const readThen = (route: Route, req: HttpRequest, res: HttpResponse, fail: Next, run: () => void) => {
  // No body, no JSON parser: what it would do then is nothing (`req.body` stays undefined).
  if (
    route.read === undefined ||
    (route.json &&
      req.headers["transfer-encoding"] === undefined &&
      req.headers["content-length"] === undefined)
  )
    return run();
  route.read(req, res, (error?: unknown) => (error === undefined ? run() : fail(error)));
};

/** Express's own decoding of a path parameter: a URIError `internalError` answers as 400. */
const decodeParam = (value: string | undefined): string => {
  if (value === undefined || !value.includes("%")) return value ?? "";
  return decodeURIComponent(value);
};

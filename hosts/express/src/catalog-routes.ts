import type { Operation, Vod } from "@vod/core";
import express, { type NextFunction, type Request, type RequestHandler, type Response } from "express";
import { cors, handle, readText, requireJsonBody } from "./http.js";

/**
 * The catalog's routes as one middleware: a request finds its operation in one pass over
 * precompiled patterns instead of Express walking a layer (and its route's stack) per operation,
 * and each route reads its body as its operation says: JSON through the parser, text up to its
 * cap, a stream left to the use case, or nothing at all (media files stay lean).
 *
 * It answers as `app.get/post/put/delete(op.path, ...parsers, handle)` would, in catalog order:
 * the same patterns as Express's router builds (case-insensitive, one optional trailing slash,
 * `:name` a non-empty segment, `*name` the rest of the path), HEAD served by the GET route, CORS
 * preflights answered for the routes browsers call, a parameter that is not valid
 * percent-encoding an error for `internalError` whatever the method (Express tries every route's
 * pattern before its method), and anything else left to the handlers after it.
 */
export const catalogRoutes = (
  vod: Vod,
  ops: ReadonlyArray<Operation>,
): RequestHandler & { readonly mounted: ReadonlyArray<string> } => {
  const json = express.json({ limit: "64kb", type: ["application/json", "application/*+json"] });
  const parseJson: RequestHandler = (req, res, next) =>
    requireJsonBody(req, res, (error?: unknown) =>
      error === undefined ? json(req, res, next) : next(error),
    );
  const routes = ops.map((op) => {
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
      run: handle(vod, op),
    };
  });
  const middleware: RequestHandler = (req, res, next) => {
    const path = req.path;
    const method = req.method === "HEAD" ? "GET" : req.method;
    for (const route of routes) {
      const match = route.pattern.exec(path);
      if (match === null) continue;
      const params: Record<string, string> = Object.create(null);
      try {
        for (let i = 0; i < route.names.length; i++)
          params[route.names[i] as string] = decodeParam(match[i + 1]);
      } catch (error) {
        return next(error);
      }
      const preflight = method === "OPTIONS" && route.cors !== undefined;
      if (route.op.method !== method && !preflight) continue;
      req.params = params;
      res.locals.route = route.op.path;
      const run = () => void Promise.resolve(route.run(req, res, next)).catch(next);
      // CORS headers on every answer, errors included; a preflight ends there.
      if (route.cors === undefined) return readThen(route, req, res, next, run);
      return route.cors(req, res, () => readThen(route, req, res, next, run));
    }
    next();
  };
  // What it routes, as `METHOD /path/:param`, for whoever lists the routes an app mounts (the
  // OpenAPI test): Express's router no longer sees them one by one.
  const mounted = ops.flatMap((op) => [
    `${op.method} ${op.path}`,
    ...(op.reply.kind === "file" && op.method === "GET" ? [`HEAD ${op.path}`] : []),
    ...(op.cors ? [`OPTIONS ${op.path}`] : []),
  ]);
  return Object.assign(middleware, { mounted });
};

/** Reads the body as the route's operation says, then runs it. */
const readThen = (
  route: { readonly read: RequestHandler | undefined; readonly json: boolean },
  req: Request,
  res: Response,
  next: NextFunction,
  run: () => void,
) => {
  // No body, no JSON parser: what it would do then is nothing (`req.body` stays undefined).
  if (
    route.read === undefined ||
    (route.json &&
      req.headers["transfer-encoding"] === undefined &&
      req.headers["content-length"] === undefined)
  )
    return run();
  route.read(req, res, (error?: unknown) => (error === undefined ? run() : next(error)));
};

/** Express's own decoding of a path parameter: a URIError `internalError` answers as 400. */
const decodeParam = (value: string | undefined): string => {
  if (value === undefined || !value.includes("%")) return value ?? "";
  return decodeURIComponent(value);
};

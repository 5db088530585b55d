import type { Operation, Vod } from "@vod/core";
import express, { type RequestHandler } from "express";
import { handle, requireJsonBody } from "./http.js";

/**
 * The catalog's routes as one middleware: a request finds its operation in one pass over
 * precompiled patterns instead of Express walking a layer (and its route's stack) per operation,
 * and the body parsers run only when the request has a body.
 *
 * It answers exactly as `app.get/post/delete(op.path, ...parsers, handle)` did, in catalog order:
 * the same patterns as Express's router builds (case-insensitive, one optional trailing slash,
 * `:name` a non-empty segment), HEAD served by the GET route, a parameter that is not valid
 * percent-encoding an error for `internalError` whatever the method (Express tries every route's
 * pattern before its method), and anything else left to the handlers after it.
 */
export const catalogRoutes = (
  vod: Vod,
  ops: ReadonlyArray<Operation>,
): RequestHandler & { readonly mounted: ReadonlyArray<string> } => {
  const json = express.json({ limit: "64kb", type: ["application/json", "application/*+json"] });
  const routes = ops.map((op) => {
    const names: string[] = [];
    const source = op.path
      .split("/")
      .map((segment) => {
        if (!segment.startsWith(":")) return segment.replace(/[.+*?^${}()[\]|\\]/g, "\\$&");
        names.push(segment.slice(1));
        return "([^\\/]+)";
      })
      .join("\\/");
    return {
      method: op.method,
      template: op.path,
      pattern: new RegExp(`^(?:${source})(?:\\/$)?$`, "i"),
      names,
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
      if (route.method !== method) continue;
      req.params = params;
      // The route's template, for whatever labels requests by route (the request metrics).
      res.locals.route = route.template;
      const run = () => Promise.resolve(route.run(req, res, next)).catch(next);
      // No body, no parser: what they would do then is nothing (`req.body` stays undefined).
      if (req.headers["transfer-encoding"] === undefined && req.headers["content-length"] === undefined)
        return void run();
      return requireJsonBody(req, res, (error?: unknown) => {
        if (error !== undefined) return next(error);
        json(req, res, (parseError?: unknown) => (parseError === undefined ? void run() : next(parseError)));
      });
    }
    next();
  };
  // What it routes, as `METHOD /path/:param`, for whoever lists the routes an app mounts (the
  // OpenAPI test): Express's router no longer sees them one by one.
  return Object.assign(middleware, { mounted: ops.map((op) => `${op.method} ${op.path}`) });
};

/** Express's own decoding of a path parameter: a URIError `internalError` answers as 400. */
const decodeParam = (value: string | undefined): string => {
  if (value === undefined || !value.includes("%")) return value ?? "";
  return decodeURIComponent(value);
};

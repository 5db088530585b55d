import type { RequestListener } from "node:http";
import type { Vod } from "@vod/core";
import bodyParser from "body-parser";
import FindMyWay from "find-my-way";
import vary from "vary";
import {
  answeredBy,
  catalogRouteOf,
  cors,
  type Handler,
  type HttpLogger,
  type HttpRequest,
  type HttpResponse,
  handle,
  headerOf,
  internalError,
  type Next,
  notFound,
  proxyTrust,
  readText,
  requestLog,
  requireJsonBody,
  type TrustProxy,
  targetPathOf,
} from "./node.js";
import { openApiDocument } from "./openapi.js";
import type { Operation } from "./operation.js";
import { API_CORS, openApi, operations } from "./operations.js";
import type { HostContext } from "./request.js";

/** One dependency `/readyz` asks: it answers when `check` resolves. */
export interface ReadinessCheck {
  readonly name: string;
  readonly check: () => Promise<unknown>;
}

/** A dependency that has not answered by then counts as down: a load balancer's probe must not hang. */
export const READY_TIMEOUT_MS = 2_000;

/** Asks every check at once; each answers `ok` or `failed` (refused, or silent past the timeout). */
export const checkReadiness = async (
  checks: ReadonlyArray<ReadinessCheck>,
  timeoutMs = READY_TIMEOUT_MS,
): Promise<Record<string, "ok" | "failed">> => {
  const answers = await Promise.all(
    checks.map(async ({ name, check }) => {
      let timer: NodeJS.Timeout | undefined;
      const silent = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error("timeout")), timeoutMs);
      });
      try {
        await Promise.race([check(), silent]);
        return [name, "ok"] as const;
      } catch {
        return [name, "failed"] as const;
      } finally {
        clearTimeout(timer);
      }
    }),
  );
  return Object.fromEntries(answers);
};

/** What the handler records of each request and serves at `/metrics` (the Prometheus adapter's shape). */
export interface HttpMetrics {
  /** `route` is the template that answered (`/v1/assets/:id`), `unmatched` for none. */
  requestEnded(
    labels: { readonly route: string; readonly method: string; readonly status: number },
    seconds: number,
  ): void;
  readonly contentType: string;
  render(): Promise<string>;
}

export interface OpsOptions {
  readonly readiness: ReadonlyArray<ReadinessCheck>;
  readonly metrics?: HttpMetrics | undefined;
  /** When set, `/metrics` needs `Authorization: Bearer <token>`. */
  readonly metricsToken?: string | undefined;
}

export interface HttpHandlerOptions {
  readonly logger: HttpLogger;
  /** Which proxies' X-Forwarded-For entries are believed (none by default). */
  readonly trustProxy?: TrustProxy;
  /** The routes served; the whole catalog by default. */
  readonly operations?: ReadonlyArray<Operation>;
  /** `/readyz`'s checks and `/metrics` (none: `/readyz` answers 200 while the process serves). */
  readonly ops?: OpsOptions;
  /** Origins the API answers CORS for (`*`: any); none by default. */
  readonly corsOrigins?: ReadonlyArray<string>;
  /** Where each app answers, for the OpenAPI document's servers. */
  readonly urls?: { readonly base?: string; readonly media?: string; readonly drm?: string };
}

/** A node request listener, and what it routes (`METHOD /path/:param`). */
export type HttpHandler = RequestListener & { readonly routes: ReadonlyArray<string> };

/** One route of the router: the template it is known by, and how it answers. */
interface Route {
  readonly method: string;
  readonly path: string;
  readonly serve: (req: HttpRequest, res: HttpResponse, fail: Next) => void;
}

type Found = { readonly route: Route; readonly params: Record<string, string> } | { readonly error: unknown };

/**
 * CORS for the API, for the origins of `corsOrigins` (`*`: any) and no other: an origin not
 * listed gets no CORS header, so its page cannot read the answer. `corsHeaders` sets the headers
 * on every request; `allowed` is what the API's preflight (`apiPreflight`) answers by, for the
 * OPTIONS no route of its own took (the media and DRM routes echo any origin).
 */
const apiCors = (origins: ReadonlyArray<string>) => {
  const any = origins.includes("*");
  const listed = new Set(origins);
  const allowed = (origin: string | undefined): origin is string =>
    origin !== undefined && (any || listed.has(origin));
  const corsHeaders: Handler = (req, res, next) => {
    if (origins.length === 0) return next();
    vary(res, "Origin");
    const origin = headerOf(req, "origin");
    if (allowed(origin)) {
      res.setHeader("access-control-allow-origin", any ? "*" : origin);
      res.setHeader("access-control-expose-headers", API_CORS.expose);
    }
    next();
  };
  return { corsHeaders, allowed };
};

/** The label of a request no route took: one value, whatever path it asked for. */
const UNMATCHED_ROUTE = "unmatched";

/** A catalog operation as a route: CORS, its body read as the operation says, then the operation. */
const operationRoute = (
  vod: Vod,
  op: Operation,
  trust: ReturnType<typeof proxyTrust>,
  host: HostContext,
): Route => {
  const json = bodyParser.json({ limit: "64kb", type: ["application/json", "application/*+json"] });
  const read: Handler | undefined =
    op.body.kind === "json"
      ? (req, res, next) =>
          requireJsonBody(req, res, (error?: unknown) =>
            error === undefined ? json(req, res, next) : next(error),
          )
      : op.body.kind === "text"
        ? readText(op.body.maxBytes)
        : undefined;
  const allowCors =
    op.cors &&
    cors(
      op.method === "GET" ? "GET, HEAD, OPTIONS" : `${op.method}, OPTIONS`,
      op.cors.allowHeaders.join(", "),
      op.cors.exposeHeaders?.join(", "),
    );
  const run = handle(vod, op, trust, host);
  const readThen = (req: HttpRequest, res: HttpResponse, fail: Next) => {
    const go = () => void run(req, res).catch(fail);
    // No body, no JSON parser: what it would do then is nothing (`req.body` stays undefined).
    if (
      read === undefined ||
      (op.body.kind === "json" &&
        req.headers["transfer-encoding"] === undefined &&
        req.headers["content-length"] === undefined)
    )
      return go();
    read(req, res, (error?: unknown) => (error === undefined ? go() : fail(error)));
  };
  return {
    method: op.method,
    path: op.path,
    serve: (req, res, fail) => {
      answeredBy(res, op.path);
      // CORS headers on every answer, errors included; a preflight ends there.
      if (allowCors === undefined) return readThen(req, res, fail);
      allowCors(req, res, () => readThen(req, res, fail));
    },
  };
};

/**
 * Routes on find-my-way as Express's router matched them: case-insensitive, one optional
 * trailing slash, `:name` a non-empty segment, `*name` the rest of the path; HEAD served by the
 * GET route. A parameter that is not valid percent-encoding is 400 whatever the method (Express
 * tried every route's pattern before its method); so is a request target that is no URL. A route
 * that is all wildcard (`/*path`) takes, for its method, whatever path no other route took, as a
 * middleware would, never an error of its own.
 */
const routerOf = (routes: ReadonlyArray<Route>) => {
  // A playback token is a whole JWS in one segment: longer than find-my-way's default of 100.
  const router = FindMyWay({ caseSensitive: false, ignoreTrailingSlash: true, maxParamLength: 65_536 });
  const rest = new Map<Route, string>();
  const anyPath = new Map<string, Route>();
  const methods = new Set<string>();
  for (const route of routes) {
    if (/^\/\*\w+$/.test(route.path)) {
      anyPath.set(route.method, route);
      continue;
    }
    methods.add(route.method);
    const wildcard = /\*(\w+)$/.exec(route.path)?.[1];
    if (wildcard !== undefined) rest.set(route, wildcard);
    router.on(route.method as FindMyWay.HTTPMethod, route.path.replace(/\*\w+$/, "*"), () => undefined, {
      route,
    });
  }
  const paramsOf = (route: Route, found: Record<string, string | undefined>) => {
    const params: Record<string, string> = Object.create(null);
    for (const name in found) {
      const value = found[name];
      // Express's `:name` and `*name` take one character at least.
      if (value === undefined || value === "") return undefined;
      params[name === "*" ? (rest.get(route) ?? name) : name] = value;
    }
    return params;
  };
  const find = (method: string, path: string) => {
    const found = router.find(method as FindMyWay.HTTPMethod, path);
    if (found === null) return undefined;
    const { route } = found.store as { route: Route };
    const params = paramsOf(route, found.params);
    return params && { route, params };
  };
  /** The percent-encoding error of a route's parameter the raw path fits, for any method. */
  const malformed = (path: string): URIError | undefined => {
    const literal = path.replaceAll("%", "%25");
    for (const method of methods) {
      const found = router.find(method as FindMyWay.HTTPMethod, literal);
      if (found === null) continue;
      try {
        for (const value of Object.values(found.params)) if (value !== undefined) decodeURIComponent(value);
      } catch (error) {
        return error as URIError;
      }
    }
    return undefined;
  };
  return (req: HttpRequest): Found | undefined => {
    let path: string;
    try {
      path = targetPathOf(req);
    } catch (error) {
      return { error };
    }
    const method = req.method === "HEAD" ? "GET" : (req.method ?? "");
    const found = find(method, path);
    if (found !== undefined) return found;
    const error = path.includes("%") ? malformed(path) : undefined;
    if (error !== undefined) return { error };
    const fallback = anyPath.get(method);
    if (fallback === undefined) return undefined;
    const name = /\*(\w+)$/.exec(fallback.path)?.[1] ?? "path";
    return { route: fallback, params: { [name]: path.slice(1) } };
  };
};

/**
 * The platform's HTTP API as a node request listener, for any server that hands over node's
 * request and response: every operation of the catalog (each reading its body as it says), the
 * host's own routes, and the same prelude for all (request id, log, metrics, the fixed headers,
 * the API's CORS). Every error is the spec's JSON; a request no route takes is 404.
 */
export const createHttpHandler = (vod: Vod, options: HttpHandlerOptions): HttpHandler => {
  const {
    logger,
    trustProxy = { hops: 0 },
    operations: ops = operations,
    ops: operational = { readiness: [] },
    corsOrigins = [],
    urls = {},
  } = options;
  const trust = proxyTrust(trustProxy);
  const metrics = operational.metrics;
  const log = requestLog(
    logger,
    metrics &&
      ((req, res, seconds) =>
        metrics.requestEnded(
          { route: catalogRouteOf(res) ?? UNMATCHED_ROUTE, method: req.method ?? "", status: res.statusCode },
          seconds,
        )),
  );
  const api = apiCors(corsOrigins);
  const served = new Set(ops);
  // What every request goes through, in one step rather than three.
  const prelude: Handler = (req, res, next) =>
    log(req, res, () => {
      res.setHeader("x-content-type-options", "nosniff");
      res.setHeader("cache-control", "no-store");
      api.corsHeaders(req, res, next);
    });
  const host: HostContext = {
    readiness: () => checkReadiness(operational.readiness),
    metrics,
    metricsToken: operational.metricsToken,
    // Generated once from the schemas that validate and encode every operation.
    document: served.has(openApi)
      ? openApiDocument(ops, {
          title: "VOD platform API",
          version: "1.0.0",
          serverUrl: urls.base,
          urls: { media: urls.media, drm: urls.drm },
        })
      : undefined,
    corsAllows: api.allowed,
  };
  const routes = ops.flatMap((op) => {
    const route = operationRoute(vod, op, trust, host);
    return op.cors ? [route, { ...route, method: "OPTIONS" }] : [route];
  });
  const lookup = routerOf(routes);
  const listener: RequestListener = (req, res) => {
    const request = req as HttpRequest;
    const fail = (error: unknown) => internalError(error, request, res);
    prelude(request, res, () => {
      // What throws rather than failing its callback gets the spec's error too; thrown in node's
      // request event, it would end the process.
      try {
        const found = lookup(request);
        if (found === undefined) return notFound(request, res);
        if ("error" in found) return fail(found.error);
        request.params = found.params;
        found.route.serve(request, res, fail);
      } catch (error) {
        fail(error);
      }
    });
  };
  // HEAD is answered by every GET; it is listed where the document lists it (files, which players probe).
  const files = new Set(ops.filter((op) => op.reply.kind === "file").map((op) => op.path));
  return Object.assign(listener, {
    routes: routes.flatMap((route) => [
      `${route.method} ${route.path}`,
      ...(route.method === "GET" && files.has(route.path) ? [`HEAD ${route.path}`] : []),
    ]),
  });
};

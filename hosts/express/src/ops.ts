import { createHash, timingSafeEqual } from "node:crypto";
import type { PrometheusMetrics } from "@vod/adapter-prometheus";
import { StorageError, Unauthorized } from "@vod/core";
import { errorReply } from "@vod/http";
import express, { type Express, type Router } from "express";
import vary from "vary";
import {
  catalogRouteOf,
  credentialsOf,
  type Handler,
  type HttpRequest,
  type HttpResponse,
  headerOf,
  internalError,
  notFound,
  type ProxyTrust,
  requestLog,
  sendError,
} from "./http.js";
import type { Logger } from "./logger.js";

/** One dependency `/readyz` asks: it answers when `check` resolves. */
export interface ReadinessCheck {
  readonly name: string;
  readonly check: () => Promise<unknown>;
}

/** A check that fails from the moment the process drains: it takes nothing new from then on. */
export const notDraining = (name: string, draining: () => boolean): ReadinessCheck => ({
  name,
  check: () => (draining() ? Promise.reject(new Error("shutting down")) : Promise.resolve()),
});

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

export interface OpsOptions {
  readonly readiness: ReadonlyArray<ReadinessCheck>;
  readonly metrics?: PrometheusMetrics | undefined;
  /** When set, `/metrics` needs `Authorization: Bearer <token>`. */
  readonly metricsToken?: string | undefined;
}

/** Both sides hashed first: equal lengths for timingSafeEqual, and the token's length not told either. */
const sameSecret = (given: string, expected: string) =>
  timingSafeEqual(
    createHash("sha256").update(given).digest(),
    createHash("sha256").update(expected).digest(),
  );

/** An Express app as the host runs each of its own: answers from its own handlers, never a default page. */
export const hostExpress = (trust?: ProxyTrust): Express => {
  const app = express();
  app.disable("x-powered-by");
  // Express's fallback error page prints the stack outside production; `internalError` answers
  // first, and this keeps the fallback silent should it ever be reached.
  app.set("env", "production");
  // The catalog's `clientIpOf` and Express's `req.ip` read the client's address the same way.
  app.set("trust proxy", trust ?? false);
  app.set("etag", false);
  return app;
};

/**
 * The operational endpoints: `/healthz` (the process serves), `/readyz` (what a load balancer
 * routes on) and `/metrics` (Prometheus). Not operations of the catalog (no tenant, no credential
 * of the API): the OpenAPI document lists them with the host's other routes. Without a registry
 * `/metrics` is 404, as a route that is not there.
 */
export const opsRoutes = ({ readiness, metrics, metricsToken }: OpsOptions): Router => {
  const router = express.Router();
  router.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  router.get("/readyz", async (_req, res) => {
    const checks = await checkReadiness(readiness);
    const down = Object.keys(checks).filter((name) => checks[name] !== "ok");
    if (down.length === 0) {
      res.json({ status: "ok", checks });
      return;
    }
    const reply = errorReply(new StorageError({ message: "not ready" }));
    res
      .status(reply.status)
      .set(reply.headers)
      .json({ ...reply.body, message: `not ready: ${down.join(", ")}`, details: { checks } });
  });
  router.get("/metrics", async (req, res, next) => {
    if (!metrics) return next();
    if (metricsToken !== undefined) {
      const bearer = credentialsOf(req).bearer;
      if (bearer === undefined || !sameSecret(bearer, metricsToken))
        return sendError(res, errorReply(new Unauthorized({ message: "a metrics token is required" })));
    }
    res.setHeader("content-type", metrics.contentType);
    res.send(await metrics.render());
  });
  return router;
};

/**
 * The operational endpoints alone, for a process that serves no API (`vod worker` with
 * `VOD_OPS_PORT`): its jobs' and deliveries' metrics are counted where they run, so a deployment
 * whose workers run apart scrapes each of them. Every other path is the spec's 404.
 */
export const createOpsApp = ({
  logger,
  ops,
}: {
  readonly logger: Logger;
  readonly ops: OpsOptions;
}): Express => {
  const app = hostExpress();
  app.use(requestLog(logger, ops.metrics && requestMetrics(ops.metrics)));
  app.use(opsRoutes(ops));
  app.use(notFound);
  app.use(internalError);
  return app;
};

/** The label of a request no route took: one value, whatever path it asked for. */
const UNMATCHED_ROUTE = "unmatched";

/**
 * Records every request, when it finishes, under the template of the route that answered it:
 * the catalog's operation's path (`answeredBy`), or what Express's own routes leave in
 * `req.route`. Called by `requestLog`, which times the request once for both.
 */
export const requestMetrics =
  (metrics: PrometheusMetrics) =>
  (req: HttpRequest, res: HttpResponse, seconds: number): void => {
    const route = catalogRouteOf(res) ?? (req as { route?: { path?: unknown } }).route?.path;
    metrics.requestEnded(
      {
        route: typeof route === "string" ? route : UNMATCHED_ROUTE,
        method: req.method ?? "",
        status: res.statusCode,
      },
      seconds,
    );
  };

/** What a browser page may send the API and read back (DECISIONS "Operations"). */
const API_CORS = {
  methods: "GET, POST, PATCH, DELETE, OPTIONS",
  headers: "authorization, content-type, x-api-key, idempotency-key, x-request-id",
  expose: "Retry-After, Idempotent-Replayed, x-request-id",
};

/**
 * CORS for the API, for the origins of `VOD_CORS_ORIGINS` (`*`: any) and no other: an origin not
 * listed gets no CORS header, so its page cannot read the answer. `cors` sets the headers on every
 * request; `preflight`, mounted after every router, answers the OPTIONS no route took, so that the
 * media and DRM routes keep answering their own preflights (their CORS echoes any origin).
 */
export const apiCors = (origins: ReadonlyArray<string>): { cors: Handler; preflight: Handler } => {
  const any = origins.includes("*");
  const listed = new Set(origins);
  const allowed = (origin: string | undefined): origin is string =>
    origin !== undefined && (any || listed.has(origin));
  return {
    cors: (req, res, next) => {
      if (origins.length === 0) return next();
      vary(res, "Origin");
      const origin = headerOf(req, "origin");
      if (allowed(origin)) {
        res.setHeader("access-control-allow-origin", any ? "*" : origin);
        res.setHeader("access-control-expose-headers", API_CORS.expose);
      }
      next();
    },
    preflight: (req, res, next) => {
      if (req.method !== "OPTIONS" || !allowed(headerOf(req, "origin"))) return next();
      res.setHeader("access-control-allow-methods", API_CORS.methods);
      res.setHeader("access-control-allow-headers", API_CORS.headers);
      res.setHeader("access-control-max-age", "600");
      res.statusCode = 204;
      res.end();
    },
  };
};

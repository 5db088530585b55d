import { type Operation, openApiDocument, operations, type Vod } from "@vod/core";
import express, { type Express } from "express";
import { catalogRoutes } from "./catalog-routes.js";
import { internalError, notFound, requestLog } from "./http.js";
import type { Logger } from "./logger.js";
import { apiCors, type OpsOptions, opsRoutes, requestMetrics } from "./ops.js";

export interface ApiAppOptions {
  readonly vod: Vod;
  readonly logger: Logger;
  readonly trustProxy?: boolean;
  readonly baseUrl?: string;
  /** Routers mounted before the API's own routes (the media app's part uploads). */
  readonly routes?: ReadonlyArray<express.Router>;
  readonly operations?: ReadonlyArray<Operation>;
  /** `/readyz`'s checks and `/metrics` (none: `/readyz` answers 200 while the process serves). */
  readonly ops?: OpsOptions;
  /** Origins the API answers CORS for (`*`: any); none by default. */
  readonly corsOrigins?: ReadonlyArray<string>;
}

/** The API app ({base_url}): every operation of the catalog behind the one generic handler. */
export const createApiApp = ({
  vod,
  logger,
  trustProxy = false,
  baseUrl,
  routes = [],
  operations: ops = operations,
  ops: operational = { readiness: [] },
  corsOrigins = [],
}: ApiAppOptions): Express => {
  const app = express();
  app.disable("x-powered-by");
  // Express's fallback error page prints the stack outside production; `internalError` answers
  // first, and this keeps the fallback silent should it ever be reached.
  app.set("env", "production");
  app.set("trust proxy", trustProxy);
  app.set("etag", false);
  app.use(requestLog(logger));
  if (operational.metrics) app.use(requestMetrics(operational.metrics));
  const cors = apiCors(corsOrigins);
  app.use(cors.cors);
  app.use((_req, res, next) => {
    res.setHeader("x-content-type-options", "nosniff");
    res.setHeader("cache-control", "no-store");
    next();
  });
  app.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  // The catalog first: the hot paths, and no path of it is one the routers below answer, so the
  // order changes no answer. Bodies are parsed on its routes only (an unknown route is 404
  // whatever it carries); what the parser refuses (malformed JSON, a broken gzip body) reaches
  // `internalError`, which answers with the spec's error.
  app.use(catalogRoutes(vod, ops));
  for (const router of routes) app.use(router);
  // Generated once from the schemas that validate and encode every operation.
  const openApi = openApiDocument(ops, { title: "VOD platform API", version: "1.0.0", serverUrl: baseUrl });
  app.get("/v1/openapi.json", (_req, res) => {
    res.json(openApi);
  });
  app.use(opsRoutes(operational));
  app.use(cors.preflight);
  app.use(notFound);
  app.use(internalError);
  return app;
};

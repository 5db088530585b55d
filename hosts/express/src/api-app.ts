import type { RequestListener } from "node:http";
import type { Vod } from "@vod/core";
import { type Operation, openApiDocument, operations } from "@vod/http";
import type { Express } from "express";
import { type CatalogRoutes, catalogRoutes } from "./catalog-routes.js";
import type { TrustProxy } from "./config.js";
import { type Handler, type HttpRequest, internalError, notFound, proxyTrust, requestLog } from "./http.js";
import type { Logger } from "./logger.js";
import { apiCors, hostExpress, type OpsOptions, opsRoutes, requestMetrics } from "./ops.js";

export interface ApiAppOptions {
  readonly vod: Vod;
  readonly logger: Logger;
  /** VOD_TRUST_PROXY: which proxies' X-Forwarded-For entries are believed (none by default). */
  readonly trustProxy?: TrustProxy;
  readonly baseUrl?: string;
  readonly mediaUrl?: string;
  readonly drmUrl?: string;
  readonly operations?: ReadonlyArray<Operation>;
  /** `/readyz`'s checks and `/metrics` (none: `/readyz` answers 200 while the process serves). */
  readonly ops?: OpsOptions;
  /** Origins the API answers CORS for (`*`: any); none by default. */
  readonly corsOrigins?: ReadonlyArray<string>;
}

/** The listener of every route, and the two routers it hands requests to. */
export type ApiApp = RequestListener & {
  /** Every operation of the spec (`catalogRoutes`), served on node's request and response. */
  readonly catalog: CatalogRoutes;
  /** The host's own routes (`/healthz`, `/readyz`, `/metrics`, the OpenAPI document) and the 404. */
  readonly express: Express;
};

/**
 * The app of every route ({base_url}, and {media_url} and {drm_url} unless they are split off):
 * every operation of the catalog behind the one generic handler, and the host's own routes. A
 * request the catalog takes never enters Express; both go through the same prelude (request id,
 * log, metrics, the fixed headers, the API's CORS) and end in the same error handler.
 */
export const createApiApp = ({
  vod,
  logger,
  trustProxy = { hops: 0 },
  baseUrl,
  mediaUrl,
  drmUrl,
  operations: ops = operations,
  ops: operational = { readiness: [] },
  corsOrigins = [],
}: ApiAppOptions): ApiApp => {
  const trust = proxyTrust(trustProxy);
  const app = hostExpress(trust);
  const log = requestLog(logger, operational.metrics && requestMetrics(operational.metrics));
  const cors = apiCors(corsOrigins);
  // What every request goes through, in one step rather than three.
  const prelude: Handler = (req, res, next) =>
    log(req, res, () => {
      res.setHeader("x-content-type-options", "nosniff");
      res.setHeader("cache-control", "no-store");
      cors.cors(req, res, next);
    });
  app.use(prelude);
  // Generated once from the schemas that validate and encode every operation.
  const openApi = openApiDocument(ops, {
    title: "VOD platform API",
    version: "1.0.0",
    serverUrl: baseUrl,
    urls: { media: mediaUrl, drm: drmUrl },
  });
  app.get("/v1/openapi.json", (_req, res) => {
    res.json(openApi);
  });
  app.use(opsRoutes(operational));
  app.use(cors.preflight);
  app.use(notFound);
  app.use(internalError);
  // Every route of the spec is an operation of the catalog, each reading its body as its
  // operation says (an unknown route is 404 whatever it carries); what the JSON parser refuses
  // (malformed JSON, a broken gzip body) reaches `internalError`, which answers with the spec's
  // error.
  const catalog = catalogRoutes(vod, ops, { trust });
  const listener: RequestListener = (req, res) => {
    const request = req as HttpRequest;
    const found = catalog.match(request);
    if (found === undefined) return app(req, res);
    const fail = (error: unknown) => internalError(error, request, res);
    prelude(request, res, () => {
      // What throws rather than failing its callback gets the spec's error too, as Express's
      // router would catch it; thrown in node's request event, it would end the process.
      try {
        catalog.serve(found, request, res, fail);
      } catch (error) {
        fail(error);
      }
    });
  };
  return Object.assign(listener, { catalog, express: app });
};

import { createServer, type RequestListener, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Vod } from "@vod/core";
import { createApiApp } from "./api-app.js";
import { type ComposeOverrides, composeVod } from "./compose.js";
import type { HostConfig } from "./config.js";
import { answerClientError } from "./http.js";
import { createLogger, type Logger } from "./logger.js";
import { mediaRoutes } from "./media-app.js";
import { drmRoutes, playbackRoutes } from "./playback-routes.js";
import { type RunningWorker, startWorker } from "./worker.js";

export interface RunningHost {
  readonly vod: Vod;
  readonly server: Server;
  readonly url: string;
  readonly logger: Logger;
  /** Stops accepting, lets in-flight requests finish (up to `graceMs`), then closes. */
  close(graceMs?: number): Promise<void>;
}

/** Composes the platform and serves the API app on one port. */
export const startHost = async (
  config: HostConfig,
  options: ComposeOverrides & { logger?: Logger } = {},
): Promise<RunningHost> => {
  const logger = options.logger ?? createLogger(config.logLevel);
  // Listen first: with PORT=0 the URLs left to their defaults follow the port actually bound.
  // Until composition is done, requests (health checks, eager clients) get 503 with Retry-After.
  let handle: RequestListener = (_req, res) => {
    res.writeHead(503, { "content-type": "application/json", "retry-after": "1" });
    res.end(JSON.stringify({ error: "storage_error", code: "storage_error", message: "starting" }));
  };
  const server = createServer((req, res) => handle(req, res));
  server.on("clientError", answerClientError(logger));
  // Behind a load balancer, idle keep-alive sockets must outlive the balancer's own timeout.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const local = `http://localhost:${port}`;
  const effective: HostConfig = {
    ...config,
    ...Object.fromEntries(config.defaultedUrls.map((name) => [name, local])),
  };
  let composed: Awaited<ReturnType<typeof composeVod>>;
  try {
    composed = await composeVod(effective, {
      onQueueError: (err) => logger.warn({ err }, "job queue error"),
      ...options,
    });
  } catch (error) {
    server.close();
    throw error;
  }
  const { vod } = composed;
  // One port serves the API, the media app and (later) the DRM app unless they are split.
  const app = createApiApp({
    vod,
    logger,
    trustProxy: config.trustProxy,
    baseUrl: effective.baseUrl,
    routes: [mediaRoutes(vod), playbackRoutes(vod), drmRoutes(vod)],
  });
  handle = app;
  const url = `http://127.0.0.1:${port}`;
  let worker: RunningWorker | undefined;
  if (config.jobs.workerConcurrency > 0 && composed.jobQueue)
    worker = await startWorker(vod, composed.jobQueue, {
      concurrency: config.jobs.workerConcurrency,
      logger,
    });
  logger.info({ port, base_url: effective.baseUrl, storage: composed.storage }, "vod host listening");

  let closing: Promise<void> | undefined;
  const close = (graceMs = 10_000) => {
    closing ??= new Promise<void>((resolve) => {
      const timer = setTimeout(() => server.closeAllConnections(), graceMs);
      timer.unref();
      server.close(() => {
        clearTimeout(timer);
        void (async () => {
          await worker?.stop();
          await composed.close();
        })().then(resolve, resolve);
      });
      server.closeIdleConnections();
    });
    return closing;
  };
  return { vod, server, url, logger, close };
};

import { createServer, type RequestListener, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Vod } from "@vod/core";
import { answerClientError, createHttpHandler } from "@vod/http";
import { type ComposeOverrides, composeVod } from "./compose.js";
import type { HostConfig } from "./config.js";
import { createLogger, type Logger } from "./logger.js";
import { notDraining } from "./ops.js";
import { type RunningWorker, startWorker } from "./worker.js";

export interface RunningHost {
  readonly vod: Vod;
  readonly server: Server;
  readonly url: string;
  readonly logger: Logger;
  /**
   * Stops accepting; lets in-flight requests and running jobs finish, up to `graceMs` (default
   * VOD_SHUTDOWN_GRACE_SECONDS), after which requests are cut off and jobs released to another
   * worker; then closes the queue, the database and Redis.
   */
  close(graceMs?: number): Promise<void>;
}

/**
 * An HTTP server of `listener` on `port`, once it listens: a request node's parser refuses
 * (malformed, headers too large) is answered with the spec's error too.
 */
export const listening = async (
  listener: RequestListener,
  port: number,
  host: string,
  logger: Logger,
): Promise<Server> => {
  const server = createServer(listener);
  server.on("clientError", answerClientError(logger));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return server;
};

export interface HostOptions extends ComposeOverrides {
  readonly logger?: Logger;
  /**
   * Serves the API inside another framework: given the API's listener, the listener of an app
   * that mounts it (`examples/fastify`). The host still listens, drains and stops.
   */
  readonly mount?: (api: RequestListener) => RequestListener | Promise<RequestListener>;
}

/** Composes the platform and serves the API app on one port. */
export const startHost = async (config: HostConfig, options: HostOptions = {}): Promise<RunningHost> => {
  const logger = options.logger ?? createLogger(config.logLevel, undefined, config.logFormat);
  // Listen first: with PORT=0 the URLs left to their defaults follow the port actually bound.
  // Until composition is done, requests (health checks, eager clients) get 503 with Retry-After.
  let handle: RequestListener = (_req, res) => {
    res.writeHead(503, { "content-type": "application/json", "retry-after": "1" });
    res.end(JSON.stringify({ error: "storage_error", code: "storage_error", message: "starting" }));
  };
  // The responses not yet sent in full: at close, each ends its connection once sent.
  const answering = new Set<ServerResponse>();
  let draining = false;
  const server = await listening(
    (req, res) => {
      if (draining) res.shouldKeepAlive = false;
      answering.add(res);
      res.once("close", () => answering.delete(res));
      handle(req, res);
    },
    config.port,
    config.host,
    logger,
  );
  // Behind a load balancer, idle keep-alive sockets must outlive the balancer's own timeout.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
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
      logger,
    });
  } catch (error) {
    server.close();
    throw error;
  }
  const { vod } = composed;
  // Every route on one port: {media_url} and {drm_url} only name where links send clients (a proxy
  // or CDN may front them), not listeners of their own.
  const app = createHttpHandler(vod, {
    logger,
    trustProxy: config.trustProxy,
    corsOrigins: config.corsOrigins,
    ops: {
      metrics: composed.metrics,
      metricsToken: config.metricsToken,
      // Draining, the node asks its load balancer to send it nothing new.
      readiness: [notDraining("serving", () => draining), ...composed.readiness],
    },
    urls: { base: effective.baseUrl, media: effective.mediaUrl, drm: effective.drmUrl },
  });
  handle = options.mount ? await options.mount(app) : app;
  const url = `http://127.0.0.1:${port}`;
  let worker: RunningWorker | undefined;
  if (config.jobs.workerConcurrency > 0 && composed.jobQueue)
    worker = await startWorker(vod, composed.jobQueue, {
      concurrency: config.jobs.workerConcurrency,
      logger,
    });
  logger.info(
    { port, base_url: effective.baseUrl, storage: composed.storage },
    `listening on ${config.host}:${port}; the API at ${effective.baseUrl}, its reference at ${effective.baseUrl}/docs`,
  );

  let closing: Promise<void> | undefined;
  const close = (graceMs = config.shutdownGraceSeconds * 1000) => {
    // Requests and the job drain side by side, each within the grace. The database (the embedded
    // one's process included) closes only after both: requests and the job use it to the end. A
    // telemetry beacon is answered only once its group commit is stored, so drained requests
    // leave no telemetry unflushed.
    closing ??= (async () => {
      draining = true;
      const requests = new Promise<void>((resolve) => {
        const timer = setTimeout(() => server.closeAllConnections(), graceMs);
        timer.unref();
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        server.closeIdleConnections();
        // A keep-alive connection would otherwise hold the close until the client lets it go.
        for (const res of answering) {
          if (!res.headersSent) res.shouldKeepAlive = false;
          res.once("finish", () => setImmediate(() => server.closeIdleConnections()));
        }
      });
      const jobs = worker
        ?.stop(graceMs)
        .catch((error: unknown) => logger.error({ err: error }, "worker stop failed"));
      await Promise.all([requests, jobs]);
      await composed.close();
    })();
    return closing;
  };
  return { vod, server, url, logger, close };
};

import type { Vod } from "@vod/core";
import {
  createHttpHandler,
  type HttpHandler,
  Operations,
  type OpsOptions,
  type ReadinessCheck,
} from "@vod/http";
import type { Logger } from "./logger.js";

/** A check that fails from the moment the process drains: it takes nothing new from then on. */
export const notDraining = (name: string, draining: () => boolean): ReadinessCheck => ({
  name,
  check: () => (draining() ? Promise.reject(new Error("shutting down")) : Promise.resolve()),
});

/**
 * The operational endpoints alone, for a process that serves no API (`vod worker` with
 * `VOD_OPS_PORT`): its jobs' and deliveries' metrics are counted where they run, so a deployment
 * whose workers run apart scrapes each of them. Every other path is the spec's 404.
 */
export const createOpsApp = ({
  vod,
  logger,
  ops,
}: {
  readonly vod: Vod;
  readonly logger: Logger;
  readonly ops: OpsOptions;
}): HttpHandler =>
  createHttpHandler(vod, {
    logger,
    ops,
    operations: [Operations.health, Operations.ready, Operations.metrics],
  });

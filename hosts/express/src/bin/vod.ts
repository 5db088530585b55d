#!/usr/bin/env node
import { setFlagsFromString } from "node:v8";
import { migrate } from "@vod/adapter-postgres";
import { composeVod, openDatabase } from "../compose.js";
import { ConfigError, loadConfig } from "../config.js";
import { createLogger, type Logger } from "../logger.js";
import { startHost } from "../server.js";
import { startWorker } from "../worker.js";

const usage = `usage: vod <command>

commands:
  serve     serve the API on PORT (default 8080) until SIGTERM or SIGINT
  worker    run processing jobs (and nothing else) until SIGTERM; needs VOD_DATABASE_URL
  migrate   apply database migrations (also applied by serve at start; safe to run concurrently)
`;

const migrateCommand = async () => {
  const config = loadConfig();
  if (config.storage === "memory") {
    console.log("vod migrate: VOD_STORAGE=memory keeps nothing; nothing to migrate");
    return;
  }
  const db = await openDatabase(config);
  try {
    const applied = await migrate(db);
    console.log(
      applied.length === 0
        ? "vod migrate: up to date"
        : `vod migrate: applied ${applied.join(", ")} (${db.engine})`,
    );
  } finally {
    await db.close();
  }
};

const workerCommand = async () => {
  const config = loadConfig();
  if (config.storage === "memory" || !config.database.url)
    throw new ConfigError(
      "vod worker shares the queue through a database server: set VOD_DATABASE_URL " +
        "(the embedded default runs its worker inside `vod serve`)",
    );
  const logger = createLogger(config.logLevel);
  const composed = await composeVod(
    config,
    { onQueueError: (err) => logger.warn({ err }, "job queue error") },
    { runsJobs: true },
  );
  if (!composed.jobQueue) throw new Error("no job queue was composed");
  const worker = await startWorker(composed.vod, composed.jobQueue, {
    concurrency: Math.max(1, config.jobs.workerConcurrency),
    logger,
  });
  onStop(logger, async () => {
    await worker.stop();
    await composed.close();
  });
};

/** SIGTERM and SIGINT: finish what runs, then exit 0. */
const onStop = (logger: Logger, stop: () => Promise<void>) => {
  let signalled = false;
  const handler = (signal: NodeJS.Signals) => {
    if (signalled) return;
    signalled = true;
    logger.info({ signal }, "draining");
    void stop().then(
      () => {
        logger.info("stopped");
        process.exit(0);
      },
      (error: unknown) => {
        logger.error({ err: error }, "stop failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", handler);
  process.on("SIGINT", handler);
};

const serve = async () => {
  const host = await startHost(loadConfig());
  onStop(host.logger, () => host.close());
};

/**
 * Node 20's V8 counts new external memory, such as the 64 KiB buffer of each chunk read from a
 * socket, against the old generation's limit until the next full GC. Between two scavenges,
 * part PUTs allocate ~32 MB of such buffers, all short-lived. The heap's own headroom after a
 * full GC is often less than that: V8's growing factor can fall to 1.1, and the memory reducer
 * shrinks the heap after a pause. A following upload then set off a full GC every ~25 MB: 40-60
 * per GiB, 1.5-2 CPU seconds, part PUTs at 0.6-0.7 of the bare pipe (bench/upload-gc.mjs).
 * A factor of 3 leaves ~60 MB of headroom over the host's ~30 MB heap, and the full GCs during an
 * upload went to none. 3 is within the range V8 picks by itself (1.1-4); an idle heap is still
 * shrunk. Set in the process's own entry point, not by the embeddable host, whose process
 * belongs to whoever embeds it. VOD_HEAP_GROWING_PERCENT=0 leaves V8's own choice.
 */
const DEFAULT_HEAP_GROWING_PERCENT = 200;

const tuneHeapForStreaming = () => {
  const given = process.env.VOD_HEAP_GROWING_PERCENT;
  const percent = given === undefined || given === "" ? DEFAULT_HEAP_GROWING_PERCENT : Number(given);
  if (!Number.isInteger(percent) || percent < 0 || percent > 1000)
    throw new ConfigError(
      `invalid configuration:\n  VOD_HEAP_GROWING_PERCENT must be an integer from 0 to 1000, got ${JSON.stringify(given)}`,
    );
  if (percent > 0) setFlagsFromString(`--heap-growing-percent=${percent}`);
};

export const main = async (argv: ReadonlyArray<string>) => {
  const [command] = argv;
  try {
    if (command === "serve" || command === "worker") tuneHeapForStreaming();
    switch (command) {
      case "serve":
        return await serve();
      case "worker":
        return await workerCommand();
      case "migrate":
        return await migrateCommand();
      default:
        process.stderr.write(usage);
        process.exitCode = command === undefined || command === "help" || command === "--help" ? 0 : 2;
    }
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`vod: ${error.message}\n`);
      process.exit(78);
    }
    throw error;
  }
};

// Run when executed directly (`node dist/bin/vod.js serve`), not when imported.
if (import.meta.url === `file://${process.argv[1]}`) await main(process.argv.slice(2));

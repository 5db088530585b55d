#!/usr/bin/env node
import type { AddressInfo } from "node:net";
import { DataDirectoryInUse, prepareDatabase, TargetNotEmpty } from "@vod/adapter-postgres";
import type { NotFound, StorageError } from "@vod/core";
import { Cause, Effect, Exit, Option } from "effect";
import { backup, RestoreRefused, restore } from "../backup.js";
import { composeVod, openDatabase, queueDefinition } from "../compose.js";
import { ConfigError, type HostConfig, loadConfig } from "../config.js";
import { tuneHeapForRequests, tuneHeapForStreaming } from "../heap.js";
import { createLogger, type Logger } from "../logger.js";
import { createOpsApp, notDraining } from "../ops.js";
import { listening, startHost } from "../server.js";
import { startWorker } from "../worker.js";

const usage = `usage: vod <command>

commands:
  serve     serve the API on PORT (default 8080) until SIGTERM or SIGINT
  worker    run processing jobs (and nothing else) until SIGTERM; needs VOD_DATABASE_URL;
            with VOD_OPS_PORT, serves /healthz, /readyz and /metrics there
  migrate   apply database migrations and install the job queue (also done by serve and worker
            at start; safe to run concurrently)
  tenant suspend <tenant_id>
            refuse every credential of the tenant (403) on every node: at once with VOD_REDIS_URL,
            within 60 s without it
  tenant activate <tenant_id>
            let the tenant's credentials work again
  tenant delete <tenant_id>
            delete the tenant: every credential of it refused (401) on every node, as suspend
            reaches them; its slug never given again; its rows and objects removed by a job of
            the running hosts or workers (\`vod serve\`, \`vod worker\`)
  backup <dir>
            write a consistent copy of the database, taken while hosts serve, into the new
            directory <dir>, with the filesystem store's objects and a manifest of counts and
            checksums (on GCS the bucket's versioning and soft delete keep the objects)
  restore <dir> [--force]
            restore a backup into an empty database (VOD_DATA_DIR, or VOD_DATABASE_URL's) and an
            empty objects directory; --force replaces what is there (moved aside, not deleted)

On the embedded default, a data directory is opened by one process: tenant, migrate and backup
go through a running \`vod serve\` of the same VOD_DATA_DIR; serve and restore refuse, naming it.
`;

/** `vod tenant suspend|activate|delete <id>`: through the core, so every node's credential cache is told. */
const tenantCommand = async (args: ReadonlyArray<string>) => {
  const [action, tenantId] = args;
  if (
    (action !== "suspend" && action !== "activate" && action !== "delete") ||
    !tenantId ||
    args.length !== 2
  ) {
    process.stderr.write(usage);
    process.exitCode = 2;
    return;
  }
  const config = loadConfig();
  if (config.storage === "memory")
    throw new ConfigError("VOD_STORAGE=memory keeps no tenants across processes; nothing to change");
  // Beside a running host of the same data directory, through its database: the host sees the
  // change at once (told through the same process) and it is in the host's files.
  const composed = await composeVod(
    { ...config, jobs: { ...config.jobs, workerConcurrency: 0 } },
    {},
    { runsJobs: false, reach: true },
  );
  try {
    const { tenants } = composed.vod;
    const change: Effect.Effect<{ readonly status: string }, NotFound | StorageError> =
      action === "delete"
        ? tenants.remove(tenantId)
        : tenants.setStatus(tenantId, action === "suspend" ? "suspended" : "active");
    const exit = await Effect.runPromiseExit(change);
    if (Exit.isFailure(exit)) {
      const failure = Cause.failureOption(exit.cause);
      process.stderr.write(
        `vod tenant ${action}: ${Option.isSome(failure) ? failure.value.message : Cause.pretty(exit.cause)}\n`,
      );
      process.exitCode = Option.isSome(failure) && failure.value._tag === "NotFound" ? 1 : 70;
      return;
    }
    console.log(`vod tenant ${action}: ${tenantId} is ${exit.value.status}`);
    if (action === "delete")
      console.log(
        `vod tenant delete: its rows and objects are removed by the "delete-tenant" job, run by \`vod serve\` or \`vod worker\``,
      );
  } finally {
    await composed.close();
  }
};

const migrateCommand = async () => {
  const config = loadConfig();
  if (config.storage === "memory") {
    console.log("vod migrate: VOD_STORAGE=memory keeps nothing; nothing to migrate");
    return;
  }
  const db = await openDatabase(config, undefined, { reach: true });
  try {
    // The job queue's schema and queues too: hosts started after this find nothing to create.
    const applied = await prepareDatabase(db, queueDefinition(config));
    console.log(
      applied.length === 0
        ? "vod migrate: up to date"
        : `vod migrate: applied ${applied.join(", ")} (${db.engine})`,
    );
  } finally {
    await db.close();
  }
};

/** The process-wide tuning `serve` and `worker` run under (heap.ts): set before anything else. */
const tuneProcess = (config: HostConfig) => {
  if (config.heapGrowingPercent > 0) tuneHeapForStreaming(config.heapGrowingPercent);
  tuneHeapForRequests();
};

const workerCommand = async () => {
  const config = loadConfig();
  tuneProcess(config);
  if (config.storage === "memory" || !config.database.url)
    throw new ConfigError(
      "vod worker shares the queue through a database server: set VOD_DATABASE_URL " +
        "(the embedded default runs its worker inside `vod serve`)",
    );
  const logger = createLogger(config.logLevel);
  const composed = await composeVod(
    config,
    { onQueueError: (err) => logger.warn({ err }, "job queue error"), logger },
    { runsJobs: true },
  );
  if (!composed.jobQueue) throw new Error("no job queue was composed");
  let draining = false;
  const ops =
    config.opsPort === undefined
      ? undefined
      : await listening(
          createOpsApp({
            vod: composed.vod,
            logger,
            ops: {
              metrics: composed.metrics,
              metricsToken: config.metricsToken,
              // Draining, it takes no new job: not ready, as a host that takes no new request.
              readiness: [notDraining("working", () => draining), ...composed.readiness],
            },
          }),
          config.opsPort,
          config.host,
          logger,
        );
  if (ops) logger.info({ port: (ops.address() as AddressInfo).port }, "worker ops listening");
  // Listening first: a port taken fails the start before any job is taken.
  const worker = await startWorker(composed.vod, composed.jobQueue, {
    concurrency: Math.max(1, config.jobs.workerConcurrency),
    logger,
  });
  onStop(logger, async () => {
    draining = true;
    await worker.stop(config.shutdownGraceSeconds * 1000);
    // Scraped to the end: the last jobs' metrics are there until the worker has stopped.
    if (ops) await new Promise((resolve) => ops.close(resolve).closeAllConnections());
    await composed.close();
  });
};

/**
 * SIGTERM and SIGINT: finish what runs (up to VOD_SHUTDOWN_GRACE_SECONDS), then exit 0.
 *
 * The same when the parent process goes away. `npm start` runs `exec node ...` (package.json),
 * so npm's own child is this process and npm forwards SIGTERM to it; but a parent that dies
 * without doing so (npm SIGKILLed, a shell that forked instead of exec'ing, as dash does for
 * `sh -c "node ..."`) would leave this process serving, orphaned, with nobody left to stop it.
 * Node has no parent-death signal, so the parent pid is watched: reparented, we stop.
 */
const onStop = (logger: Logger, stop: () => Promise<void>) => {
  let signalled = false;
  const handler = (signal: NodeJS.Signals | "parent exited") => {
    if (signalled) return;
    signalled = true;
    clearInterval(orphaned);
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
  const parent = process.ppid;
  const orphaned = setInterval(() => {
    if (process.ppid !== parent) handler("parent exited");
  }, 250);
  orphaned.unref();
};

const serve = async () => {
  const config = loadConfig();
  tuneProcess(config);
  const host = await startHost(config);
  onStop(host.logger, () => host.close(config.shutdownGraceSeconds * 1000));
};

const backupCommand = async (args: ReadonlyArray<string>) => {
  const [dir] = args;
  if (!dir || args.length !== 1) {
    process.stderr.write(usage);
    process.exitCode = 2;
    return;
  }
  await backup(loadConfig(), dir, (line) => console.log(line));
};

const restoreCommand = async (args: ReadonlyArray<string>) => {
  const force = args.includes("--force");
  const files = args.filter((a) => a !== "--force");
  const [file] = files;
  if (!file || files.length !== 1 || file.startsWith("--")) {
    process.stderr.write(usage);
    process.exitCode = 2;
    return;
  }
  await restore(loadConfig(), file, { force }, (line) => console.log(line));
};

export const main = async (argv: ReadonlyArray<string>) => {
  const [command] = argv;
  try {
    switch (command) {
      case "serve":
        return await serve();
      case "worker":
        return await workerCommand();
      case "migrate":
        return await migrateCommand();
      case "tenant":
        return await tenantCommand(argv.slice(1));
      case "backup":
        return await backupCommand(argv.slice(1));
      case "restore":
        return await restoreCommand(argv.slice(1));
      default:
        process.stderr.write(usage);
        process.exitCode = command === undefined || command === "help" || command === "--help" ? 0 : 2;
    }
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`vod: ${error.message}\n`);
      process.exit(78);
    }
    // Refusals an operator acts on: the message says what to do.
    if (
      error instanceof DataDirectoryInUse ||
      error instanceof RestoreRefused ||
      error instanceof TargetNotEmpty
    ) {
      process.stderr.write(`vod ${command}: ${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
};

// Run when executed directly (`node dist/bin/vod.js serve`), not when imported.
if (import.meta.url === `file://${process.argv[1]}`) await main(process.argv.slice(2));

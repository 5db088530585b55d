#!/usr/bin/env node
import { realpathSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import type { NotFound, StorageError } from "@vod/core";
import type { Effect as Fx } from "effect";
import type { HostConfig } from "../config.js";
import type { Logger } from "../logger.js";
import { EXIT, startFailure } from "../start-failure.js";

/**
 * The host's modules, loaded by the commands that use them rather than at start: `vod upload`
 * and `vod play` load only @vod/client, and start in a tenth of the time (bench/cli-upload.mjs).
 */
const hostModules = async () => {
  const [
    { DataDirectoryInUse, prepareDatabase, TargetNotEmpty },
    { Cause, Effect, Exit, Option },
    { backup, RestoreRefused, restore },
    { composeVod, openDatabase, queueDefinition },
    { ConfigError, loadConfig },
    { tuneHeapForRequests, tuneHeapForStreaming },
    { createLogger },
    { createOpsApp, notDraining },
    { listening, startHost },
    { startWorker },
    { TenantId },
  ] = await Promise.all([
    import("@vod/adapter-postgres"),
    import("effect"),
    import("../backup.js"),
    import("../compose.js"),
    import("../config.js"),
    import("../heap.js"),
    import("../logger.js"),
    import("../ops.js"),
    import("../server.js"),
    import("../worker.js"),
    import("@vod/core"),
  ]);
  return {
    DataDirectoryInUse,
    prepareDatabase,
    TargetNotEmpty,
    Cause,
    Effect,
    Exit,
    Option,
    backup,
    RestoreRefused,
    restore,
    composeVod,
    openDatabase,
    queueDefinition,
    ConfigError,
    loadConfig,
    tuneHeapForRequests,
    tuneHeapForStreaming,
    createLogger,
    createOpsApp,
    notDraining,
    listening,
    startHost,
    startWorker,
    TenantId,
  };
};

/** The configuration the command loaded, for naming the variable behind a failed start. */
let loaded: HostConfig | undefined;
const configured = async () => {
  const { loadConfig } = await hostModules();
  loaded = loadConfig();
  return loaded;
};

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

client commands (on VOD_API_URL with VOD_API_KEY):
  upload FILE [--title T] [--drm] [--parallel N] [--wait]
            create an asset and upload FILE as its source, N parts at once (default 4); killed
            or interrupted, the same command resumes it (state in VOD_STATE_DIR, else
            $XDG_STATE_HOME/vod, else ~/.local/state/vod); --wait waits until it is ready and
            prints a playback URL
  play ASSET_ID [--ttl SECONDS]
            mint a playback session of the asset and print its token and URLs

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
  const { ConfigError, composeVod, Effect, Exit, Cause, Option, TenantId } = await hostModules();
  const config = await configured();
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
    const id = TenantId(tenantId);
    const change: Fx.Effect<{ readonly status: string }, NotFound | StorageError> =
      action === "delete"
        ? tenants.remove(id)
        : tenants.setStatus(id, action === "suspend" ? "suspended" : "active");
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
  const { openDatabase, prepareDatabase, queueDefinition } = await hostModules();
  const config = await configured();
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
const tuneProcess = async (config: HostConfig) => {
  const { tuneHeapForRequests, tuneHeapForStreaming } = await hostModules();
  if (config.heapGrowingPercent > 0) tuneHeapForStreaming(config.heapGrowingPercent);
  tuneHeapForRequests();
};

const workerCommand = async () => {
  const { ConfigError, createLogger, composeVod, listening, createOpsApp, notDraining, startWorker } =
    await hostModules();
  const config = await configured();
  await tuneProcess(config);
  if (config.storage === "memory" || !config.database.url)
    throw new ConfigError(
      "vod worker shares the queue through a database server: set VOD_DATABASE_URL " +
        "(the embedded default runs its worker inside `vod serve`)",
    );
  const logger = createLogger(config.logLevel, undefined, config.logFormat);
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
  const { startHost } = await hostModules();
  const config = await configured();
  await tuneProcess(config);
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
  const { backup } = await hostModules();
  await backup(await configured(), dir, (line) => console.log(line));
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
  const { restore } = await hostModules();
  await restore(await configured(), file, { force }, (line) => console.log(line));
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
      case "upload":
        return await (await import("../client-cli.js")).uploadCommand(argv.slice(1));
      case "play":
        return await (await import("../client-cli.js")).playCommand(argv.slice(1));
      default:
        process.stderr.write(usage);
        process.exitCode = command === undefined || command === "help" || command === "--help" ? 0 : 2;
    }
  } catch (error) {
    const { ConfigError, DataDirectoryInUse, RestoreRefused, TargetNotEmpty } = await hostModules();
    if (error instanceof ConfigError) {
      process.stderr.write(`vod: ${error.message}\n`);
      process.exit(EXIT.config);
    }
    const failure = startFailure(error, loaded);
    if (failure !== undefined) {
      process.stderr.write(`vod ${command}: ${failure.line}\n`);
      process.exit(failure.code);
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

/**
 * Run when executed (`node dist/bin/vod.js serve`, or `npx vod serve` from an install), not when
 * imported. npm installs the bin as a symlink in `node_modules/.bin`, and node runs the file it
 * points at: compare real paths, not the path typed.
 */
const executed = (script: string | undefined) => {
  try {
    return script !== undefined && realpathSync(script) === fileURLToPath(import.meta.url);
  } catch {
    return false;
  }
};
if (executed(process.argv[1])) await main(process.argv.slice(2));

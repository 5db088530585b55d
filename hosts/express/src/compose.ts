import "reflect-metadata";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { argon2PasswordHasher } from "@vod/adapter-argon2";
import { ffmpegImageMaker, ffmpegMediaProcessor, ToolNotFound } from "@vod/adapter-ffmpeg";
import { filesystemObjectStore } from "@vod/adapter-filesystem";
import { gcsObjectStore } from "@vod/adapter-gcs";
import { googleIdentityVerifier } from "@vod/adapter-google-identity";
import { joseTokenSigner, loadOrCreateSigningKeys, parseSigningKeys } from "@vod/adapter-jose";
import {
  memoryJobQueue,
  memoryObjectStore,
  memoryRateLimiter,
  memoryRevocationStore,
  memoryStorage,
  memoryTelemetrySink,
  randomIds,
  systemClock,
} from "@vod/adapter-memory";
import {
  connectPostgres,
  type EmbeddedDatabase,
  embeddedRevocationFeed,
  migrate,
  openPgliteProcess,
  type PgBossQueue,
  pgBossQueue,
  ping,
  postgresRevocationStore,
  postgresStorage,
  postgresTelemetrySink,
  type SqlDatabase,
} from "@vod/adapter-postgres";
import { type PrometheusMetrics, prometheusMetrics } from "@vod/adapter-prometheus";
import { type DependencyLog, type RedisAdapters, redisAdapters } from "@vod/adapter-redis";
import { logMailer, type SmtpMailer, smtpMailer } from "@vod/adapter-smtp";
import { httpWebhookSender } from "@vod/adapter-webhook-http";
import { webVttTextTrackReader } from "@vod/adapter-webvtt";
import {
  type Clock,
  coreModule,
  type ImageMaker,
  type JobQueue,
  layeredRevocations,
  type Mailer,
  type MediaProcessor,
  type ObjectStore,
  type RevocationFeed,
  type RevocationStore,
  type Storage,
  type TelemetrySink,
  Tokens,
  type Vod,
  type VodConfigInput,
} from "@vod/core";
import { catalogLinks, type ReadinessCheck } from "@vod/http";
import { Container, ContainerModule } from "inversify";
import { ConfigError, type HostConfig } from "./config.js";
import { loadOrCreateSecret } from "./secrets.js";

export interface ComposeOverrides {
  /** Storage to use instead of the configured one (tests pass one they can read back). */
  readonly storage?: Storage;
  readonly objectStore?: ObjectStore;
  /** With an overridden storage: the queue its enqueues land in (none: no jobs run). */
  readonly jobQueue?: JobQueue;
  readonly mediaProcessor?: MediaProcessor;
  /** What makes playback's images instead of ffmpeg (tests without real media). */
  readonly imageMaker?: ImageMaker;
  /** Account mail's way out instead of VOD_SMTP_URL's (or the log). */
  readonly mailer?: Mailer;
  readonly revocationStore?: RevocationStore;
  readonly telemetrySink?: TelemetrySink;
  readonly clock?: Clock;
  /** Told of the job queue's background errors (maintenance, heartbeats, lost outcomes). */
  readonly onQueueError?: (error: unknown) => void;
  /**
   * Told when the database or Redis goes away (once per outage, at warn) and comes back (info),
   * and at start when ffmpeg is an old build shipped by an npm package (warn).
   */
  readonly logger?: DependencyLog;
  /** Where ffmpeg and ffprobe are looked for instead of PATH, when not configured (tests). */
  readonly toolSearchPath?: string;
}

export interface ComposedVod {
  readonly vod: Vod;
  /** The queue workers of this process take jobs from, if any. */
  readonly jobQueue: JobQueue | undefined;
  /** Which storage serves, for the start-up log line. */
  readonly storage: string;
  /** What this process counts, for `/metrics`; the core and the worker record into it. */
  readonly metrics: PrometheusMetrics;
  /** The dependencies `/readyz` asks: the database server or PGlite, and Redis when configured. */
  readonly readiness: ReadonlyArray<ReadinessCheck>;
  /** Releases what composition opened (queue, database pool). */
  close(): Promise<void>;
}

/**
 * The configured database: the server at VOD_DATABASE_URL, else PGlite in the data directory.
 * Another process may own that directory (a `vod serve`): `reach` sends this process's queries
 * through it (a command beside a running host), else the opening fails, naming that process.
 */
export const openDatabase = async (
  config: HostConfig,
  log?: DependencyLog,
  options: { readonly reach?: boolean } = {},
): Promise<SqlDatabase> =>
  config.database.url
    ? connectPostgres({
        connectionString: config.database.url,
        poolSize: config.database.poolSize,
        schema: config.database.schema,
        ...(log ? { log } : {}),
      })
    : openPgliteProcess(pgliteDir(config), {
        whenInUse: options.reach ? "reach" : "refuse",
        // Without its database the host can only fail every request: stop, to be started afresh.
        onExit: (reason) => {
          process.stderr.write(`vod: ${reason}; stopping\n`);
          process.exit(1);
        },
      });

/** Where the embedded default keeps its database. */
export const pgliteDir = (config: HostConfig) => resolve(config.dataDir, "pglite");

const isEmbedded = (db: SqlDatabase): db is EmbeddedDatabase => "onBroadcast" in db;

/**
 * The queue's limit on a run: a backstop 5 minutes past the core's own (`processing.maxRunMs`),
 * which fires first and so ends an overrun as a retry or a failed asset, not a job that vanished.
 */
const queueMaxRunSeconds = (config: HostConfig) => config.core.processing.maxRunMs / 1000 + 300;

const TOOL_VARIABLES: Record<string, string> = {
  ffmpegPath: "VOD_FFMPEG_PATH",
  ffprobePath: "VOD_FFPROBE_PATH",
};

/** A configured tool that is not there is the operator's to fix: said as the variable's fault. */
const namingTheVariable = <A>(make: () => A): A => {
  try {
    return make();
  } catch (error) {
    const variable = error instanceof ToolNotFound ? TOOL_VARIABLES[error.setting] : undefined;
    if (variable === undefined || !(error instanceof ToolNotFound)) throw error;
    throw new ConfigError(`invalid configuration: ${variable}: "${error.value}" is not an executable file`);
  }
};

/** How the queues are defined in the database: `vod migrate` creates them the way hosts would. */
export const queueDefinition = (config: HostConfig) => ({
  maxAttempts: config.core.processing.maxAttempts,
  retryDelaySeconds: config.jobs.retryDelaySeconds,
  leaseSeconds: config.jobs.leaseSeconds,
});

const secretBytes = (given: string | undefined, dataDir: string, file: string) =>
  given ? Promise.resolve(new TextEncoder().encode(given)) : loadOrCreateSecret(dataDir, file);

/** The configured object store: a directory, process memory, or a bucket (credentials from ADC). */
const openObjectStore = ({ objects, dataDir }: HostConfig): ObjectStore => {
  if (objects.store === "memory") return memoryObjectStore();
  if (objects.store === "gcs")
    return gcsObjectStore({
      bucket: objects.gcs.bucket ?? "",
      prefix: objects.gcs.prefix,
      apiEndpoint: objects.gcs.apiEndpoint,
      delivery: objects.gcs.delivery,
      hmacKey: objects.gcs.hmacKey,
    });
  return filesystemObjectStore({ root: resolve(objects.dir ?? resolve(dataDir, "objects")) });
};

/**
 * The composition root: which adapter serves each port is decided here and nowhere else.
 * `role` says what the process does: an API host with `workerConcurrency` 0 needs no ffmpeg.
 */
export const composeVod = async (
  config: HostConfig,
  overrides: ComposeOverrides = {},
  role: {
    readonly runsJobs: boolean;
    /** A command beside a running host: through the host's embedded database (`openDatabase`). */
    readonly reach?: boolean;
  } = { runsJobs: config.jobs.workerConcurrency > 0 },
): Promise<ComposedVod> => {
  const keys = config.signingKeys
    ? parseSigningKeys(config.signingKeys)
    : await loadOrCreateSigningKeys(config.dataDir);
  const coreConfig: VodConfigInput = {
    ...config.core,
    cursorSecret: await secretBytes(config.cursorSecret, config.dataDir, "cursor-secret"),
    uploadUrlSecret: await secretBytes(config.objects.uploadUrlSecret, config.dataDir, "upload-url-secret"),
    drmMasterKey: config.drm.masterKey
      ? new Uint8Array(
          Buffer.from(config.drm.masterKey, config.drm.masterKey.length === 64 ? "hex" : "base64url"),
        )
      : await loadOrCreateSecret(config.dataDir, "drm-master-key"),
  };

  // Redis, when configured, is an accelerator every node shares (DECISIONS "Redis is an
  // accelerator, Postgres the truth"): one count per rate limit for the whole cluster, and
  // revocations told to every node at once. A Redis that cannot be reached, now or later, is not
  // a reason to refuse: the node counts alone (the adapter warns once) until Redis answers.
  let redis: RedisAdapters | undefined;
  if (config.redis.url) {
    redis = redisAdapters({
      url: config.redis.url,
      keyPrefix: config.redis.keyPrefix,
      fallbackRateLimiter: memoryRateLimiter(),
      ...(overrides.logger ? { log: overrides.logger } : {}),
    });
    await redis.ready();
  }

  let storage: Storage;
  let jobQueue: JobQueue | undefined;
  let revocationStore: RevocationStore;
  let telemetrySink: TelemetrySink;
  let label: string;
  let db: SqlDatabase | undefined;
  let boss: PgBossQueue | undefined;
  // What opens below leaves Redis to be closed if it fails.
  try {
    if (overrides.storage) {
      storage = overrides.storage;
      jobQueue = overrides.jobQueue;
      revocationStore = overrides.revocationStore ?? memoryRevocationStore();
      telemetrySink = overrides.telemetrySink ?? memoryTelemetrySink();
      label = "provided";
    } else if (config.storage === "memory") {
      const memory = memoryStorage();
      storage = memory;
      jobQueue = memoryJobQueue(memory, {
        maxAttempts: config.core.processing.maxAttempts,
        retryDelayMs: config.jobs.retryDelaySeconds * 1000,
        leaseMs: config.jobs.leaseSeconds * 1000,
        maxRunMs: queueMaxRunSeconds(config) * 1000,
      });
      revocationStore = memoryRevocationStore();
      telemetrySink = memoryTelemetrySink();
      label = "memory";
    } else {
      // A new embedded database takes half a minute to create on a small machine: said first.
      if (!config.database.url && !existsSync(pgliteDir(config)))
        overrides.logger?.info(
          { dir: pgliteDir(config) },
          "creating the embedded database (once per data directory; about half a minute)…",
        );
      db = await openDatabase(config, overrides.logger, { reach: role.reach ?? false });
      // Said at start so that a first start, which creates the schema, is not taken for a hang.
      overrides.logger?.info({ engine: db.engine }, "migrating the database…");
      // Each takes the start-up lock for its part, so processes starting together take turns.
      const applied = await migrate(db);
      overrides.logger?.info(
        { engine: db.engine, applied },
        applied.length === 0 ? "database up to date" : `database migrated: ${applied.join(", ")}`,
      );
      // Jobs live in the same database, so enqueues commit with the records that make them due.
      boss = await pgBossQueue(db, {
        ...queueDefinition(config),
        maxRunSeconds: queueMaxRunSeconds(config),
        maintenanceSeconds: config.jobs.maintenanceSeconds,
        ...(overrides.onQueueError ? { onError: overrides.onQueueError } : {}),
      });
      storage = postgresStorage(db, { enqueue: boss.enqueueWith, enqueued: boss.wake });
      jobQueue = boss;
      revocationStore = postgresRevocationStore(db);
      telemetrySink = postgresTelemetrySink(db);
      label = db.engine === "pglite" ? `pglite (${pgliteDir(config)})` : "postgres";
    }
  } catch (error) {
    await redis?.close();
    throw error;
  }

  // The database (or the given store) stays the truth of revocations; Redis only tells the other
  // nodes at once. Its loss or emptiness means nodes learn at their cache's next look-up. On the
  // embedded database, the processes that share it (a host and a `vod` command) tell each other
  // through the process that owns it.
  const revocationFeed: RevocationFeed | undefined =
    redis?.revocationFeed ?? (db && isEmbedded(db) ? embeddedRevocationFeed(db) : undefined);
  if (revocationFeed) revocationStore = layeredRevocations(revocationStore, revocationFeed);
  const rateLimiter = redis?.rateLimiter ?? memoryRateLimiter();

  const objectStore = overrides.objectStore ?? openObjectStore(config);
  const mediaProcessor =
    overrides.mediaProcessor ??
    (role.runsJobs
      ? namingTheVariable(() =>
          ffmpegMediaProcessor({
            ffmpegPath: config.media.ffmpegPath,
            ffprobePath: config.media.ffprobePath,
            maxDurationMs: config.core.processing.maxSourceDurationMs,
            ...(overrides.toolSearchPath !== undefined ? { searchPath: overrides.toolSearchPath } : {}),
            ...(overrides.logger ? { log: overrides.logger } : {}),
          }),
        )
      : undefined);

  // Images are made where the media app serves them. A node without ffmpeg still serves
  // playback: its image routes answer 503 playback_unavailable, and the start says why.
  let imageMaker = overrides.imageMaker;
  if (!imageMaker) {
    try {
      imageMaker = ffmpegImageMaker({
        ffmpegPath: config.media.ffmpegPath,
        ffprobePath: config.media.ffprobePath,
        ...(overrides.toolSearchPath !== undefined ? { searchPath: overrides.toolSearchPath } : {}),
      });
    } catch (error) {
      overrides.logger?.warn({ err: String(error) }, "ffmpeg not found: playback images cannot be made");
    }
  }

  // Account mail goes out from processes that run jobs. Without VOD_SMTP_URL the embedded default
  // writes it to the log (one operator reads it); a server deployment, whose logs are shared and
  // kept, gets no mailer: its mail jobs fail, each logged and counted, and the start warns.
  const smtp: SmtpMailer | undefined =
    config.mail.smtpUrl && !overrides.mailer
      ? smtpMailer({ url: config.mail.smtpUrl, from: config.mail.from })
      : undefined;
  const mailer =
    overrides.mailer ??
    smtp ??
    (config.database.url ? undefined : logMailer(overrides.logger ?? { info: () => {} }));
  if (!mailer && role.runsJobs)
    overrides.logger?.warn(
      {},
      "VOD_SMTP_URL is not set: verification and password reset mails cannot be sent",
    );

  const metrics = prometheusMetrics(redis ? { redis: redis.health } : {});
  const readiness: ReadinessCheck[] = [
    ...(db ? [{ name: "database", check: () => ping(db) }] : []),
    ...(redis ? [{ name: "redis", check: redis.ping }] : []),
  ];

  const container = new Container();
  await container.load(
    new ContainerModule(({ bind }) => {
      bind(Tokens.Clock).toConstantValue(overrides.clock ?? systemClock());
      bind(Tokens.Ids).toConstantValue(randomIds());
      bind(Tokens.Config).toConstantValue(coreConfig);
      bind(Tokens.Storage).toConstantValue(storage);
      bind(Tokens.RateLimiter).toConstantValue(rateLimiter);
      bind(Tokens.ObjectStore).toConstantValue(objectStore);
      bind(Tokens.RevocationStore).toConstantValue(revocationStore);
      bind(Tokens.Links).toConstantValue(catalogLinks({ media: config.mediaUrl, drm: config.drmUrl }));
      // Without a feed (a server without Redis) the core tells this process alone: nodes learn
      // of a revocation from the database when their cache entry expires (60 s).
      if (revocationFeed) bind(Tokens.RevocationFeed).toConstantValue(revocationFeed);
      bind(Tokens.TelemetrySink).toConstantValue(telemetrySink);
      bind(Tokens.Metrics).toConstantValue(metrics);
      if (jobQueue) bind(Tokens.JobQueue).toConstantValue(jobQueue);
      if (mediaProcessor) bind(Tokens.MediaProcessor).toConstantValue(mediaProcessor);
      if (imageMaker) bind(Tokens.ImageMaker).toConstantValue(imageMaker);
      bind(Tokens.TextTrackReader).toConstantValue(webVttTextTrackReader());
      bind(Tokens.TokenSigner).toConstantValue(
        joseTokenSigner({ issuer: config.baseUrl, audience: config.baseUrl, keys }),
      );
      bind(Tokens.PasswordHasher).toConstantValue(argon2PasswordHasher());
      bind(Tokens.WebhookSender).toConstantValue(
        httpWebhookSender({ allowPrivate: config.webhooks.allowPrivate }),
      );
      if (mailer) bind(Tokens.Mailer).toConstantValue(mailer);
      bind(Tokens.IdentityVerifier).toConstantValue(
        googleIdentityVerifier({ clientId: config.google.clientId, certsUrl: config.google.certsUrl }),
      );
    }),
    coreModule(),
  );
  return {
    vod: container.get<Vod>(Tokens.Vod),
    jobQueue,
    storage: label,
    metrics,
    readiness,
    close: async () => {
      await boss?.close();
      smtp?.close();
      await db?.close();
      await redis?.close();
    },
  };
};

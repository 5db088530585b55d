import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { filesystemBackdoor } from "@vod/adapter-filesystem/testing";
import { gcsTestBackdoor } from "@vod/adapter-gcs/testing";
import {
  type ManualClock,
  manualClock,
  memoryJobQueue,
  memoryObjectStore,
  memoryRevocationStore,
  memoryStorage,
  memoryTelemetrySink,
} from "@vod/adapter-memory";
import { memoryBackdoor, memoryObjectStoreBackdoor } from "@vod/adapter-memory/testing";
import {
  connectPostgres,
  migrate,
  pgBossQueue,
  postgresRevocationStore,
  postgresStorage,
  postgresTelemetrySink,
  type SqlDatabase,
} from "@vod/adapter-postgres";
import { postgresBackdoor, postgresTelemetryBackdoor, temporarySchemas } from "@vod/adapter-postgres/testing";
import { redisBackdoor } from "@vod/adapter-redis/testing";
import {
  fakeImageMaker,
  fakeMediaProcessor,
  type HttpSubject,
  type MakeHttpSubject,
  testHostEnv,
  uid,
} from "@vod/contract-tests";
import { type ObjectStore, TenantId } from "@vod/core";
import { inFastify } from "@vod/example-fastify";
import {
  type HostConfig,
  type HostOptions,
  loadConfig,
  openDatabase,
  type RunningHost,
  startHost,
} from "@vod/host-express";
import {
  createGcsTestServer,
  type GcsTestServer,
  startFakeGoogle,
  startSmtpTestServer,
} from "@vod/test-services";
import { Effect } from "effect";
import { afterAll, beforeAll } from "vitest";

/**
 * The hosts the HTTP suites run against, one maker per adapter set, so that every set's test
 * file only names its set. Every host gets a fake Google, a data directory of its own, a manual
 * clock and the fake media processor; it runs no processing job unless the env asks for a worker.
 */

/** What a set adds to the common parts of a subject. */
interface Started {
  readonly host: RunningHost;
  readonly backdoor: HttpSubject["backdoor"];
  readonly objects: HttpSubject["objects"];
  readonly telemetryEvents: HttpSubject["telemetryEvents"];
  /** What the object store does itself, where it is not the filesystem's or memory's way. */
  readonly objectStore?: HttpSubject["objectStore"];
  /** Releases what the set opened beside the host (backdoor connections, Redis keys). */
  readonly close?: () => Promise<void>;
}

type Start = (config: HostConfig, clock: ManualClock, dataDir: string) => Promise<Started>;

const subjectMaker =
  (label: string, setEnv: () => Record<string, string>, start: Start): MakeHttpSubject =>
  async (env = {}) => {
    const google = await startFakeGoogle();
    const mail = await startSmtpTestServer();
    const dataDir = await mkdtemp(join(tmpdir(), `vod-http-${label}-`));
    const clock = manualClock(Date.now());
    let started: Started;
    try {
      const config = loadConfig({
        ...testHostEnv(google, dataDir, mail),
        VOD_WORKER_CONCURRENCY: "0",
        ...setEnv(),
        ...env,
      });
      started = await start(config, clock, dataDir);
    } catch (error) {
      await google.close();
      await mail.close();
      await rm(dataDir, { recursive: true, force: true });
      throw error;
    }
    const { host } = started;
    return {
      baseUrl: host.url,
      // A suspension goes through the core's use case, as an operator's does (`vod tenant
      // suspend`): a status written behind the host's back reaches its credential cache only
      // after 60 s.
      backdoor: {
        ...started.backdoor,
        setTenantStatus: (id: string, status: "active" | "suspended") =>
          Effect.runPromise(Effect.asVoid(host.vod.tenants.setStatus(TenantId(id), status))),
      },
      objects: started.objects,
      telemetryEvents: started.telemetryEvents,
      ...(started.objectStore ? { objectStore: started.objectStore } : {}),
      clock,
      google,
      mail,
      cleanup: async () => {
        await started.host.close(1_000);
        await started.close?.();
        await google.close();
        await mail.close();
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  };

/** A host on memory state; objects in memory too unless the config names another store. */
const startOnMemory = async (
  config: HostConfig,
  clock: ManualClock,
  objectStore?: ObjectStore,
  mount?: HostOptions["mount"],
) => {
  const storage = memoryStorage();
  const telemetrySink = memoryTelemetrySink();
  const host = await startHost(config, {
    storage,
    ...(objectStore ? { objectStore } : {}),
    // Without a worker (the default here) enqueued jobs stay in the state, for the backdoor.
    jobQueue: memoryJobQueue(storage, { retryDelayMs: 100 }),
    mediaProcessor: fakeMediaProcessor(),
    imageMaker: fakeImageMaker(),
    revocationStore: memoryRevocationStore(),
    telemetrySink,
    clock,
    ...(mount ? { mount } : {}),
  });
  return {
    host,
    backdoor: memoryBackdoor(storage),
    telemetryEvents: async (sessionId: string) =>
      telemetrySink.events.filter((e) => e.session_id === sessionId),
  };
};

/** Every adapter in memory, the API served as `mount` makes it; the backdoor reads the maps. */
const allInMemory = (label: string, mount?: HostOptions["mount"]): MakeHttpSubject =>
  subjectMaker(
    label,
    () => ({}),
    async (config, clock) => {
      const objectStore = memoryObjectStore();
      return {
        ...(await startOnMemory(config, clock, objectStore, mount)),
        objects: memoryObjectStoreBackdoor(objectStore),
      };
    },
  );

/** Every adapter in memory, the API on the host's own server. */
export const memorySubject = (): MakeHttpSubject => allInMemory("memory");

/** Every adapter in memory, the API mounted inside a Fastify app (`examples/fastify`). */
export const fastifySubject = (): MakeHttpSubject => allInMemory("fastify", inFastify);

/**
 * Memory state, objects in a bucket of the GCS test server: the host composes the store from
 * VOD_OBJECT_STORE=gcs as in production, with Application Default Credentials from
 * GOOGLE_APPLICATION_CREDENTIALS and the service account's HMAC key, so part PUTs go to the
 * bucket on the URLs the store signs with it (GOOG4-HMAC-SHA256).
 * Call it inside the describe block: it starts and stops the test server there.
 */
export const gcsSubject = (): MakeHttpSubject => {
  let server: GcsTestServer;
  beforeAll(async () => {
    server = await createGcsTestServer();
    process.env.GOOGLE_APPLICATION_CREDENTIALS = server.credentialsPath;
  });
  afterAll(async () => {
    delete process.env.GOOGLE_APPLICATION_CREDENTIALS;
    await server.close();
  });
  let prefix = "";
  return subjectMaker(
    "gcs",
    () => {
      prefix = `${uid("h")}/`;
      return {
        VOD_OBJECT_STORE: "gcs",
        VOD_GCS_BUCKET: server.bucket,
        VOD_GCS_PREFIX: prefix,
        VOD_GCS_API_ENDPOINT: server.endpoint,
        // Part URLs signed with the service account's HMAC key, which the server checks.
        VOD_GCS_HMAC_ACCESS_ID: server.hmacKey.accessId,
        VOD_GCS_HMAC_SECRET: server.hmacKey.secret,
      };
    },
    async (config, clock) => ({
      ...(await startOnMemory(config, clock)),
      objects: gcsTestBackdoor(server, config.objects.gcs?.prefix ?? prefix),
      objectStore: { signsPartUrls: true, checksAtCompletion: false },
    }),
  );
};

/** SQL reads of one schema, over a connection of the backdoor's own. */
const postgresReads = (url: string, schema: string) => {
  const db = connectPostgres({ connectionString: url, schema, poolSize: 2 });
  return {
    backdoor: postgresBackdoor(db),
    telemetryEvents: postgresTelemetryBackdoor(db).events,
    close: () => db.close(),
  };
};

/**
 * Server Postgres as production composes it from VOD_DATABASE_URL (pg-boss jobs, filesystem
 * objects read back from the disk), one schema per host, all dropped after the file. With
 * `redisUrl`, Redis too, under a key prefix of each host's own, whose keys are deleted with it.
 * Call it inside the describe block: it registers the schemas' removal there.
 */
export const postgresSubject = (
  url: string,
  options: { readonly redisUrl?: string } = {},
): MakeHttpSubject => {
  const schemas = temporarySchemas(url, "vod_http");
  afterAll(() => schemas.dropAll());
  return subjectMaker(
    options.redisUrl ? "pg-redis" : "pg",
    () => ({
      VOD_DATABASE_URL: url,
      VOD_DATABASE_SCHEMA: schemas.fresh(),
      VOD_DATABASE_POOL_SIZE: "4",
      ...(options.redisUrl
        ? {
            VOD_REDIS_URL: options.redisUrl,
            VOD_REDIS_KEY_PREFIX: `vod_http_${randomBytes(6).toString("hex")}:`,
          }
        : {}),
    }),
    async (config, clock, dataDir) => {
      const host = await startHost(config, {
        clock,
        mediaProcessor: fakeMediaProcessor(),
        imageMaker: fakeImageMaker(),
      });
      const reads = postgresReads(url, config.database.schema ?? "");
      const redisUrl = config.redis.url;
      return {
        host,
        backdoor: reads.backdoor,
        telemetryEvents: reads.telemetryEvents,
        objects: filesystemBackdoor(join(dataDir, "objects")),
        close: async () => {
          await reads.close();
          if (redisUrl === undefined) return;
          const redis = redisBackdoor({ url: redisUrl, keyPrefix: config.redis.keyPrefix });
          try {
            await redis.clear();
          } finally {
            await redis.close();
          }
        },
      };
    },
  );
};

/**
 * The embedded default: no VOD_DATABASE_URL, so PGlite in a process of its own on a data
 * directory (`openDatabase`, as `npm start` opens it), migrated, with pg-boss, the storage,
 * revocations and telemetry over it as the host composes them. The database is opened once per
 * file (it takes seconds) and every host of the file is a node over it, as nodes of one deployment
 * share theirs; the backdoor reads it beside them. Call it inside the describe block.
 */
export const pgliteSubject = (): MakeHttpSubject => {
  let opened: Promise<{ readonly db: SqlDatabase; readonly dir: string }> | undefined;
  const database = () => {
    opened ??= (async () => {
      const dir = await mkdtemp(join(tmpdir(), "vod-http-pglite-db-"));
      const db = await openDatabase(loadConfig({ VOD_DATA_DIR: dir }));
      await migrate(db);
      return { db, dir };
    })();
    return opened;
  };
  afterAll(async () => {
    if (opened === undefined) return;
    const { db, dir } = await opened;
    await db.close();
    await rm(dir, { recursive: true, force: true });
  });
  return subjectMaker(
    "pglite",
    () => ({}),
    async (config, clock, dataDir) => {
      const { db } = await database();
      const boss = await pgBossQueue(db, {
        maxAttempts: config.core.processing.maxAttempts,
        retryDelaySeconds: config.jobs.retryDelaySeconds,
        leaseSeconds: config.jobs.leaseSeconds,
      });
      const host = await startHost(config, {
        storage: postgresStorage(db, { enqueue: boss.enqueueWith, enqueued: boss.wake }),
        jobQueue: boss,
        revocationStore: postgresRevocationStore(db),
        telemetrySink: postgresTelemetrySink(db),
        mediaProcessor: fakeMediaProcessor(),
        imageMaker: fakeImageMaker(),
        clock,
      }).catch(async (error: unknown) => {
        await boss.close();
        throw error;
      });
      return {
        host,
        backdoor: postgresBackdoor(db),
        telemetryEvents: postgresTelemetryBackdoor(db).events,
        objects: filesystemBackdoor(join(dataDir, "objects")),
        close: () => boss.close(),
      };
    },
  );
};

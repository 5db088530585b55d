import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { filesystemBackdoor } from "@vod/adapter-filesystem";
import { manualClock } from "@vod/adapter-memory";
import { connectPostgres, postgresBackdoor } from "@vod/adapter-postgres";
import {
  describeHttpApi,
  startFakeGoogle,
  suiteName,
  temporarySchemas,
  testHostEnv,
  testServices,
} from "@vod/contract-tests";
import { loadConfig, startHost } from "@vod/host-express";
import { Effect } from "effect";
import { afterAll, describe } from "vitest";

// The host composes its storage from VOD_DATABASE_URL exactly as in production; each host gets
// its own schema, and the backdoor reads that schema over a connection of its own. Objects live in
// the filesystem store under VOD_DATA_DIR/objects, read back from the disk. No worker runs, so a
// completed upload's job stays queued in pg-boss, where the backdoor sees it.
const { databaseUrl } = testServices();

describe.skipIf(databaseUrl === null)(
  suiteName("postgres server", databaseUrl !== null, "VOD_TEST_DATABASE_URL"),
  () => {
    const url = databaseUrl ?? "";
    const schemas = temporarySchemas(url, "vod_http");
    afterAll(() => schemas.dropAll());

    describeHttpApi("postgres", async (env = {}) => {
      const schema = schemas.fresh();
      const google = await startFakeGoogle();
      const dataDir = await mkdtemp(join(tmpdir(), "vod-http-pg-"));
      const clock = manualClock(Date.now());
      const host = await startHost(
        loadConfig({
          ...testHostEnv(google, dataDir),
          VOD_DATABASE_URL: url,
          VOD_DATABASE_SCHEMA: schema,
          VOD_DATABASE_POOL_SIZE: "4",
          VOD_WORKER_CONCURRENCY: "0",
          ...env,
        }),
        { clock },
      );
      const db = connectPostgres({ connectionString: url, schema, poolSize: 2 });
      return {
        baseUrl: host.url,
        // A suspension goes through the core's use case, as an operator's does (`vod tenant suspend`):
        // a status written behind the host's back reaches its credential cache only after 60 s.
        backdoor: {
          ...postgresBackdoor(db),
          setTenantStatus: (id: string, status: "active" | "suspended") =>
            Effect.runPromise(Effect.asVoid(host.vod.tenants.setStatus(id, status))),
        },
        objects: filesystemBackdoor(join(dataDir, "objects")),
        clock,
        google,
        cleanup: async () => {
          await host.close(1_000);
          await db.close();
          await google.close();
          await rm(dataDir, { recursive: true, force: true });
        },
      };
    });
  },
);

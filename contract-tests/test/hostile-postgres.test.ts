import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { filesystemBackdoor } from "@vod/adapter-filesystem";
import { manualClock } from "@vod/adapter-memory";
import { connectPostgres, postgresBackdoor } from "@vod/adapter-postgres";
import {
  describeHostileInput,
  fakeMediaProcessor,
  startFakeGoogle,
  suiteName,
  temporarySchemas,
  testHostEnv,
  testServices,
} from "@vod/contract-tests";
import { loadConfig, startHost } from "@vod/host-express";
import { afterAll, describe } from "vitest";

// The server Postgres set as the host composes it in production (pg-boss jobs, filesystem
// objects), with a fake media processor so that ready assets exist.
const { databaseUrl } = testServices();

describe.skipIf(databaseUrl === null)(
  suiteName("postgres server", databaseUrl !== null, "VOD_TEST_DATABASE_URL"),
  () => {
    const url = databaseUrl ?? "";
    const schemas = temporarySchemas(url, "vod_hostile");
    afterAll(() => schemas.dropAll());

    describeHostileInput(
      "postgres",
      async (env = {}) => {
        const schema = schemas.fresh();
        const google = await startFakeGoogle();
        const dataDir = await mkdtemp(join(tmpdir(), "vod-hostile-pg-"));
        const clock = manualClock(Date.now());
        const host = await startHost(
          loadConfig({
            ...testHostEnv(google, dataDir),
            VOD_DATABASE_URL: url,
            VOD_DATABASE_SCHEMA: schema,
            VOD_DATABASE_POOL_SIZE: "4",
            ...env,
          }),
          { clock, mediaProcessor: fakeMediaProcessor() },
        );
        const db = connectPostgres({ connectionString: url, schema, poolSize: 2 });
        return {
          baseUrl: host.url,
          backdoor: postgresBackdoor(db),
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
      },
      { runs: 8 },
    );
  },
);

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { temporarySchemas } from "@vod/adapter-postgres/testing";
import { suiteName, testServices } from "@vod/contract-tests";
import { afterAll, describe } from "vitest";
import { freePort, type Spawned, spawnCli, startMemoryHost, startServe, stop } from "./support.js";

type Service = "database" | "redis";
const variables: Record<Service, string> = {
  database: "VOD_TEST_DATABASE_URL",
  redis: "VOD_TEST_REDIS_URL",
};

/**
 * A suite on the shared services it `needs`: skipped, saying what to set, when one is not
 * configured. Its body gets their URLs.
 */
export const describeWith = (
  needs: ReadonlyArray<Service>,
  name: string,
  body: (urls: { readonly databaseUrl: string; readonly redisUrl: string }) => void,
) => {
  const { databaseUrl, redisUrl } = testServices();
  const urls: Record<Service, string | null> = { database: databaseUrl, redis: redisUrl };
  const available = needs.every((service) => urls[service] !== null);
  describe.skipIf(!available)(
    suiteName(name, available, needs.map((service) => variables[service]).join(" and ")),
    () => body({ databaseUrl: databaseUrl ?? "", redisUrl: redisUrl ?? "" }),
  );
};

/**
 * The processes, hosts and temporary directories a suite makes, undone after it: the processes
 * stopped first (SIGTERM), then the hosts closed and the suite's own clean-ups run, last
 * registered first (a schema must outlive every process on it), then the directories removed.
 */
export const suiteScratch = (dirPrefix: string) => {
  const spawned: Spawned[] = [];
  const dirs: string[] = [];
  const cleanups: Array<() => Promise<unknown>> = [];
  afterAll(async () => {
    await Promise.all(spawned.map((s) => stop(s)));
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
  }, 60_000);
  const track = <S extends Spawned>(s: S) => {
    spawned.push(s);
    return s;
  };
  return {
    /** A new empty directory, removed after the suite. */
    dir: async () => {
      const dir = await mkdtemp(join(tmpdir(), dirPrefix));
      dirs.push(dir);
      return dir;
    },
    /** `vod serve`, healthy, stopped after the suite. */
    serve: async (env: Record<string, string>, port?: number) =>
      track(await startServe(env, port ?? (await freePort()))),
    /** `vod serve` or `vod worker` as it starts, stopped after the suite. */
    spawn: (command: "serve" | "worker", env: Record<string, string>) => track(spawnCli(command, env)),
    /** Temporary schemas on `databaseUrl`, dropped once the processes on them have stopped. */
    schemas: (databaseUrl: string, prefix: string) => {
      const schemas = temporarySchemas(databaseUrl, prefix);
      cleanups.push(() => schemas.dropAll());
      return schemas;
    },
    /** The host in this process on memory storage (see `startMemoryHost`), closed after the suite. */
    memoryHost: async (...args: Parameters<typeof startMemoryHost>) => {
      const host = await startMemoryHost(...args);
      cleanups.push(() => host.close(1_000));
      return host;
    },
    /** Runs after the suite's processes stopped. */
    afterwards: (cleanup: () => Promise<unknown>) => {
      cleanups.push(cleanup);
    },
  };
};

import type { TestProject } from "vitest/node";
import type { TestServices } from "./services.js";

type Stop = () => Promise<unknown>;

/**
 * Containers, when no URL is given and a Docker engine answers. testcontainers is imported only
 * then: without Docker it costs nothing and changes nothing.
 */
const fromContainers = async (need: { postgres: boolean; redis: boolean }) => {
  const found: { databaseUrl?: string; redisUrl?: string; stops: Stop[] } = { stops: [] };
  const { getContainerRuntimeClient } = await import("testcontainers");
  try {
    await getContainerRuntimeClient();
  } catch {
    return found;
  }
  if (need.postgres) {
    const { PostgreSqlContainer } = await import("@testcontainers/postgresql");
    const pg = await new PostgreSqlContainer("postgres:16-alpine").start();
    found.databaseUrl = pg.getConnectionUri();
    found.stops.push(() => pg.stop());
  }
  if (need.redis) {
    const { RedisContainer } = await import("@testcontainers/redis");
    const redis = await new RedisContainer("redis:7-alpine").start();
    found.redisUrl = redis.getConnectionUrl();
    found.stops.push(() => redis.stop());
  }
  return found;
};

/**
 * Decides once, for the whole run, which real services the adapter sets get: the URLs in
 * VOD_TEST_DATABASE_URL / VOD_TEST_REDIS_URL (CI sets them to the machine's own PostgreSQL and
 * Redis), else containers when a Docker engine answers. A suite whose service is absent is
 * reported as skipped, by name.
 */
export default async function setup(project: TestProject) {
  let databaseUrl = process.env.VOD_TEST_DATABASE_URL || null;
  let redisUrl = process.env.VOD_TEST_REDIS_URL || null;
  const sources = {
    postgres: databaseUrl ? "VOD_TEST_DATABASE_URL" : "absent",
    redis: redisUrl ? "VOD_TEST_REDIS_URL" : "absent",
  };
  let stops: Stop[] = [];
  if (!databaseUrl || !redisUrl) {
    const containers = await fromContainers({ postgres: !databaseUrl, redis: !redisUrl });
    stops = containers.stops;
    if (!databaseUrl && containers.databaseUrl) {
      databaseUrl = containers.databaseUrl;
      sources.postgres = "container";
    }
    if (!redisUrl && containers.redisUrl) {
      redisUrl = containers.redisUrl;
      sources.redis = "container";
    }
  }
  const services: TestServices = { databaseUrl, redisUrl };
  const say = (source: string) => (source === "absent" ? "absent, its suites are skipped" : source);
  process.stdout.write(`contract services: postgres ${say(sources.postgres)}; redis ${say(sources.redis)}\n`);
  project.provide("services", services);
  return async () => {
    await Promise.all(stops.map((stop) => stop()));
  };
}

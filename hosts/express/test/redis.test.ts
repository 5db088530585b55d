import { randomBytes } from "node:crypto";
import { redisBackdoor } from "@vod/adapter-redis/testing";
import { expect, it } from "vitest";
import { describeWith, suiteScratch } from "./suites.js";
import { call, freePort, signUp } from "./support.js";

describeWith(["redis"], "two hosts sharing Redis (VOD_REDIS_URL)", ({ redisUrl }) => {
  const prefix = `vod-host-test:${randomBytes(6).toString("hex")}:`;
  const scratch = suiteScratch("vod-redis-");
  scratch.afterwards(async () => {
    const backdoor = redisBackdoor({ url: redisUrl, keyPrefix: prefix });
    await backdoor.clear();
    await backdoor.close();
  });

  /** A host on memory storage, with a data directory of its own. */
  const host = async (env: Record<string, string>) =>
    scratch.serve({
      VOD_DATA_DIR: await scratch.dir(),
      VOD_STORAGE: "memory",
      VOD_LOG_LEVEL: "silent",
      ...env,
    });
  const sharing = {
    VOD_REDIS_URL: redisUrl,
    VOD_REDIS_KEY_PREFIX: prefix,
    VOD_RATE_LIMIT_LOGIN_PER_EMAIL: "3",
  };

  it("counts a rate limit once for both: the login limit per email spans the hosts", async () => {
    const [a, b] = [await host(sharing), await host(sharing)];
    const email = `shared-${randomBytes(4).toString("hex")}@example.com`;
    const login = (url: string) =>
      call(url, "/v1/auth/login", { body: { email, password: "not the password" } });
    expect((await login(a.url)).status).toBe(401);
    expect((await login(b.url)).status).toBe(401);
    expect((await login(a.url)).status).toBe(401);
    // The fourth attempt, on either host, is over the shared limit of 3.
    const limited = await login(b.url);
    expect(limited.status).toBe(429);
    expect(limited.body.code).toBe("rate_limited");
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect((await login(a.url)).status).toBe(429);

    // What Redis holds: the counters, under this deployment's prefix.
    const backdoor = redisBackdoor({ url: redisUrl, keyPrefix: prefix });
    try {
      // Five attempts counted in one place, whichever host took them.
      expect(Object.values(await backdoor.entries("rate:*"))).toContain("5");
    } finally {
      await backdoor.close();
    }
  }, 60_000);

  it("starts without Redis, says so once at warn, and serves: rate limits count per node", async () => {
    // DECISIONS "Redis is an accelerator": a Redis that cannot be reached is no reason to refuse.
    const started = await host({
      VOD_LOG_LEVEL: "info",
      VOD_REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
      VOD_RATE_LIMIT_LOGIN_PER_EMAIL: "2",
    });
    const auth = await signUp(started.url, "no-redis");
    for (let i = 0; i < 3; i++)
      expect((await call(started.url, "/v1/assets", { headers: auth })).status).toBe(200);
    const email = `alone-${randomBytes(4).toString("hex")}@example.com`;
    const login = () =>
      call(started.url, "/v1/auth/login", { body: { email, password: "not the password" } });
    expect((await login()).status).toBe(401);
    expect((await login()).status).toBe(401);
    expect((await login()).status).toBe(429);
    const warned = started
      .output()
      .split("\n")
      .filter((line) => line.includes("Redis unreachable, rate limits per node"));
    expect(warned).toHaveLength(1);
    expect(JSON.parse(warned[0] ?? "{}").level).toBe(40);
  }, 30_000);
});

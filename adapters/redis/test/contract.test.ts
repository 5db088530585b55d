import { randomBytes } from "node:crypto";
import { type RedisBackdoor, redisAdapters, redisBackdoor } from "@vod/adapter-redis";
import {
  describeRateLimiter,
  describeRevocationStore,
  suiteName,
  testServices,
  uid,
} from "@vod/contract-tests";
import { Effect } from "effect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const { redisUrl } = testServices();

/** Each run's keys under a prefix of its own, removed at the end: a shared Redis keeps nothing of it. */
const prefix = `vod-test:${randomBytes(6).toString("hex")}:`;
let backdoor: RedisBackdoor;
const opened: Array<{ close: () => Promise<void> }> = [];
const open = () => {
  const adapters = redisAdapters({ url: redisUrl ?? "", keyPrefix: prefix });
  opened.push(adapters);
  return adapters;
};

describe.skipIf(redisUrl === null)(
  suiteName("redis adapters", redisUrl !== null, "VOD_TEST_REDIS_URL"),
  () => {
    beforeAll(() => {
      backdoor = redisBackdoor({ url: redisUrl ?? "", keyPrefix: prefix });
    });
    afterAll(async () => {
      await Promise.all(opened.map((a) => a.close()));
      await backdoor.clear();
      await backdoor.close();
    });

    describeRateLimiter("redis", async () => ({ limiter: open().rateLimiter, cleanup: async () => {} }));

    describeRevocationStore("redis", async () => ({
      store: open().revocationStore,
      // Another node: a second client of its own.
      otherNode: open().revocationStore,
      cleanup: async () => {},
    }));

    describe("what is stored", () => {
      it("a window's counter, expiring after the window", async () => {
        const { rateLimiter } = open();
        const key = uid("k");
        const now = Date.now();
        const start = Math.floor(now / 60_000) * 60_000;
        for (let i = 0; i < 3; i++)
          await Effect.runPromise(rateLimiter.hit(key, { limit: 5, windowMs: 60_000 }, now));
        const stored = `rate:60000:${start}:${key}`;
        expect(await backdoor.entries(stored)).toEqual({ [stored]: "3" });
        const ttl = await backdoor.ttlMs(stored);
        expect(ttl).toBeGreaterThan(60_000);
        expect(ttl).toBeLessThanOrEqual(120_000);
      });

      it("a revocation's until, kept a margin past it, never lowered", async () => {
        const { revocationStore } = open();
        const session = uid("pbs");
        const until = Date.now() + 3_600_000;
        await Effect.runPromise(revocationStore.revoke(session, until));
        await Effect.runPromise(revocationStore.revoke(session, until - 1_000));
        const stored = `revoked:${session}`;
        expect(await backdoor.entries(stored)).toEqual({ [stored]: String(until) });
        const expiresAt = await backdoor.expiresAt(stored);
        expect(expiresAt).toBe(until + 5 * 60_000);
      });

      it("fails with StorageError, not a hang, when Redis cannot be reached", async () => {
        const unreachable = redisAdapters({ url: "redis://127.0.0.1:1", keyPrefix: prefix });
        opened.push(unreachable);
        const result = await Effect.runPromise(
          Effect.either(unreachable.rateLimiter.hit(uid("k"), { limit: 1, windowMs: 1_000 }, Date.now())),
        );
        expect(result._tag).toBe("Left");
        if (result._tag === "Left") expect(result.left._tag).toBe("StorageError");
      }, 15_000);
    });
  },
);

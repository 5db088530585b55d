import { randomBytes } from "node:crypto";
import { memoryRateLimiter, memoryRevocationStore } from "@vod/adapter-memory";
import { redisAdapters } from "@vod/adapter-redis";
import { type RedisBackdoor, redisBackdoor } from "@vod/adapter-redis/testing";
import {
  describeRateLimiter,
  describeRevocationStore,
  suiteName,
  testServices,
  uid,
} from "@vod/contract-tests";
import { layeredRevocations, type Revocation } from "@vod/core";
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

    // The store as hosts compose it: the store of record, with Redis telling the other nodes.
    describeRevocationStore("store of record + redis feed", async () => {
      const truth = memoryRevocationStore();
      return {
        store: layeredRevocations(truth, open().revocationFeed),
        // Another node: a second client of its own, the same store of record.
        otherNode: layeredRevocations(truth, open().revocationFeed),
        cleanup: async () => {},
      };
    });

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
        // A release takes one back; releasing a key never hit writes nothing.
        await Effect.runPromise(rateLimiter.release(key, { limit: 5, windowMs: 60_000 }, now));
        expect(await backdoor.entries(stored)).toEqual({ [stored]: "2" });
        await Effect.runPromise(rateLimiter.release(uid("k"), { limit: 5, windowMs: 60_000 }, now));
        expect(await backdoor.entries(`rate:60000:${start}:*`)).toEqual({ [stored]: "2" });
        const ttl = await backdoor.ttlMs(stored);
        expect(ttl).toBeGreaterThan(60_000);
        expect(ttl).toBeLessThanOrEqual(120_000);
      });

      it("tells every node of a revocation, and stores nothing: the database is the truth", async () => {
        const [one, other] = [open(), open()];
        const heard: Revocation[] = [];
        other.revocationFeed.watch((revocation) => heard.push(revocation));
        expect(await other.ready()).toBe(true);
        const session = uid("pbs");
        const heardOf = (id: string) => heard.some((r) => r.id === id);
        // The subscription is made in the background: publish until the other node hears.
        for (let i = 0; i < 100 && !heardOf(session); i++) {
          await Effect.runPromise(one.revocationFeed.publish({ kind: "playback_session", id: session }));
          await new Promise((r) => setTimeout(r, 50));
        }
        // Every kind a node caches travels the same channel, and arrives as sent.
        const key = uid("key");
        const tenant = uid("tenant");
        await Effect.runPromise(one.revocationFeed.publish({ kind: "api_key", id: key }));
        await Effect.runPromise(one.revocationFeed.publish({ kind: "tenant", id: tenant }));
        for (let i = 0; i < 100 && !heardOf(tenant); i++) await new Promise((r) => setTimeout(r, 20));
        expect(heard).toContainEqual({ kind: "playback_session", id: session });
        expect(heard).toContainEqual({ kind: "api_key", id: key });
        expect(heard).toContainEqual({ kind: "tenant", id: tenant });
        expect(await backdoor.entries("revoked:*")).toEqual({});
      });

      it("counts on the node's own fallback while Redis cannot be reached, and says so once", async () => {
        const said: Array<[string, string]> = [];
        const log = {
          warn: (_: object, message: string) => said.push(["warn", message]),
          info: (_: object, message: string) => said.push(["info", message]),
        };
        const unreachable = redisAdapters({
          url: "redis://127.0.0.1:1",
          keyPrefix: prefix,
          fallbackRateLimiter: memoryRateLimiter(),
          log,
        });
        opened.push(unreachable);
        expect(await unreachable.ready(500)).toBe(false);
        const rule = { limit: 2, windowMs: 60_000 };
        const key = uid("k");
        const now = Date.now();
        const allowed: boolean[] = [];
        for (let i = 0; i < 3; i++)
          allowed.push((await Effect.runPromise(unreachable.rateLimiter.hit(key, rule, now))).allowed);
        expect(allowed).toEqual([true, true, false]);
        // A release goes to the node's own count too.
        await Effect.runPromise(unreachable.rateLimiter.release(key, rule, now));
        await Effect.runPromise(unreachable.rateLimiter.release(key, rule, now));
        expect(await Effect.runPromise(unreachable.rateLimiter.hit(key, rule, now))).toEqual({
          allowed: true,
          remaining: 0,
        });
        // A revocation's message is dropped, not an error: the database has the revocation.
        await Effect.runPromise(unreachable.revocationFeed.publish({ kind: "api_key", id: uid("key") }));
        expect(unreachable.health()).toEqual({ connected: false, outages: 1, fallbackHits: 4 });
        expect(said).toEqual([["warn", "Redis unreachable, rate limits per node"]]);
      }, 15_000);

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

import type { RateLimiter, RevocationStore } from "@vod/core";
import { StorageError } from "@vod/core";
import { Effect } from "effect";
import { Redis } from "ioredis";

export interface RedisConfig {
  /** `redis://[user:password@]host:port[/db]` or `rediss://` for TLS (Memorystore with in-transit encryption). */
  readonly url: string;
  /** Put before every key, so that several deployments (or test runs) can share one Redis. Default "vod:". */
  readonly keyPrefix?: string;
}

export interface RedisAdapters {
  readonly rateLimiter: RateLimiter;
  readonly revocationStore: RevocationStore;
  /** Waits for the connection (and says so when it cannot be made); the ports connect lazily otherwise. */
  readonly ready: () => Promise<void>;
  readonly close: () => Promise<void>;
}

/** One hit on a fixed window's counter: the count, and the window's key expires after the window. */
const HIT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count`;

/**
 * A revocation's `until` only grows, and the key lives until then, plus a margin: `until` comes from
 * the nodes' clocks, the expiry from Redis's, and a revocation must not be forgotten early.
 */
const REVOKE = `
local current = tonumber(redis.call('GET', KEYS[1]))
local untilMs = tonumber(ARGV[1])
if current == nil or current < untilMs then
  redis.call('SET', KEYS[1], ARGV[1], 'PXAT', untilMs + tonumber(ARGV[2]))
end
return 1`;

/** How long past `until` a revocation is kept, for clock differences between nodes and Redis. */
const CLOCK_MARGIN_MS = 5 * 60_000;

/**
 * The ports every node of a cluster must share: rate limits counted once for all nodes, and
 * revoked playback sessions seen by every node at once. Each operation is one Lua script, atomic
 * in Redis, so concurrent hits and revocations from any number of nodes are counted exactly.
 */
export const redisAdapters = (config: RedisConfig): RedisAdapters => {
  const prefix = config.keyPrefix ?? "vod:";
  const client = new Redis(config.url, {
    lazyConnect: true,
    // Fail a command fast while Redis is down (a 503 to the caller), rather than queue it unboundedly.
    maxRetriesPerRequest: 2,
    enableOfflineQueue: true,
  });
  // Connection errors surface on the commands that need the connection; without a listener
  // ioredis would also print each one.
  client.on("error", () => undefined);
  client.defineCommand("vodHit", { numberOfKeys: 1, lua: HIT });
  client.defineCommand("vodRevoke", { numberOfKeys: 1, lua: REVOKE });
  const scripts = client as unknown as {
    vodHit(key: string, ttlMs: number): Promise<number>;
    vodRevoke(key: string, until: number, marginMs: number): Promise<number>;
  };
  const run = <A>(what: string, command: () => Promise<A>) =>
    Effect.tryPromise({
      try: command,
      catch: (cause) => new StorageError({ message: `redis: ${what} failed`, cause }),
    });

  const rateLimiter: RateLimiter = {
    hit: (key, rule, now) => {
      const start = Math.floor(now / rule.windowMs) * rule.windowMs;
      const end = start + rule.windowMs;
      // The window's key outlives the window by one more window, whatever the clocks say.
      const ttlMs = end - now + rule.windowMs;
      return Effect.map(
        run("counting a hit", () => scripts.vodHit(`${prefix}rate:${rule.windowMs}:${start}:${key}`, ttlMs)),
        (count) =>
          count <= rule.limit
            ? { allowed: true as const, remaining: rule.limit - count }
            : { allowed: false as const, retryAfterMs: end - now },
      );
    },
  };

  const revocationKey = (sessionId: string) => `${prefix}revoked:${sessionId}`;
  const revocationStore: RevocationStore = {
    revoke: (sessionId, until) =>
      Effect.asVoid(
        run("revoking a session", () => scripts.vodRevoke(revocationKey(sessionId), until, CLOCK_MARGIN_MS)),
      ),
    isRevoked: (sessionId, now) =>
      Effect.map(
        run("reading a revocation", () => client.get(revocationKey(sessionId))),
        (until) => (until === null ? false : Number(until) > now),
      ),
  };

  return {
    rateLimiter,
    revocationStore,
    ready: async () => {
      if (client.status === "wait") await client.connect();
      await client.ping();
    },
    close: async () => {
      if (client.status === "end") return;
      await client.quit().catch(() => client.disconnect());
    },
  };
};

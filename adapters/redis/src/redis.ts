import type { RateDecision, RateLimiter, RateRule, Revocation, RevocationFeed } from "@vod/core";
import { StorageError } from "@vod/core";
import { Effect } from "effect";
import { Redis } from "ioredis";

/** The least of a logger (pino's shape) the adapter reports Redis's comings and goings to. */
export interface DependencyLog {
  warn(details: object, message: string): void;
  info(details: object, message: string): void;
}

export interface RedisConfig {
  /** `redis://[user:password@]host:port[/db]` or `rediss://` for TLS (Memorystore with in-transit encryption). */
  readonly url: string;
  /** Put before every key, so that several deployments (or test runs) can share one Redis. Default "vod:". */
  readonly keyPrefix?: string;
  /**
   * Counts while Redis cannot be reached: this node's own memory, so the API keeps serving with
   * limits per node until Redis is back. Without one, a hit then fails with StorageError.
   */
  readonly fallbackRateLimiter?: RateLimiter;
  /** Told once per outage (warn) and when Redis is back (info). */
  readonly log?: DependencyLog;
  /** How long one command may take before it counts as failed (default 1,000 ms). */
  readonly commandTimeoutMs?: number;
}

/** What the adapter has seen of Redis, for logs and the metrics endpoint. */
export interface RedisHealth {
  /** Redis answers: rate limits are shared. */
  readonly connected: boolean;
  /** Outages seen since start (a start without Redis counts as one). */
  readonly outages: number;
  /** Rate-limit hits counted by the node's fallback instead of Redis. */
  readonly fallbackHits: number;
}

export interface RedisAdapters {
  readonly rateLimiter: RateLimiter;
  /** Revocations published to every node at once (pub/sub); the database stays their truth. */
  readonly revocationFeed: RevocationFeed;
  /** Resolves true once Redis answers, false when it has not within `timeoutMs`: the ports work either way. */
  readonly ready: (timeoutMs?: number) => Promise<boolean>;
  readonly health: () => RedisHealth;
  /** Resolves once Redis answers a PING; rejects at once while it is away, after the command timeout when it hangs. */
  readonly ping: () => Promise<void>;
  readonly close: () => Promise<void>;
}

/** One hit on a fixed window's counter: the count, and the window's key expires after the window. */
const HIT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count`;

/** One hit taken back from a window's counter, never below zero (an expired window stays gone). */
const RELEASE = `
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if count > 0 then return redis.call('DECR', KEYS[1]) end
return 0`;

const OUTAGE = "Redis unreachable, rate limits per node";

const KINDS: ReadonlySet<string> = new Set<Revocation["kind"]>([
  "playback_session",
  "api_key",
  "refresh_session",
  "user",
  "tenant",
]);

/** `<kind> <id>` on the channel: ids have no spaces. */
const encodeRevocation = (revocation: Revocation) => `${revocation.kind} ${revocation.id}`;

/** The revocation a message says, or undefined for one this version does not know. */
const decodeRevocation = (message: string): Revocation | undefined => {
  const space = message.indexOf(" ");
  const kind = message.slice(0, space);
  const id = message.slice(space + 1);
  return space > 0 && id.length > 0 && KINDS.has(kind) ? ({ kind, id } as Revocation) : undefined;
};

/**
 * Redis as an accelerator (DECISIONS "Redis is an accelerator, Postgres the truth"): one count
 * per rate limit for all nodes (one Lua script per hit, atomic, so concurrent hits from any
 * number of nodes are counted exactly), and revocations told to every node at once. Nothing here
 * is the truth of anything: while Redis is away, rate limits count per node and revocations
 * reach nodes through the database, and a Redis that comes back empty loses nothing that matters.
 */
export const redisAdapters = (config: RedisConfig): RedisAdapters => {
  const prefix = config.keyPrefix ?? "vod:";
  const channel = `${prefix}revoked`;
  const client = new Redis(config.url, {
    // A command while Redis is away fails at once (the node then counts alone) instead of
    // waiting in a queue; one to a Redis that hangs fails after the timeout.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: config.commandTimeoutMs ?? 1_000,
    // The rate limit's count of every request served in one turn of the event loop leaves in one
    // write (ioredis' own pipelining), not one each.
    enableAutoPipelining: true,
  });
  let state: "connecting" | "up" | "down" = "connecting";
  let outages = 0;
  let fallbackHits = 0;
  let probe: NodeJS.Timeout | undefined;
  let closing = false;
  const up = () => {
    if (probe) clearInterval(probe);
    probe = undefined;
    if (state === "down") config.log?.info({}, "Redis back");
    state = "up";
  };
  const down = (error: unknown) => {
    if (state === "down" || closing) return;
    state = "down";
    outages += 1;
    config.log?.warn({ err: error }, OUTAGE);
    // A Redis that stopped answering without closing the connection sends no "ready" when it
    // recovers: ask it now and then.
    probe = setInterval(() => {
      if (client.status === "ready") client.ping().then(up, () => undefined);
    }, 1_000);
    probe.unref();
  };
  client.on("ready", up);
  client.on("error", down);
  client.on("close", () => {
    if (state === "up") down(new Error("connection to Redis closed"));
  });
  const ready = (timeoutMs = 2_000) =>
    usable()
      ? Promise.resolve(true)
      : new Promise<boolean>((resolve) => {
          const done = (answer: boolean) => {
            clearTimeout(timer);
            client.off("ready", onReady);
            resolve(answer);
          };
          const onReady = () => done(true);
          const timer = setTimeout(() => done(false), timeoutMs);
          client.on("ready", onReady);
        });
  client.defineCommand("vodHit", { numberOfKeys: 1, lua: HIT });
  client.defineCommand("vodRelease", { numberOfKeys: 1, lua: RELEASE });
  const scripts = client as unknown as {
    vodHit(key: string, ttlMs: number): Promise<number>;
    vodRelease(key: string): Promise<number>;
  };
  const usable = () => state === "up" && client.status === "ready";

  const windowOf = (key: string, rule: RateRule, now: number) => {
    const start = Math.floor(now / rule.windowMs) * rule.windowMs;
    return { id: `${prefix}rate:${rule.windowMs}:${start}:${key}`, end: start + rule.windowMs };
  };
  const decision = (count: number, rule: RateRule, end: number, now: number): RateDecision =>
    count <= rule.limit
      ? { allowed: true, remaining: rule.limit - count }
      : { allowed: false, retryAfterMs: end - now };
  const sharedHit: RateLimiter["hit"] = (key, rule, now) => {
    const { id, end } = windowOf(key, rule, now);
    // The window's key outlives the window by one more window, whatever the clocks say.
    const ttlMs = end - now + rule.windowMs;
    return Effect.map(
      Effect.tryPromise({
        try: () => scripts.vodHit(id, ttlMs),
        catch: (cause) => new StorageError({ message: "redis: counting a hit failed", cause }),
      }),
      (count) => decision(count, rule, end, now),
    );
  };
  const sharedRelease: RateLimiter["release"] = (key, rule, at) =>
    Effect.asVoid(
      Effect.tryPromise({
        try: () => scripts.vodRelease(windowOf(key, rule, at).id),
        catch: (cause) => new StorageError({ message: "redis: releasing a hit failed", cause }),
      }),
    );
  const fallback = config.fallbackRateLimiter;
  const commandTimeoutMs = config.commandTimeoutMs ?? 1_000;
  // The first connection is waited for (a command would fail before it is made); after that, a
  // Redis that is away is not waited for.
  const connected = Effect.suspend(() =>
    state === "connecting" ? Effect.promise(() => ready(commandTimeoutMs)) : Effect.void,
  );
  /** Redis's answer while it has one, else the node's own (a release is not counted as a fallback hit). */
  const orFallback =
    <A>(
      shared: (key: string, rule: RateRule, now: number) => Effect.Effect<A, StorageError>,
      local: (
        fallback: RateLimiter,
      ) => (key: string, rule: RateRule, now: number) => Effect.Effect<A, StorageError>,
    ) =>
    (key: string, rule: RateRule, now: number): Effect.Effect<A, StorageError> =>
      Effect.zipRight(
        connected,
        Effect.suspend(() => {
          if (!fallback) return shared(key, rule, now);
          const alone = Effect.suspend(() => local(fallback)(key, rule, now));
          if (!usable()) return alone;
          return Effect.catchAll(shared(key, rule, now), (error) => {
            down(error.cause);
            return alone;
          });
        }),
      );
  const rateLimiter: RateLimiter = {
    hit: orFallback(sharedHit, (node) => (key, rule, now) => {
      fallbackHits += 1;
      return node.hit(key, rule, now);
    }),
    release: orFallback(sharedRelease, (node) => node.release),
  };

  const listeners = new Set<(revocation: Revocation) => void>();
  let subscriber: Redis | undefined;
  const revocationFeed: RevocationFeed = {
    publish: (revocation) =>
      Effect.promise(async () => {
        if (!usable()) return;
        // Lost with Redis: the other nodes learn from the database when their cache entry expires.
        await client.publish(channel, encodeRevocation(revocation)).catch(down);
      }),
    watch: (listener) => {
      listeners.add(listener);
      if (subscriber) return;
      // A connection of its own (a subscribed one takes no other command), subscribed again by
      // ioredis after every reconnection.
      subscriber = client.duplicate({ enableOfflineQueue: true, commandTimeout: undefined });
      subscriber.on("error", () => undefined);
      subscriber.on("message", (_channel: string, message: string) => {
        const revocation = decodeRevocation(message);
        if (revocation) for (const each of listeners) each(revocation);
      });
      subscriber.subscribe(channel).catch(() => undefined);
    },
  };

  return {
    rateLimiter,
    revocationFeed,
    ready,
    health: () => ({ connected: usable(), outages, fallbackHits }),
    ping: () => client.ping().then(() => undefined),
    close: async () => {
      closing = true;
      if (probe) clearInterval(probe);
      const quit = (redis: Redis) =>
        redis.status === "end"
          ? Promise.resolve()
          : redis.quit().then(
              () => undefined,
              () => redis.disconnect(),
            );
      await Promise.all([quit(client), ...(subscriber ? [quit(subscriber)] : [])]);
    },
  };
};

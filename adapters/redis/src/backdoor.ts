import { Redis } from "ioredis";

/**
 * Reads what the adapters stored, straight from Redis, for tests that check the stored state and
 * not only what the ports answer; `clear` removes every key under the prefix.
 */
export const redisBackdoor = (config: { readonly url: string; readonly keyPrefix: string }) => {
  const client = new Redis(config.url);
  const keys = (pattern: string) => client.keys(`${config.keyPrefix}${pattern}`);
  return {
    /** Keys under the prefix matching `pattern` (a Redis glob after the prefix), with their values. */
    entries: async (pattern: string): Promise<Record<string, string | null>> => {
      const found = await keys(pattern);
      const values = await Promise.all(found.map((key) => client.get(key)));
      return Object.fromEntries(
        found.map((key, i) => [key.slice(config.keyPrefix.length), values[i] ?? null]),
      );
    },
    /** Milliseconds the key (after the prefix) has left; -1 without expiry, -2 when absent. */
    ttlMs: (key: string) => client.pttl(`${config.keyPrefix}${key}`),
    /** When the key (after the prefix) expires, in Unix milliseconds. */
    expiresAt: (key: string) => client.pexpiretime(`${config.keyPrefix}${key}`),
    clear: async () => {
      const found = await keys("*");
      if (found.length > 0) await client.del(...found);
    },
    close: async () => {
      await client.quit();
    },
  };
};

export type RedisBackdoor = ReturnType<typeof redisBackdoor>;

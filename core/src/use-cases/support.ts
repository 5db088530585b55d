import { createHmac, hash, timingSafeEqual } from "node:crypto";
import { Effect, Option } from "effect";
import { Conflict, NotFound, RateLimited, StorageError } from "../errors.js";
import type { Ids } from "../ports/ids.js";
import type { RateLimiter, RateRule } from "../ports/rate-limiter.js";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz";

/** Uniform random characters from `alphabet` by rejection sampling (no modulo bias). */
const randomString = (ids: Ids, alphabet: string, length: number): string => {
  const limit = 256 - (256 % alphabet.length);
  let out = "";
  while (out.length < length) {
    for (const byte of ids.randomBytes(length * 2)) {
      if (byte < limit) out += alphabet[byte % alphabet.length];
      if (out.length === length) break;
    }
  }
  return out;
};

export const randomBase62 = (ids: Ids, length: number) => randomString(ids, BASE62, length);
export const randomBase36 = (ids: Ids, length: number) => randomString(ids, BASE36, length);

// One-shot: every API-key request hashes its key, and a Hash object per call was a visible cost.
export const sha256Hex = (value: string): string => hash("sha256", value, "hex");

export const hmacBase64Url = (key: Uint8Array, value: string): string =>
  createHmac("sha256", key).update(value).digest("base64url");

export const constantTimeEqual = (a: string, b: string): boolean => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

/** A create past one of the tenant's quotas (`VodConfig.quotas`): 409, `details.reason: "quota_exceeded"`. */
export const quotaExceeded = (message: string, limit: number) =>
  new Conflict({ message, details: { reason: "quota_exceeded", limit } });

/** The value of an Option, or NotFound naming what was looked for. */
export const orNotFound =
  (what: string) =>
  <A, E, R>(self: Effect.Effect<Option.Option<A>, E, R>): Effect.Effect<A, E | NotFound, R> =>
    Effect.flatMap(
      self,
      Option.match({
        onNone: () => Effect.fail(new NotFound({ message: `${what} not found` })),
        onSome: Effect.succeed,
      }),
    );

/** Records a hit and fails with RateLimited (carrying the seconds to wait) when over the rule. */
export const enforceRate = (
  limiter: RateLimiter,
  key: string,
  rule: RateRule,
  now: number,
): Effect.Effect<void, RateLimited | StorageError> =>
  Effect.flatMap(limiter.hit(key, rule, now), (decision) =>
    decision.allowed ? Effect.void : Effect.fail(rateLimited(decision.retryAfterMs)),
  );

/**
 * The one per-client-IP bucket of every unauthenticated auth route (signup, login, google,
 * refresh, and the account-mail routes): one count, whichever route spends it.
 */
export const limitAuthByIp = (
  { rateLimiter, clock }: { readonly rateLimiter: RateLimiter; readonly clock: { now(): number } },
  config: { readonly rateLimits: { readonly authPerIpPerMinute: number } },
  clientIp: string,
) =>
  enforceRate(
    rateLimiter,
    `auth:ip:${clientIp}`,
    { limit: config.rateLimits.authPerIpPerMinute, windowMs: 60_000 },
    clock.now(),
  );

/** RateLimited with the wait in whole seconds, at least one. */
export const rateLimited = (retryAfterMs: number) =>
  new RateLimited({
    message: "too many requests; retry later",
    retryAfterSeconds: Math.max(1, Math.ceil(retryAfterMs / 1000)),
  });

/** A stored object's bytes as UTF-8 text (a playlist). */
export const readText = (stream: AsyncIterable<Uint8Array>) =>
  Effect.tryPromise({
    try: async () => {
      const chunks: Uint8Array[] = [];
      for await (const chunk of stream) chunks.push(chunk);
      return Buffer.concat(chunks).toString("utf8");
    },
    catch: (cause) => new StorageError({ message: "could not read a stored object", cause }),
  });

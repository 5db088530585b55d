import type { RateLimiter } from "@vod/core";
import { Effect } from "effect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { uid } from "./fixtures.js";

export interface RateLimiterSubject {
  readonly limiter: RateLimiter;
  readonly cleanup: () => Promise<void>;
}

const hit = (limiter: RateLimiter, key: string, limit: number, now: number, windowMs = 60_000) =>
  Effect.runPromise(limiter.hit(key, { limit, windowMs }, now));

const peek = (limiter: RateLimiter, key: string, limit: number, now: number, windowMs = 60_000) =>
  Effect.runPromise(limiter.peek(key, { limit, windowMs }, now));

export const describeRateLimiter = (name: string, makeSubject: () => Promise<RateLimiterSubject>) =>
  describe(`RateLimiter [${name}]`, () => {
    let subject: RateLimiterSubject;
    beforeEach(async () => {
      subject = await makeSubject();
    });
    afterEach(async () => subject.cleanup());
    const start = 1_800_000_000_000; // on a minute boundary

    it("allows up to the limit in a window, then says how long to wait", async () => {
      const key = uid("k");
      expect(await hit(subject.limiter, key, 2, start)).toEqual({ allowed: true, remaining: 1 });
      expect(await hit(subject.limiter, key, 2, start + 1)).toEqual({ allowed: true, remaining: 0 });
      expect(await hit(subject.limiter, key, 2, start + 15_000)).toEqual({
        allowed: false,
        retryAfterMs: 45_000,
      });
    });

    it("starts afresh in the next window", async () => {
      const key = uid("k");
      await hit(subject.limiter, key, 1, start);
      expect((await hit(subject.limiter, key, 1, start + 10)).allowed).toBe(false);
      expect((await hit(subject.limiter, key, 1, start + 60_000)).allowed).toBe(true);
    });

    it("counts keys and window lengths apart", async () => {
      const key = uid("k");
      await hit(subject.limiter, key, 1, start);
      expect((await hit(subject.limiter, uid("other"), 1, start)).allowed).toBe(true);
      expect((await hit(subject.limiter, key, 1, start, 900_000)).allowed).toBe(true);
    });

    it("counts concurrent hits exactly", async () => {
      const key = uid("k");
      const results = await Promise.all(
        Array.from({ length: 20 }, () => hit(subject.limiter, key, 5, start)),
      );
      expect(results.filter((r) => r.allowed)).toHaveLength(5);
    });

    it("peeks at what one more hit would get, without counting one", async () => {
      const key = uid("k");
      expect(await peek(subject.limiter, key, 2, start)).toEqual({ allowed: true, remaining: 1 });
      expect(await peek(subject.limiter, key, 2, start)).toEqual({ allowed: true, remaining: 1 });
      expect(await hit(subject.limiter, key, 2, start)).toEqual({ allowed: true, remaining: 1 });
      expect(await peek(subject.limiter, key, 2, start + 1)).toEqual({ allowed: true, remaining: 0 });
      expect(await hit(subject.limiter, key, 2, start + 1)).toEqual({ allowed: true, remaining: 0 });
      expect(await peek(subject.limiter, key, 2, start + 15_000)).toEqual({
        allowed: false,
        retryAfterMs: 45_000,
      });
      // The hit answers as the peek said.
      expect((await hit(subject.limiter, key, 2, start + 15_000)).allowed).toBe(false);
      expect(await peek(subject.limiter, key, 2, start + 60_000)).toEqual({ allowed: true, remaining: 1 });
      expect(await peek(subject.limiter, uid("other"), 1, start)).toEqual({ allowed: true, remaining: 0 });
      expect((await peek(subject.limiter, key, 1, start, 900_000)).allowed).toBe(true);
    });
  });

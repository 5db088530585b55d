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

const release = (limiter: RateLimiter, key: string, limit: number, at: number, windowMs = 60_000) =>
  Effect.runPromise(limiter.release(key, { limit, windowMs }, at));

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

    it("takes back a released hit, in the window it was counted in, never below zero", async () => {
      const key = uid("k");
      expect(await hit(subject.limiter, key, 2, start)).toEqual({ allowed: true, remaining: 1 });
      expect(await hit(subject.limiter, key, 2, start + 1)).toEqual({ allowed: true, remaining: 0 });
      await release(subject.limiter, key, 2, start + 1);
      expect(await hit(subject.limiter, key, 2, start + 2)).toEqual({ allowed: true, remaining: 0 });
      expect((await hit(subject.limiter, key, 2, start + 3)).allowed).toBe(false);
      // A hit of the last window released in the next one changes nothing of the new window.
      await hit(subject.limiter, key, 2, start + 60_000);
      await release(subject.limiter, key, 2, start + 59_999);
      expect(await hit(subject.limiter, key, 2, start + 60_001)).toEqual({ allowed: true, remaining: 0 });
      // Never below zero: releasing what was never hit grants nothing extra.
      const fresh = uid("k");
      for (let i = 0; i < 3; i++) await release(subject.limiter, fresh, 1, start);
      expect(await hit(subject.limiter, fresh, 1, start)).toEqual({ allowed: true, remaining: 0 });
      expect((await hit(subject.limiter, fresh, 1, start)).allowed).toBe(false);
    });

    it("counts concurrent hits and releases exactly", async () => {
      const key = uid("k");
      for (let i = 0; i < 5; i++) await hit(subject.limiter, key, 5, start);
      await Promise.all(Array.from({ length: 3 }, () => release(subject.limiter, key, 5, start)));
      const results = await Promise.all(
        Array.from({ length: 10 }, () => hit(subject.limiter, key, 5, start)),
      );
      expect(results.filter((r) => r.allowed)).toHaveLength(3);
    });
  });

import type { RateDecision, RateLimiter, RateRule } from "@vod/core";
import { Effect } from "effect";

/** Fixed-window counters in process memory: right for one process, or tests. */
export const memoryRateLimiter = (): RateLimiter => {
  const windows = new Map<string, { start: number; count: number }>();
  let lastSweep = 0;
  const decision = (count: number, start: number, rule: RateRule, now: number): RateDecision =>
    count <= rule.limit
      ? { allowed: true, remaining: rule.limit - count }
      : { allowed: false, retryAfterMs: start + rule.windowMs - now };
  return {
    hit: (key, rule, now) =>
      Effect.sync(() => {
        // Drop finished windows now and then, so idle keys do not pile up.
        if (now - lastSweep > 60_000) {
          lastSweep = now;
          for (const [k, w] of windows) if (w.start + 24 * 3_600_000 < now) windows.delete(k);
        }
        const start = Math.floor(now / rule.windowMs) * rule.windowMs;
        const id = `${rule.windowMs}:${key}`;
        const current = windows.get(id);
        const window = current && current.start === start ? current : { start, count: 0 };
        window.count += 1;
        windows.set(id, window);
        return decision(window.count, start, rule, now);
      }),
    release: (key, rule, at) =>
      Effect.sync(() => {
        const start = Math.floor(at / rule.windowMs) * rule.windowMs;
        const current = windows.get(`${rule.windowMs}:${key}`);
        if (current && current.start === start && current.count > 0) current.count -= 1;
      }),
  };
};

import type { Effect } from "effect";
import type { StorageError } from "../errors.js";

export interface RateRule {
  readonly limit: number;
  readonly windowMs: number;
}

export type RateDecision =
  | { readonly allowed: true; readonly remaining: number }
  | { readonly allowed: false; readonly retryAfterMs: number };

/**
 * Counts hits per key in fixed windows. `now` comes from the caller's clock so that every node
 * of a cluster, and every test, agrees on window boundaries.
 */
export interface RateLimiter {
  /** Records one hit on `key` and says whether it is within `rule`. Atomic per key. */
  hit(key: string, rule: RateRule, now: number): Effect.Effect<RateDecision, StorageError>;
  /**
   * Says whether one more hit on `key` would be within `rule`, without counting one: for limits
   * that count only some outcomes (failed logins), checked before the work whose outcome is counted.
   */
  peek(key: string, rule: RateRule, now: number): Effect.Effect<RateDecision, StorageError>;
}

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
   * Takes back one hit on `key` counted at `at` (the `now` its hit was given), never below zero:
   * for limits that count only some outcomes (failed logins). The work is reserved with a hit
   * first, so that concurrent attempts cannot all pass a check before any is counted, and the hit
   * is released when the outcome is not one that counts. Atomic per key.
   */
  release(key: string, rule: RateRule, at: number): Effect.Effect<void, StorageError>;
}

/**
 * Where the core reads the time. Synchronous on purpose: reading a clock cannot fail, and it sits on
 * every hot path. Tests pass a clock they move by hand, so expiry is tested without sleeping.
 */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
}

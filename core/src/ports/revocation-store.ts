import type { Effect } from "effect";
import type { StorageError } from "../errors.js";

/**
 * Ended playback sessions, shared by every node that serves media, entitlements or telemetry.
 * An entry may be forgotten once `until` has passed: the session's tokens have expired by then.
 * The store is the truth: a session it does not know of is not revoked.
 */
export interface RevocationStore {
  revoke(sessionId: string, until: number): Effect.Effect<void, StorageError>;
  isRevoked(sessionId: string, now: number): Effect.Effect<boolean, StorageError>;
  /**
   * Calls `listener` when any node revokes a session, as soon as this store hears of it (a
   * store with a feed: see RevocationFeed). Nodes' caches use it to refuse at once instead of
   * at their next look-up. Absent: caches learn at their next look-up.
   */
  watch?(listener: (sessionId: string) => void): void;
}

/**
 * Tells every node of a revocation at once (publish/subscribe), never the truth: a message may be
 * lost (the feed down, a node reconnecting), and a node that missed it learns from the store at
 * its next look-up. So `publish` never fails a revocation.
 */
export interface RevocationFeed {
  publish(sessionId: string): Effect.Effect<void>;
  watch(listener: (sessionId: string) => void): void;
}

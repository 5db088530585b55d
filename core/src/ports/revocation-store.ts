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
 * What a node may have cached and must drop: a playback session ended, an API key revoked, a
 * refresh session (token family) ended, every session of a user ended or the user changed (a
 * password change, a verified email), a tenant whose status changed.
 */
export type Revocation =
  | { readonly kind: "playback_session"; readonly id: string }
  | { readonly kind: "api_key"; readonly id: string }
  | { readonly kind: "refresh_session"; readonly id: string }
  | { readonly kind: "user"; readonly id: string }
  | { readonly kind: "tenant"; readonly id: string };

/**
 * Tells every node of a revocation at once (publish/subscribe), never the truth: a message may be
 * lost (the feed down, a node reconnecting), and a node that missed it learns from the store at
 * its next look-up (every cache entry has a bounded life). So `publish` never fails a revocation.
 * A node may hear its own publications too.
 */
export interface RevocationFeed {
  publish(revocation: Revocation): Effect.Effect<void>;
  watch(listener: (revocation: Revocation) => void): void;
}

import type { Effect } from "effect";
import type { StorageError } from "../errors.js";

/**
 * Ended playback sessions, shared by every node that serves media, entitlements or telemetry.
 * An entry may be forgotten once `until` has passed: the session's tokens have expired by then.
 */
export interface RevocationStore {
  revoke(sessionId: string, until: number): Effect.Effect<void, StorageError>;
  isRevoked(sessionId: string, now: number): Effect.Effect<boolean, StorageError>;
}

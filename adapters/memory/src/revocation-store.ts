import type { RevocationStore } from "@vod/core";
import { Effect } from "effect";

/**
 * Revoked playback sessions in process memory: the shared truth only when one process serves
 * everything (tests, embedding). Entries whose `until` has passed are forgotten lazily.
 */
export const memoryRevocationStore = (): RevocationStore => {
  const untilBySession = new Map<string, number>();
  let lastSweep = Number.NEGATIVE_INFINITY;
  return {
    revoke: (sessionId, until) =>
      Effect.sync(() => {
        const current = untilBySession.get(sessionId);
        untilBySession.set(sessionId, current === undefined ? until : Math.max(current, until));
      }),
    isRevoked: (sessionId, now) =>
      Effect.sync(() => {
        // Sweep now and then by the caller's clock, so sessions nobody asks about again do not pile up.
        if (now - lastSweep > 60_000) {
          lastSweep = now;
          for (const [id, until] of untilBySession) if (until <= now) untilBySession.delete(id);
        }
        const until = untilBySession.get(sessionId);
        return until !== undefined && until > now;
      }),
  };
};

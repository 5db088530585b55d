import { Effect } from "effect";
import type { Clock } from "../ports/clock.js";
import type { RevocationStore } from "../ports/revocation-store.js";

/**
 * A local cache in front of the shared revocation store: an answer is reused for at most
 * `maxAgeMs`, so a revocation reaches this node within that time (DECISIONS: cache no older than
 * 60 s, revocation everywhere within 120 s), while hot paths ask the store about once a minute
 * per session instead of once per segment.
 */
export const cachedRevocations = (
  store: RevocationStore,
  clock: Clock,
  maxAgeMs = 60_000,
): RevocationStore => {
  const answers = new Map<string, { revoked: boolean; at: number }>();
  let lastSweep = 0;
  return {
    revoke: (sessionId, until) =>
      Effect.tap(store.revoke(sessionId, until), () =>
        Effect.sync(() => answers.set(sessionId, { revoked: true, at: clock.now() })),
      ),
    isRevoked: (sessionId, now) => {
      if (now - lastSweep > maxAgeMs) {
        lastSweep = now;
        for (const [id, answer] of answers) if (now - answer.at >= maxAgeMs) answers.delete(id);
      }
      const cached = answers.get(sessionId);
      if (cached && now - cached.at < maxAgeMs) return Effect.succeed(cached.revoked);
      return Effect.tap(store.isRevoked(sessionId, now), (revoked) =>
        Effect.sync(() => answers.set(sessionId, { revoked, at: now })),
      );
    },
  };
};

import { Effect } from "effect";
import type { Clock } from "../ports/clock.js";
import type { Revocation, RevocationFeed, RevocationStore } from "../ports/revocation-store.js";

/**
 * The store of record with a feed in front: a revocation is written to the store first (it fails
 * when that fails: nothing is acknowledged that is not stored), then published. Look-ups read the
 * store only. A feed's "not revoked" means nothing: it restarts empty, fails over, loses messages.
 */
export const layeredRevocations = (truth: RevocationStore, feed: RevocationFeed): RevocationStore => ({
  revoke: (sessionId, until) =>
    Effect.zipRight(
      truth.revoke(sessionId, until),
      feed.publish({ kind: "playback_session", id: sessionId }),
    ),
  isRevoked: (sessionId, now) => truth.isRevoked(sessionId, now),
  watch: (listener) =>
    feed.watch((revocation) => {
      if (revocation.kind === "playback_session") listener(revocation.id);
    }),
});

/**
 * The feed of a process on its own (one node, the embedded default, tests): what is published
 * reaches this process's listeners, synchronously.
 */
export const localRevocationFeed = (): RevocationFeed => {
  const listeners = new Set<(revocation: Revocation) => void>();
  return {
    publish: (revocation) =>
      Effect.sync(() => {
        for (const listener of listeners) listener(revocation);
      }),
    watch: (listener) => void listeners.add(listener),
  };
};

/**
 * A local cache in front of the shared revocation store: an answer is reused for at most
 * `maxAgeMs`, so a revocation reaches this node within that time (DECISIONS: cache no older than
 * 60 s, revocation everywhere within 120 s), while hot paths ask the store about once a minute
 * per session instead of once per segment. A store that watches tells it of revocations sooner.
 */
export const cachedRevocations = (
  store: RevocationStore,
  clock: Clock,
  maxAgeMs = 60_000,
): RevocationStore => {
  const answers = new Map<string, { revoked: boolean; at: number }>();
  let lastSweep = 0;
  // Only a "revoked" heard of is kept; the store still answers once it is older than maxAgeMs.
  store.watch?.((sessionId) => answers.set(sessionId, { revoked: true, at: clock.now() }));
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
        Effect.sync(() => {
          // A revocation heard of while the store was asked stands: none is ever undone.
          if (!answers.get(sessionId)?.revoked) answers.set(sessionId, { revoked, at: now });
        }),
      );
    },
  };
};

import type { RevocationStore } from "@vod/core";
import { Effect } from "effect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { uid } from "./fixtures.js";

export interface RevocationStoreSubject {
  readonly store: RevocationStore;
  /**
   * Another node's store over the same shared storage (a second pool, a second client); the same
   * object where the storage is this process's memory.
   */
  readonly otherNode: RevocationStore;
  readonly cleanup: () => Promise<void>;
}

const HOUR = 3_600_000;

/**
 * The RevocationStore port: a revoked session is revoked for every node until its `until`, which
 * only ever grows. Time is passed in, never slept; it starts at the wall clock so that a store
 * that forgets by the wall clock (an adapter's housekeeping) forgets nothing a test still needs.
 */
export const describeRevocationStore = (name: string, makeSubject: () => Promise<RevocationStoreSubject>) =>
  describe(`RevocationStore [${name}]`, () => {
    let subject: RevocationStoreSubject;
    let now: number;
    beforeEach(async () => {
      subject = await makeSubject();
      now = Date.now();
    });
    afterEach(async () => subject.cleanup());

    const revoke = (sessionId: string, until: number, store = subject.store) =>
      Effect.runPromise(store.revoke(sessionId, until));
    const isRevoked = (sessionId: string, at: number, store = subject.store) =>
      Effect.runPromise(store.isRevoked(sessionId, at));

    it("does not report a session nobody revoked", async () => {
      expect(await isRevoked(uid("pbs"), now)).toBe(false);
      expect(await isRevoked(uid("pbs"), now, subject.otherNode)).toBe(false);
    });

    it("reports a revoked session as revoked on every node until `until`", async () => {
      const session = uid("pbs");
      await revoke(session, now + HOUR);
      expect(await isRevoked(session, now)).toBe(true);
      expect(await isRevoked(session, now, subject.otherNode)).toBe(true);
      expect(await isRevoked(session, now + HOUR - 1, subject.otherNode)).toBe(true);
      expect(await isRevoked(uid("pbs"), now, subject.otherNode)).toBe(false);
    });

    it("takes a revocation made on another node", async () => {
      const session = uid("pbs");
      await revoke(session, now + HOUR, subject.otherNode);
      expect(await isRevoked(session, now + 1)).toBe(true);
    });

    it("keeps the later `until` when a session is revoked again, in either order", async () => {
      const extended = uid("pbs");
      await revoke(extended, now + HOUR);
      await revoke(extended, now + 2 * HOUR, subject.otherNode);
      expect(await isRevoked(extended, now + 2 * HOUR - 1)).toBe(true);

      const notShortened = uid("pbs");
      await revoke(notShortened, now + 2 * HOUR);
      await revoke(notShortened, now + HOUR);
      expect(await isRevoked(notShortened, now + 2 * HOUR - 1, subject.otherNode)).toBe(true);

      const again = uid("pbs");
      await revoke(again, now + HOUR);
      await revoke(again, now + HOUR);
      expect(await isRevoked(again, now + HOUR - 1)).toBe(true);
    });

    it("keeps the latest `until` of concurrent revocations", async () => {
      const session = uid("pbs");
      const untils = Array.from({ length: 20 }, (_, i) => now + HOUR + ((i * 7) % 20) * 1_000);
      await Promise.all(
        untils.map((until, i) => revoke(session, until, i % 2 ? subject.otherNode : undefined)),
      );
      expect(await isRevoked(session, Math.max(...untils) - 1)).toBe(true);
    });

    it("may forget a session once `until` has passed, and forgets no other", async () => {
      const ended = uid("pbs");
      const live = uid("pbs");
      await revoke(ended, now + 1_000);
      await revoke(live, now + 3 * HOUR);
      expect(await isRevoked(ended, now + 999)).toBe(true);
      // Whatever is answered after `until`, asking must not disturb the other entries.
      expect(typeof (await isRevoked(ended, now + 2 * HOUR))).toBe("boolean");
      expect(typeof (await isRevoked(ended, now + 2 * HOUR, subject.otherNode))).toBe("boolean");
      expect(await isRevoked(live, now + 2 * HOUR)).toBe(true);
      expect(await isRevoked(live, now + 3 * HOUR - 1, subject.otherNode)).toBe(true);
    });

    it("keeps every live revocation through many revocations (and any housekeeping they trigger)", async () => {
      const sessions = Array.from({ length: 1_100 }, () => uid("pbs"));
      for (let at = 0; at < sessions.length; at += 100)
        await Promise.all(sessions.slice(at, at + 100).map((s) => revoke(s, now + HOUR)));
      const answers = await Promise.all(sessions.map((s) => isRevoked(s, now + 1)));
      expect(answers.every((a) => a)).toBe(true);
    });
  });

import { Effect } from "effect";
import { describe, expect, it } from "vitest";
import { StorageError } from "../src/errors.js";
import type { Revocation, RevocationFeed, RevocationStore } from "../src/ports/revocation-store.js";
import { cachedRevocations, layeredRevocations } from "../src/use-cases/revocations.js";

/** A store of record in a Map, which can be made to fail, recording the order of writes. */
const recordStore = (events: string[]) => {
  const revoked = new Map<string, number>();
  let failing = false;
  const store: RevocationStore = {
    revoke: (id, until) =>
      failing
        ? Effect.fail(new StorageError({ message: "database away" }))
        : Effect.sync(() => {
            events.push(`store ${id}`);
            revoked.set(id, Math.max(until, revoked.get(id) ?? 0));
          }),
    isRevoked: (id, now) =>
      failing
        ? Effect.fail(new StorageError({ message: "database away" }))
        : Effect.sync(() => (revoked.get(id) ?? 0) > now),
  };
  return { store, fail: (on: boolean) => (failing = on) };
};

/** A feed that delivers to every watcher, as pub/sub would, unless it is down (messages lost). */
const recordFeed = (events: string[]) => {
  const listeners: Array<(revocation: Revocation) => void> = [];
  let up = true;
  const feed: RevocationFeed = {
    publish: (revocation) =>
      Effect.sync(() => {
        events.push(`publish ${revocation.id}`);
        if (up) for (const l of listeners) l(revocation);
      }),
    watch: (l) => listeners.push(l),
  };
  return { feed, down: () => (up = false) };
};

const clockAt = (start: number) => {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
};

describe("revocations: the store of record, a feed, a cache per node", () => {
  it("writes the store first, then publishes; a store that fails fails the revocation and publishes nothing", async () => {
    const events: string[] = [];
    const truth = recordStore(events);
    const layered = layeredRevocations(truth.store, recordFeed(events).feed);
    await Effect.runPromise(layered.revoke("pbs_1", 10_000));
    expect(events).toEqual(["store pbs_1", "publish pbs_1"]);
    truth.fail(true);
    const failed = await Effect.runPromise(Effect.either(layered.revoke("pbs_2", 10_000)));
    expect(failed._tag).toBe("Left");
    expect(events).toEqual(["store pbs_1", "publish pbs_1"]);
  });

  it("tells another node's cache at once through the feed, and the store answers once messages are lost", async () => {
    const events: string[] = [];
    const truth = recordStore(events);
    const { feed, down } = recordFeed(events);
    const clock = clockAt(1_000);
    const nodeA = cachedRevocations(layeredRevocations(truth.store, feed), clock);
    const nodeB = cachedRevocations(layeredRevocations(truth.store, feed), clock);
    // B has seen both sessions live, and would serve them from its cache for 60 s.
    expect(await Effect.runPromise(nodeB.isRevoked("pbs_heard", clock.now()))).toBe(false);
    expect(await Effect.runPromise(nodeB.isRevoked("pbs_lost", clock.now()))).toBe(false);
    await Effect.runPromise(nodeA.revoke("pbs_heard", 1_000_000));
    expect(await Effect.runPromise(nodeB.isRevoked("pbs_heard", clock.now()))).toBe(true);
    // The feed is down: B keeps its cached answer until it is 60 s old, then asks the store.
    down();
    await Effect.runPromise(nodeA.revoke("pbs_lost", 1_000_000));
    clock.advance(59_999);
    expect(await Effect.runPromise(nodeB.isRevoked("pbs_lost", clock.now()))).toBe(false);
    clock.advance(1);
    expect(await Effect.runPromise(nodeB.isRevoked("pbs_lost", clock.now()))).toBe(true);
  });

  it("never turns a revocation heard of while the store was being asked back into 'not revoked'", async () => {
    const listeners: Array<(id: string) => void> = [];
    let answer: (revoked: boolean) => void = () => undefined;
    const slow: RevocationStore = {
      revoke: () => Effect.void,
      isRevoked: () =>
        Effect.async<boolean>((resume) => {
          answer = (r) => resume(Effect.succeed(r));
        }),
      watch: (l) => listeners.push(l),
    };
    const clock = clockAt(5_000);
    const cache = cachedRevocations(slow, clock);
    const asked = Effect.runPromise(cache.isRevoked("pbs_1", clock.now()));
    for (const l of listeners) l("pbs_1");
    // The store's answer was read before the revocation: stale, and not kept.
    answer(false);
    expect(await asked).toBe(false);
    expect(await Effect.runPromise(cache.isRevoked("pbs_1", clock.now()))).toBe(true);
  });
});

import {
  manualClock,
  memoryObjectStore,
  memoryRateLimiter,
  memoryRevocationStore,
  memoryStorage,
  memoryTelemetrySink,
  randomIds,
} from "@vod/adapter-memory";
import { createVod, EXPIRED_REFRESH_TOKEN_KEPT_MS, TokenRejected, type VodPorts } from "@vod/core";
import { catalogLinks } from "@vod/http";
import { Effect } from "effect";
import { describe, expect, it } from "vitest";

const DAY = 86_400_000;

/**
 * What the worker's token sweep changes for a client: an expired refresh token is told apart
 * from an unknown one for a week, then forgotten. The core over memory ports, its clock moved by
 * hand (the storage contract checks each adapter's deletes).
 */
describe("the sweep of expired refresh tokens (memory)", () => {
  it("keeps an expired token a week, answering 'expired', then deletes it", async () => {
    const clock = manualClock(Date.now());
    const ports: VodPorts = {
      clock,
      ids: randomIds(),
      storage: memoryStorage(),
      passwordHasher: {
        hash: (password) => Effect.succeed(`plain:${password}`),
        verify: (hash, password) => Effect.succeed(hash === `plain:${password}`),
      },
      tokenSigner: {
        sign: (_purpose, claims) => Effect.succeed(JSON.stringify(claims)),
        verify: () => Effect.fail(new TokenRejected({ reason: "signature" })),
      },
      identityVerifier: { verify: () => Effect.die("no Google sign-in here") },
      rateLimiter: memoryRateLimiter(),
      objectStore: memoryObjectStore(),
      revocationStore: memoryRevocationStore(),
      links: catalogLinks({ media: "http://localhost:8080", drm: "http://localhost:8080" }),
      telemetrySink: memoryTelemetrySink(),
      webhookSender: {
        checkUrl: () => Effect.void,
        send: () => Effect.succeed({ ok: true, statusCode: 204 }),
      },
    };
    const vod = createVod(ports, { refreshTokenTtlMs: DAY });
    const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect);
    const refreshFails = (token: string) =>
      run(Effect.flip(vod.accounts.refresh(token, "10.0.0.1"))).then(
        (e) => (e as { message: string }).message,
      );

    const signup = await run(
      vod.accounts.signup({ email: "o@example.com", password: "a long password" }, "10.0.0.1"),
    );
    expect(await run(vod.accounts.sweepExpiredTokens())).toEqual({ emailTokens: 0, refreshTokens: 0 });

    clock.advance(DAY + 1);
    expect(await run(vod.accounts.sweepExpiredTokens())).toEqual({ emailTokens: 0, refreshTokens: 0 });
    expect(await refreshFails(signup.refresh_token)).toBe("refresh token expired");

    clock.advance(EXPIRED_REFRESH_TOKEN_KEPT_MS);
    expect(await run(vod.accounts.sweepExpiredTokens())).toEqual({ emailTokens: 0, refreshTokens: 1 });
    expect(await refreshFails(signup.refresh_token)).toBe("invalid refresh token");
  });
});

import { manualClock } from "@vod/adapter-memory";
import { createVod, EXPIRED_REFRESH_TOKEN_KEPT_MS } from "@vod/core";
import { Effect } from "effect";
import { describe, expect, it } from "vitest";
import { memoryCorePorts } from "./memory-core.js";

const DAY = 86_400_000;

/**
 * What the worker's token sweep changes for a client: an expired refresh token is told apart
 * from an unknown one for a week, then forgotten. The core over memory ports, its clock moved by
 * hand (the storage contract checks each adapter's deletes).
 */
describe("the sweep of expired refresh tokens (memory)", () => {
  it("keeps an expired token a week, answering 'expired', then deletes it", async () => {
    const clock = manualClock(Date.now());
    const ports = memoryCorePorts({ clock });
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

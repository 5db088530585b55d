import { Effect, Either } from "effect";
import { describe, expect, it } from "vitest";
import { defaultConfig } from "../src/config.js";
import type { RevocationStore } from "../src/ports/revocation-store.js";
import type { TokenClaims, TokenSigner } from "../src/ports/token-signer.js";
import type { VodPorts } from "../src/tokens.js";
import { makeEntitlement } from "../src/use-cases/entitlement.js";
import { makePlaybackSessions, PLAYBACK_TOKEN_PREFIX } from "../src/use-cases/playback-sessions.js";

const NOW = 1_700_000_000_000;
const EXP_SECONDS = NOW / 1000 + 3600;

/**
 * A signer whose signature check passes for any token and hands back the claims the test puts in
 * it: the claims' decoding is what is under test, as if a key had signed claims of the wrong shape.
 */
const signerOf = (claims: TokenClaims): TokenSigner => ({
  sign: () => Effect.succeed("signed"),
  verify: () => Effect.succeed({ claims, exp: EXP_SECONDS }),
});

const notRevoked: RevocationStore = {
  revoke: () => Effect.void,
  isRevoked: () => Effect.succeed(false),
};

const allActive = () => Effect.succeed("active" as const);

const portsWith = (claims: TokenClaims) =>
  ({ clock: { now: () => NOW }, tokenSigner: signerOf(claims) }) as unknown as VodPorts;

const config = defaultConfig({
  cursorSecret: new Uint8Array(32),
  uploadUrlSecret: new Uint8Array(32),
  drmMasterKey: new Uint8Array(32),
});

const verify = (claims: TokenClaims) =>
  Effect.runPromise(
    Effect.either(
      makePlaybackSessions(portsWith(claims), notRevoked, allActive).verify(`${PLAYBACK_TOKEN_PREFIX}x`),
    ),
  );

describe("playback token claims, decoded by their schema", () => {
  it("reads a well-formed token's session, tenant, asset, DRM flag and expiry, ignoring other claims", async () => {
    const result = await verify({ sid: "pbs_1", tid: "tnt_1", aid: "ast_1", drm: true, extra: 7 });
    expect(result).toEqual(
      Either.right({
        sessionId: "pbs_1",
        tenantId: "tnt_1",
        assetId: "ast_1",
        drm: true,
        expiresAt: EXP_SECONDS * 1000,
      }),
    );
  });

  it.each([
    ["a missing asset", { sid: "pbs_1", tid: "tnt_1", drm: false }],
    ["a DRM flag as a string", { sid: "pbs_1", tid: "tnt_1", aid: "ast_1", drm: "true" }],
    ["a numeric session", { sid: 1, tid: "tnt_1", aid: "ast_1", drm: false }],
  ])("refuses a signed token with %s as 401 invalid playback token", async (_, claims) => {
    const result = await verify(claims);
    expect(Either.isLeft(result)).toBe(true);
    if (Either.isLeft(result)) {
      expect(result.left._tag).toBe("Unauthorized");
      expect(result.left.message).toBe("invalid playback token");
    }
  });

  it("refuses a licence token without its tenant as 401 invalid licence token, before any key is looked up", async () => {
    let keysAsked = 0;
    const keys = {
      find: () => Effect.sync(() => keysAsked++),
    } as unknown as Parameters<typeof makeEntitlement>[4];
    const ports = portsWith({ sid: "pbs_1", aid: "ast_1" });
    const entitlement = makeEntitlement(
      ports,
      config,
      () => Effect.die("unused"),
      notRevoked,
      keys,
      allActive,
    );
    const result = await Effect.runPromise(
      Effect.either(entitlement.clearKeyLicense("licence", { kids: ["a"], type: "temporary" })),
    );
    expect(Either.isLeft(result) && result.left).toMatchObject({
      _tag: "Unauthorized",
      message: "invalid licence token",
    });
    expect(keysAsked).toBe(0);
  });
});

import { generateKeyPairSync } from "node:crypto";
import {
  generateSigningKeys,
  type JoseTokenSignerConfig,
  joseTokenSigner,
  type SigningKeys,
  tokenTypes,
} from "@vod/adapter-jose";
import type { TokenClaims, TokenPurpose, TokenSigner } from "@vod/core";
import { Effect, Either } from "effect";
import { importJWK, SignJWT } from "jose";
import { describe, expect, it } from "vitest";

const T0 = 1_700_000_000_000;
const times = { issuedAt: T0, expiresAt: T0 + 900_000 };

const decode = (segment: string | undefined): Record<string, unknown> =>
  JSON.parse(Buffer.from(segment ?? "", "base64url").toString("utf8"));

const signer = async (overrides: Partial<JoseTokenSignerConfig> = {}) =>
  joseTokenSigner({
    issuer: "https://vod.test",
    audience: "vod",
    keys: overrides.keys ?? (await generateSigningKeys()),
    ...overrides,
  });

const sign = (
  port: TokenSigner,
  purpose: TokenPurpose,
  claims: TokenClaims = { sub: "user_1" },
  at = times,
) => Effect.runPromise(port.sign(purpose, claims, at));
const verify = (port: TokenSigner, purpose: TokenPurpose, token: string, now = T0 + 1_000) =>
  Effect.runPromise(Effect.either(port.verify(purpose, token, { now })));
const reasonOf = (result: Either.Either<unknown, { reason: string }>) =>
  Either.isLeft(result) ? result.left.reason : "accepted";

describe("joseTokenSigner", () => {
  it("writes alg EdDSA, the signing kid and the purpose's typ in the header, iss/aud/iat/exp in the payload", async () => {
    const keys = await generateSigningKeys();
    const port = await signer({ keys });
    for (const purpose of ["access", "playback", "license"] as const) {
      const [header, payload] = (await sign(port, purpose)).split(".");
      expect(decode(header)).toEqual({ alg: "EdDSA", kid: keys[purpose][0]!.kid, typ: tokenTypes[purpose] });
      expect(decode(payload)).toEqual({
        sub: "user_1",
        iss: "https://vod.test",
        aud: "vod",
        iat: T0 / 1000,
        exp: T0 / 1000 + 900,
      });
    }
    expect(tokenTypes).toEqual({
      access: "at+jwt",
      playback: "vod-playback+jwt",
      license: "vod-license+jwt",
    });
  });

  it("rounds iat and exp down to whole seconds, and reports exp as in the token", async () => {
    const port = await signer();
    const token = await sign(port, "access", { sub: "u" }, { issuedAt: T0 + 999, expiresAt: T0 + 900_999 });
    expect(decode(token.split(".")[1])).toMatchObject({ iat: T0 / 1000, exp: T0 / 1000 + 900 });
    expect(await verify(port, "access", token)).toEqual(
      Either.right({ claims: { sub: "u" }, exp: T0 / 1000 + 900 }),
    );
  });

  it("keeps registered claims to itself: a caller cannot set iss, aud or exp", async () => {
    const port = await signer();
    const token = await sign(port, "access", {
      sub: "u",
      iss: "https://evil.test",
      aud: "evil",
      exp: 9_999_999_999,
    });
    expect(decode(token.split(".")[1])).toMatchObject({
      iss: "https://vod.test",
      aud: "vod",
      exp: T0 / 1000 + 900,
    });
    expect(await verify(port, "access", token)).toEqual(
      Either.right({ claims: { sub: "u" }, exp: T0 / 1000 + 900 }),
    );
  });

  it("refuses a token of another issuer or audience, even under the same keys", async () => {
    const keys = await generateSigningKeys();
    const port = await signer({ keys });
    const otherIssuer = await signer({ keys, issuer: "https://other.test" });
    const otherAudience = await signer({ keys, audience: "other" });
    expect(reasonOf(await verify(port, "access", await sign(otherIssuer, "access")))).toBe("claims");
    expect(reasonOf(await verify(port, "access", await sign(otherAudience, "access")))).toBe("claims");
  });

  it("checks the typ and the key of a purpose independently", async () => {
    const keys = await generateSigningKeys();
    const port = await signer({ keys });
    const forge = async (purposeOfKey: TokenPurpose, typ: string) => {
      const { d, x, kty, crv, kid } = keys[purposeOfKey][0]!;
      return new SignJWT({ sub: "user_1" })
        .setProtectedHeader({ alg: "EdDSA", kid, typ })
        .setIssuer("https://vod.test")
        .setAudience("vod")
        .setIssuedAt(T0 / 1000)
        .setExpirationTime(T0 / 1000 + 900)
        .sign(await importJWK({ kty, crv, x, d }, "EdDSA"));
    };
    expect(Either.isRight(await verify(port, "access", await forge("access", "at+jwt")))).toBe(true);
    // The access key with the playback typ, and the playback key with the access typ.
    expect(reasonOf(await verify(port, "access", await forge("access", "vod-playback+jwt")))).toBe("purpose");
    expect(reasonOf(await verify(port, "access", await forge("playback", "at+jwt")))).toBe("purpose");
    expect(reasonOf(await verify(port, "access", await forge("access", "JWT")))).toBe("purpose");
  });

  it("rotates: the first key signs, every listed key verifies, a dropped key no longer does", async () => {
    const [oldKeys, newKeys] = await Promise.all([generateSigningKeys(), generateSigningKeys()]);
    const before = await signer({ keys: oldKeys });
    const rotated: SigningKeys = {
      access: [...newKeys.access, ...oldKeys.access],
      playback: [...newKeys.playback, ...oldKeys.playback],
      license: [...newKeys.license, ...oldKeys.license],
    };
    const during = await signer({ keys: rotated });
    const after = await signer({ keys: newKeys });

    const oldToken = await sign(before, "access");
    const newToken = await sign(during, "access");
    expect(decode(newToken.split(".")[0]).kid).toBe(newKeys.access[0]!.kid);
    expect(Either.isRight(await verify(during, "access", oldToken))).toBe(true);
    expect(Either.isRight(await verify(after, "access", newToken))).toBe(true);
    expect(reasonOf(await verify(after, "access", oldToken))).toBe("signature");
    expect(reasonOf(await verify(before, "access", newToken))).toBe("signature");
  });

  it("stops at construction on keys it cannot use, without echoing them", async () => {
    const keys = await generateSigningKeys();
    const access = keys.access[0]!;
    const other = (await generateSigningKeys()).access[0]!;
    const attempts: Array<[unknown, RegExp]> = [
      [{ ...keys, access: [] }, /access: must list at least one key/],
      [{ ...keys, license: [{ ...keys.license[0]!, kid: access.kid }] }, /every kid must be unique/],
      [{ ...keys, access: [{ ...access, x: other.x }] }, /access key .* x that does not match its d/],
      [{ ...keys, access: [{ ...access, d: "AAAA" }] }, /access key .* not an Ed25519 private key/],
      [{ ...keys, access: [{ ...access, crv: "P-256" }] }, /access\.0\.crv/],
    ];
    for (const [bad, message] of attempts) {
      const attempt = () => joseTokenSigner({ issuer: "i", audience: "a", keys: bad as SigningKeys });
      expect(attempt).toThrow(message);
      try {
        attempt();
      } catch (error) {
        expect((error as Error).message).not.toContain(access.d);
      }
    }
  });

  it("refuses keys of another curve or type even when given as JWK objects", () => {
    const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const jwk = { ...privateKey.export({ format: "jwk" }), kid: "ec" };
    expect(() =>
      joseTokenSigner({
        issuer: "i",
        audience: "a",
        keys: { access: [jwk], playback: [jwk], license: [jwk] } as never,
      }),
    ).toThrow(/Invalid signing keys/);
  });
});

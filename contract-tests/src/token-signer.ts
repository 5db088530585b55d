import { createHmac } from "node:crypto";
import type { TokenClaims, TokenPurpose, TokenRejected, TokenSigner, VerifiedToken } from "@vod/core";
import { Effect, Either } from "effect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

export interface TokenSignerSubject {
  readonly port: TokenSigner;
  readonly cleanup: () => Promise<void>;
}

const purposes: readonly TokenPurpose[] = ["access", "playback", "license"];

// A fixed clock: expiry is driven through `at.now`, never by sleeping.
const T0 = 1_700_000_000_000;
const LIFETIME_MS = 900_000;
const times = { issuedAt: T0, expiresAt: T0 + LIFETIME_MS };

const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString("base64url");
const unb64 = (segment: string): Record<string, unknown> =>
  JSON.parse(Buffer.from(segment, "base64url").toString("utf8"));

const segments = (token: string): [string, string, string] => {
  const [header, payload, signature, ...rest] = token.split(".");
  if (header === undefined || payload === undefined || signature === undefined || rest.length > 0) {
    throw new Error(`not a compact JWS: ${token}`);
  }
  return [header, payload, signature];
};

/**
 * The TokenSigner contract. `makeSubject` returns a signer with keys of its own: two subjects
 * never share keys.
 */
export const describeTokenSigner = (name: string, makeSubject: () => Promise<TokenSignerSubject>): void => {
  describe(`TokenSigner contract: ${name}`, () => {
    let subject: TokenSignerSubject;
    beforeEach(async () => {
      subject = await makeSubject();
    });
    afterEach(async () => {
      await subject.cleanup();
    });

    const sign = (purpose: TokenPurpose, claims: TokenClaims = { sub: "user_1" }, port = subject.port) =>
      Effect.runPromise(port.sign(purpose, claims, times));
    const verify = (
      purpose: TokenPurpose,
      token: string,
      at: { now: number; leewayMs?: number } = { now: T0 + 1_000 },
      port = subject.port,
    ): Promise<Either.Either<VerifiedToken, TokenRejected>> =>
      Effect.runPromise(Effect.either(port.verify(purpose, token, at)));
    const expectRejected = (
      result: Either.Either<VerifiedToken, TokenRejected>,
      reason?: TokenRejected["reason"],
    ): void => {
      expect(Either.isLeft(result), "the token was accepted").toBe(true);
      if (Either.isLeft(result)) {
        expect(result.left._tag).toBe("TokenRejected");
        if (reason !== undefined) expect(result.left.reason).toBe(reason);
      }
    };

    for (const purpose of purposes) {
      it(`round-trips the claims of a ${purpose} token`, async () => {
        const claims = { sub: "user_1", sid: "session_1", role: "owner", n: 42, admin: true, mfa: false };
        const token = await sign(purpose, { ...claims, name: "Zoë 🎬" });
        expect(segments(token).every((segment) => /^[\w-]+$/.test(segment))).toBe(true);
        const result = await verify(purpose, token);
        // Only the caller's claims come back: issuer, audience and times are the signer's business.
        expect(result).toEqual(
          Either.right({ claims: { ...claims, name: "Zoë 🎬" }, exp: times.expiresAt / 1000 }),
        );
      });

      for (const other of purposes.filter((p) => p !== purpose)) {
        it(`refuses a ${purpose} token presented as a ${other} token`, async () => {
          const token = await sign(purpose);
          expectRejected(await verify(other, token), "purpose");
        });
      }
    }

    it("refuses a token whose header was rewritten to another purpose", async () => {
      const [header, payload, signature] = segments(await sign("access"));
      const playbackTyp = unb64(segments(await sign("playback"))[0]).typ;
      const forged = `${b64({ ...unb64(header), typ: playbackTyp })}.${payload}.${signature}`;
      expectRejected(await verify("playback", forged));
      expectRejected(await verify("access", forged));
    });

    it("refuses a token whose payload was changed", async () => {
      const [header, payload, signature] = segments(await sign("access", { sub: "user_1", role: "member" }));
      const changed = b64({ ...unb64(payload), role: "owner" });
      expectRejected(await verify("access", `${header}.${changed}.${signature}`), "signature");
    });

    it("refuses a token whose signature was changed", async () => {
      const [header, payload, signature] = segments(await sign("access"));
      const middle = Math.floor(signature.length / 2);
      const flipped = signature[middle] === "A" ? "B" : "A";
      const changed = `${signature.slice(0, middle)}${flipped}${signature.slice(middle + 1)}`;
      expectRejected(await verify("access", `${header}.${payload}.${changed}`), "signature");
    });

    it("refuses a token signed by another signer's keys", async () => {
      const other = await makeSubject();
      try {
        const token = await sign("access", { sub: "user_1" }, other.port);
        expectRejected(await verify("access", token), "signature");
      } finally {
        await other.cleanup();
      }
    });

    it('refuses an unsigned token (alg "none")', async () => {
      const [header, payload] = segments(await sign("access"));
      const unsigned = `${b64({ ...unb64(header), alg: "none" })}.${payload}.`;
      expectRejected(await verify("access", unsigned));
    });

    it("refuses an HS256 token, whatever secret it was made with", async () => {
      const [header, payload] = segments(await sign("access"));
      const hsHeader = b64({ ...unb64(header), alg: "HS256" });
      for (const secret of ["secret", String(unb64(header).kid)]) {
        const mac = createHmac("sha256", secret).update(`${hsHeader}.${payload}`).digest("base64url");
        expectRejected(await verify("access", `${hsHeader}.${payload}.${mac}`));
      }
    });

    it("refuses malformed tokens", async () => {
      for (const garbage of ["", "not-a-token", "a.b.c", "..", `${b64({ alg: "EdDSA" })}.e30`]) {
        expectRejected(await verify("access", garbage), "malformed");
      }
    });

    it("accepts a token until its expiry and refuses it from then on", async () => {
      const token = await sign("playback");
      expect(Either.isRight(await verify("playback", token, { now: times.expiresAt - 1_000 }))).toBe(true);
      expectRejected(await verify("playback", token, { now: times.expiresAt }), "expired");
      expectRejected(await verify("playback", token, { now: times.expiresAt + 60_000 }), "expired");
    });

    it("accepts an expired token within the leeway, and not beyond it", async () => {
      const token = await sign("access");
      const now = times.expiresAt + 5_000;
      expect(Either.isRight(await verify("access", token, { now, leewayMs: 10_000 }))).toBe(true);
      expectRejected(await verify("access", token, { now, leewayMs: 4_000 }), "expired");
      expectRejected(await verify("access", token, { now, leewayMs: 0 }), "expired");
    });
  });
};

import type { IdentityVerifier, PlaybackUnavailable, Unauthorized, VerifiedIdentity } from "@vod/core";
import type { FakeGoogle } from "@vod/test-services";
import { Effect, Either } from "effect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

export interface IdentityVerifierSubject {
  /** A verifier configured with `google.clientId` and `google.certsUrl`. */
  readonly port: IdentityVerifier;
  readonly google: FakeGoogle;
  readonly cleanup: () => Promise<void>;
}

const HOUR = 3600;
const nowSeconds = () => Math.floor(Date.now() / 1000);

/** The IdentityVerifier contract, against a fake Google that the subject's verifier trusts. */
export const describeIdentityVerifier = (
  name: string,
  makeSubject: () => Promise<IdentityVerifierSubject>,
): void => {
  describe(`IdentityVerifier contract: ${name}`, () => {
    let subject: IdentityVerifierSubject;
    beforeEach(async () => {
      subject = await makeSubject();
    });
    afterEach(async () => {
      await subject.cleanup();
    });

    const verify = (
      idToken: string,
    ): Promise<Either.Either<VerifiedIdentity, Unauthorized | PlaybackUnavailable>> =>
      Effect.runPromise(Effect.either(subject.port.verify(idToken)));
    const expectFailure = (
      result: Either.Either<VerifiedIdentity, Unauthorized | PlaybackUnavailable>,
      tag: "Unauthorized" | "PlaybackUnavailable",
    ): void => {
      expect(Either.isLeft(result) ? result.left._tag : "accepted").toBe(tag);
    };

    it("turns a valid ID token into the identity it names", async () => {
      const token = subject.google.signIdToken({
        sub: "109876543210987654321",
        email: "ada@example.com",
        email_verified: true,
        name: "Ada Lovelace",
      });
      expect(await verify(token)).toEqual(
        Either.right({
          provider: "google",
          subject: "109876543210987654321",
          email: "ada@example.com",
          email_verified: true,
          name: "Ada Lovelace",
        }),
      );
    });

    it("keeps an unverified email unverified, and a missing name null", async () => {
      const token = subject.google.signIdToken({
        email: "bob@example.com",
        email_verified: false,
        name: undefined,
      });
      const result = await verify(token);
      expect(Either.isRight(result) && result.right).toMatchObject({ email_verified: false, name: null });
    });

    it('reads email_verified sent as the string "true" or "false"', async () => {
      const verified = await verify(subject.google.signIdToken({ email_verified: "true" }));
      const unverified = await verify(subject.google.signIdToken({ email_verified: "false" }));
      expect(Either.isRight(verified) && verified.right.email_verified).toBe(true);
      expect(Either.isRight(unverified) && unverified.right.email_verified).toBe(false);
    });

    it("accepts both issuer spellings Google uses", async () => {
      const result = await verify(subject.google.signIdToken({ iss: "accounts.google.com" }));
      expect(Either.isRight(result)).toBe(true);
    });

    it("refuses a token for another audience", async () => {
      const token = subject.google.signIdToken({ aud: "someone-else.apps.googleusercontent.com" });
      expectFailure(await verify(token), "Unauthorized");
    });

    it("refuses a token from another issuer", async () => {
      expectFailure(
        await verify(subject.google.signIdToken({ iss: "https://evil.example.com" })),
        "Unauthorized",
      );
    });

    it("refuses a token signed with a key whose certificate is not served", async () => {
      expectFailure(await verify(subject.google.signIdToken({}, { foreignKey: true })), "Unauthorized");
    });

    it("refuses an expired token", async () => {
      const now = nowSeconds();
      const token = subject.google.signIdToken({ iat: now - 3 * HOUR, exp: now - 2 * HOUR });
      expectFailure(await verify(token), "Unauthorized");
    });

    it("refuses a token whose payload was changed after signing", async () => {
      const [header, , signature] = subject.google.signIdToken({ email: "eve@example.com" }).split(".");
      const genuine = subject.google.signIdToken({ email: "ada@example.com" }).split(".")[1];
      expectFailure(await verify(`${header}.${genuine}.${signature}`), "Unauthorized");
    });

    it("refuses a token without an email", async () => {
      expectFailure(await verify(subject.google.signIdToken({ email: undefined })), "Unauthorized");
    });

    it("refuses malformed tokens", async () => {
      for (const garbage of ["", "not-a-token", "a.b.c", "a.b"]) {
        expectFailure(await verify(garbage), "Unauthorized");
      }
    });

    it("answers PlaybackUnavailable when the certificates cannot be fetched", async () => {
      const token = subject.google.signIdToken({});
      await subject.google.close();
      expectFailure(await verify(token), "PlaybackUnavailable");
    });
  });
};

import type { InternalError, PasswordHasher } from "@vod/core";
import { Effect, Either } from "effect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

export interface PasswordHasherSubject {
  readonly port: PasswordHasher;
  readonly cleanup: () => Promise<void>;
}

/** The PasswordHasher contract. */
export const describePasswordHasher = (
  name: string,
  makeSubject: () => Promise<PasswordHasherSubject>,
): void => {
  describe(`PasswordHasher contract: ${name}`, () => {
    let subject: PasswordHasherSubject;
    beforeEach(async () => {
      subject = await makeSubject();
    });
    afterEach(async () => {
      await subject.cleanup();
    });

    const hash = (password: string) => Effect.runPromise(subject.port.hash(password));
    const verify = (encoded: string, password: string) =>
      Effect.runPromise(subject.port.verify(encoded, password));

    it("verifies the password a hash was made from", async () => {
      const encoded = await hash("correct horse battery staple");
      expect(await verify(encoded, "correct horse battery staple")).toBe(true);
    });

    it("answers false, not a failure, for a wrong password", async () => {
      const encoded = await hash("correct horse battery staple");
      for (const wrong of ["Correct horse battery staple", "correct horse battery staple ", "", "x"]) {
        expect(await verify(encoded, wrong)).toBe(false);
      }
    });

    it("salts: two hashes of one password differ, and both verify", async () => {
      const [first, second] = await Promise.all([hash("same password"), hash("same password")]);
      expect(first).not.toBe(second);
      expect(await verify(first, "same password")).toBe(true);
      expect(await verify(second, "same password")).toBe(true);
    });

    it("never stores the password itself", async () => {
      const encoded = await hash("a-very-recognisable-password");
      expect(encoded).not.toContain("a-very-recognisable-password");
      expect(encoded).not.toContain(
        Buffer.from("a-very-recognisable-password").toString("base64").slice(0, 16),
      );
    });

    it("handles the longest allowed password and any Unicode", async () => {
      const long = `${"p".repeat(255)}€`;
      const unicode = "pässwörd 🔐 密码 パスワード";
      expect(await verify(await hash(long), long)).toBe(true);
      expect(await verify(await hash(long), long.slice(0, -1))).toBe(false);
      expect(await verify(await hash(unicode), unicode)).toBe(true);
    });

    it("never answers true for a malformed hash", async () => {
      for (const malformed of ["", "not-a-hash", "$argon2id$v=19$m=19456,t=2,p=1$abc$def"]) {
        const result: Either.Either<boolean, InternalError> = await Effect.runPromise(
          Effect.either(subject.port.verify(malformed, "password")),
        );
        if (Either.isRight(result)) expect(result.right).toBe(false);
        else expect(result.left._tag).toBe("InternalError");
      }
    });
  });
};

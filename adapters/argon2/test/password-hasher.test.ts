import { argon2PasswordHasher } from "@vod/adapter-argon2";
import type { PasswordHasher } from "@vod/core";
import { Effect, Either } from "effect";
import { describe, expect, it } from "vitest";

const hash = (port: PasswordHasher, password: string) => Effect.runPromise(port.hash(password));
const verify = (port: PasswordHasher, encoded: string, password: string) =>
  Effect.runPromise(Effect.either(port.verify(encoded, password)));

describe("argon2PasswordHasher", () => {
  it("hashes with argon2id and OWASP's parameters by default: m=19456 KiB, t=2, p=1", async () => {
    const encoded = await hash(argon2PasswordHasher(), "correct horse battery staple");
    expect(encoded).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
  });

  it("writes the configured parameters into the hash, which verifies under any settings", async () => {
    const stronger = argon2PasswordHasher({ memoryCost: 47104, timeCost: 1, parallelism: 2 });
    const encoded = await hash(stronger, "pw-123456");
    expect(encoded).toMatch(/^\$argon2id\$v=19\$m=47104,t=1,p=2\$/);
    expect(await verify(argon2PasswordHasher(), encoded, "pw-123456")).toEqual(Either.right(true));
    expect(await verify(argon2PasswordHasher(), encoded, "pw-1234567")).toEqual(Either.right(false));
  });

  it("fails with InternalError for a hash it cannot decode", async () => {
    for (const malformed of [
      "",
      "not-a-hash",
      "$argon2id$v=19$m=19456,t=2,p=1$abc$def",
      "$2b$10$abcdefghijklmnopqrstuv",
    ]) {
      const result = await verify(argon2PasswordHasher(), malformed, "password");
      expect(Either.isLeft(result) && result.left._tag).toBe("InternalError");
    }
  });

  it("refuses unusable parameters at construction", () => {
    expect(() => argon2PasswordHasher({ memoryCost: 0 })).toThrow(/positive integers/);
    expect(() => argon2PasswordHasher({ timeCost: 1.5 })).toThrow(/positive integers/);
    expect(() => argon2PasswordHasher({ parallelism: 4, memoryCost: 16 })).toThrow(/8 KiB per lane/);
  });
});

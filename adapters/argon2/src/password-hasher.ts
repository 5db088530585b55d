import { type Algorithm, hash, verify } from "@node-rs/argon2";
import { InternalError, type PasswordHasher } from "@vod/core";
import { Effect } from "effect";

export interface Argon2Options {
  /** KiB of memory per hash; default 19456 (19 MiB, OWASP's argon2id minimum). */
  readonly memoryCost?: number;
  /** Passes over memory; default 2. */
  readonly timeCost?: number;
  /** Lanes; default 1. */
  readonly parallelism?: number;
}

// Algorithm is an ambient const enum, which isolatedModules cannot read as a value.
const ARGON2ID = 2 as Algorithm.Argon2id;

/**
 * A PasswordHasher of argon2id. The parameters are written into each hash, so hashes made under
 * older settings keep verifying after the settings change.
 */
export const argon2PasswordHasher = (options: Argon2Options = {}): PasswordHasher => {
  const parameters = {
    algorithm: ARGON2ID,
    memoryCost: options.memoryCost ?? 19456,
    timeCost: options.timeCost ?? 2,
    parallelism: options.parallelism ?? 1,
  };
  // A bad setting would otherwise surface as an InternalError on every signup, long after the start.
  const { memoryCost, timeCost, parallelism } = parameters;
  if (![memoryCost, timeCost, parallelism].every((n) => Number.isInteger(n) && n >= 1)) {
    throw new Error("argon2 options must be positive integers");
  }
  if (parallelism > 255 || memoryCost < 8 * parallelism) {
    throw new Error("argon2 needs parallelism <= 255 and memoryCost >= 8 KiB per lane");
  }
  return {
    hash: (password) =>
      Effect.tryPromise({
        try: () => hash(password, parameters),
        catch: (cause) => new InternalError({ message: "Could not hash a password", cause }),
      }),
    // @node-rs/argon2 answers false for a wrong password and rejects only for a hash it cannot decode.
    verify: (encoded, password) =>
      Effect.tryPromise({
        try: () => verify(encoded, password),
        catch: (cause) => new InternalError({ message: "Stored password hash is malformed", cause }),
      }),
  };
};

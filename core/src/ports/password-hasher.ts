import type { Effect } from "effect";
import type { InternalError } from "../errors.js";

/** Slow, salted password hashing. The hash string carries its own parameters. */
export interface PasswordHasher {
  hash(password: string): Effect.Effect<string, InternalError>;
  /** False for a wrong password; never fails for a well-formed hash. */
  verify(hash: string, password: string): Effect.Effect<boolean, InternalError>;
}

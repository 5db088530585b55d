import { Tokens } from "@vod/core";
import { ContainerModule } from "inversify";
import { type Argon2Options, argon2PasswordHasher } from "./password-hasher.js";

export { type Argon2Options, argon2PasswordHasher } from "./password-hasher.js";

/** Binds the PasswordHasher port to argon2id with `options` (OWASP defaults when omitted). */
export const argon2Adapters = (options: Argon2Options = {}): ContainerModule =>
  new ContainerModule(({ bind }) => {
    bind(Tokens.PasswordHasher).toConstantValue(argon2PasswordHasher(options));
  });

import { Tokens } from "@vod/core";
import { ContainerModule } from "inversify";
import { type GoogleIdentityConfig, googleIdentityVerifier } from "./identity-verifier.js";

export { type GoogleIdentityConfig, googleIdentityVerifier } from "./identity-verifier.js";

/** Binds the IdentityVerifier port to Google ID-token verification with `config`. */
export const googleIdentityAdapters = (config: GoogleIdentityConfig): ContainerModule =>
  new ContainerModule(({ bind }) => {
    bind(Tokens.IdentityVerifier).toConstantValue(googleIdentityVerifier(config));
  });

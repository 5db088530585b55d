import { Tokens } from "@vod/core";
import { ContainerModule } from "inversify";
import { type JoseTokenSignerConfig, joseTokenSigner } from "./token-signer.js";

export {
  decodeSigningKeys,
  type Ed25519PrivateJwk,
  generateSigningKeys,
  loadOrCreateSigningKeys,
  parseSigningKeys,
  SigningKeys,
} from "./signing-keys.js";
export { type JoseTokenSignerConfig, joseTokenSigner, tokenTypes } from "./token-signer.js";

/** Binds the TokenSigner port to a jose signer built from `config`. */
export const joseAdapters = (config: JoseTokenSignerConfig): ContainerModule =>
  new ContainerModule(({ bind }) => {
    bind(Tokens.TokenSigner).toConstantValue(joseTokenSigner(config));
  });

export {
  decodeSigningKeys,
  type Ed25519PrivateJwk,
  generateSigningKeys,
  loadOrCreateSigningKeys,
  parseSigningKeys,
  SigningKeys,
} from "./signing-keys.js";
export { type JoseTokenSignerConfig, joseTokenSigner, tokenTypes } from "./token-signer.js";

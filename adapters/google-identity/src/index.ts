export { type GoogleIdentityConfig, googleIdentityVerifier } from "./identity-verifier.js";

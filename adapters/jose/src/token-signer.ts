import { createPrivateKey, createPublicKey, type KeyObject } from "node:crypto";
import {
  PlaybackUnavailable,
  type TokenClaims,
  type TokenPurpose,
  TokenRejected,
  type TokenSigner,
  type VerifiedToken,
} from "@vod/core";
import { Effect } from "effect";
import { decodeProtectedHeader, errors, jwtVerify, SignJWT } from "jose";
import { decodeSigningKeys, type SigningKeys } from "./signing-keys.js";

export interface JoseTokenSignerConfig {
  /** `iss` of every token, checked on verify. */
  readonly issuer: string;
  /** `aud` of every token, checked on verify. */
  readonly audience: string;
  readonly keys: SigningKeys;
}

const ALG = "EdDSA";

/** `typ` header per purpose (RFC 9068 for access tokens, our own media types for the others). */
export const tokenTypes: { readonly [P in TokenPurpose]: string } = {
  access: "at+jwt",
  playback: "vod-playback+jwt",
  license: "vod-license+jwt",
};

const purposes = Object.keys(tokenTypes) as TokenPurpose[];

// Claims the signer owns: the caller's claims never override them and verify does not return them.
const registeredClaims = new Set(["iss", "aud", "exp", "iat", "nbf", "jti"]);

interface PurposeKeys {
  readonly signing: { readonly kid: string; readonly key: KeyObject };
  readonly verifying: ReadonlyMap<string, KeyObject>;
}

const importKeys = (keys: SigningKeys): { readonly [P in TokenPurpose]: PurposeKeys } => {
  const importPurpose = (purpose: TokenPurpose): PurposeKeys => {
    const imported = keys[purpose].map((jwk) => {
      let privateKey: KeyObject;
      try {
        privateKey = createPrivateKey({
          key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, d: jwk.d },
          format: "jwk",
        });
      } catch (cause) {
        throw new Error(`Invalid signing keys: ${purpose} key ${jwk.kid} is not an Ed25519 private key`, {
          cause,
        });
      }
      const publicKey = createPublicKey(privateKey);
      // Verification uses the key derived from `d`; an `x` that disagrees means the JWK was
      // assembled wrongly, and tokens from the real key pair would fail in confusing ways.
      if (publicKey.export({ format: "jwk" }).x !== jwk.x) {
        throw new Error(`Invalid signing keys: ${purpose} key ${jwk.kid} has an x that does not match its d`);
      }
      return { kid: jwk.kid, privateKey, publicKey };
    });
    const [first] = imported;
    if (first === undefined) throw new Error(`Invalid signing keys: no ${purpose} key`);
    return {
      signing: { kid: first.kid, key: first.privateKey },
      verifying: new Map(imported.map((key) => [key.kid, key.publicKey])),
    };
  };
  return {
    access: importPurpose("access"),
    playback: importPurpose("playback"),
    license: importPurpose("license"),
  };
};

const rejected = (reason: TokenRejected["reason"]): TokenRejected => new TokenRejected({ reason });

const reasonOf = (error: unknown): TokenRejected["reason"] => {
  // JWTExpired extends JWTClaimValidationFailed, so it is tested first.
  if (error instanceof errors.JWTExpired) return "expired";
  if (error instanceof errors.JWTClaimValidationFailed) return error.claim === "typ" ? "purpose" : "claims";
  if (error instanceof errors.JWSSignatureVerificationFailed) return "signature";
  if (error instanceof errors.JOSEAlgNotAllowed) return "signature";
  return "malformed";
};

const isClaimValue = (value: unknown): value is string | number | boolean =>
  typeof value === "string" ||
  typeof value === "boolean" ||
  (typeof value === "number" && Number.isFinite(value));

/**
 * A TokenSigner of EdDSA (Ed25519) compact JWTs. Each purpose has its own keys and `typ`, so a token
 * of one purpose never verifies as another; the algorithm, issuer and audience are pinned.
 * Throws at construction when the keys are invalid, so a bad configuration stops the start.
 */
export const joseTokenSigner = (config: JoseTokenSignerConfig): TokenSigner => {
  const keys = importKeys(decodeSigningKeys(config.keys));

  const sign: TokenSigner["sign"] = (purpose, claims, times) =>
    Effect.tryPromise({
      try: () => {
        const { kid, key } = keys[purpose].signing;
        const own = Object.fromEntries(
          Object.entries(claims).filter(([name]) => !registeredClaims.has(name)),
        );
        return (
          new SignJWT(own)
            .setProtectedHeader({ alg: ALG, kid, typ: tokenTypes[purpose] })
            .setIssuer(config.issuer)
            .setAudience(config.audience)
            // Both rounded down, so the token never outlives `expiresAt` and its lifetime in seconds
            // is exactly the one asked for when the difference is whole seconds.
            .setIssuedAt(Math.floor(times.issuedAt / 1000))
            .setExpirationTime(Math.floor(times.expiresAt / 1000))
            .sign(key)
        );
      },
      catch: (cause) => new PlaybackUnavailable({ message: `Could not sign a ${purpose} token`, cause }),
    });

  const verify: TokenSigner["verify"] = (purpose, token, at) =>
    Effect.gen(function* () {
      const header = yield* Effect.try({
        try: () => decodeProtectedHeader(token),
        catch: () => rejected("malformed"),
      });
      // Checked before any key is chosen, so "none" or an HMAC alg can never reach a verifier.
      if (header.alg !== ALG) return yield* Effect.fail(rejected("signature"));
      if (header.typ !== tokenTypes[purpose]) return yield* Effect.fail(rejected("purpose"));
      const kid = typeof header.kid === "string" ? header.kid : undefined;
      const key = kid === undefined ? undefined : keys[purpose].verifying.get(kid);
      if (kid === undefined || key === undefined) {
        const ofOtherPurpose = kid !== undefined && purposes.some((other) => keys[other].verifying.has(kid));
        return yield* Effect.fail(rejected(ofOtherPurpose ? "purpose" : "signature"));
      }

      const { payload } = yield* Effect.tryPromise({
        try: () =>
          jwtVerify(token, key, {
            algorithms: [ALG],
            typ: tokenTypes[purpose],
            issuer: config.issuer,
            audience: config.audience,
            requiredClaims: ["exp"],
            currentDate: new Date(at.now),
            clockTolerance: (at.leewayMs ?? 0) / 1000,
          }),
        catch: (error) => rejected(reasonOf(error)),
      });

      const claims: Record<string, string | number | boolean> = {};
      for (const [name, value] of Object.entries(payload)) {
        if (registeredClaims.has(name)) continue;
        // Our own sign never writes anything else; a validly signed token that does is not ours.
        if (!isClaimValue(value)) return yield* Effect.fail(rejected("malformed"));
        claims[name] = value;
      }
      const exp = payload.exp;
      if (typeof exp !== "number") return yield* Effect.fail(rejected("claims"));
      const verified: VerifiedToken = { claims: claims satisfies TokenClaims, exp };
      return verified;
    });

  return { sign, verify };
};

import { Data, type Effect } from "effect";
import type { PlaybackUnavailable } from "../errors.js";

/**
 * What a token is for. Each purpose has a key and a `typ` of its own, so a token minted for one
 * purpose is never accepted for another.
 */
export type TokenPurpose = "access" | "playback" | "license";

export type TokenClaims = Readonly<Record<string, string | number | boolean>>;

export interface VerifiedToken {
  readonly claims: TokenClaims;
  /** Seconds since the epoch, as in the token. */
  readonly exp: number;
}

/** Why a token was refused: malformed, forged, of another purpose, or expired. */
export class TokenRejected extends Data.TaggedError("TokenRejected")<{
  readonly reason: "malformed" | "signature" | "purpose" | "expired" | "claims";
}> {}

/** Signs and verifies compact JWS tokens; signing keys stay inside the adapter. */
export interface TokenSigner {
  /** Signs `claims` for `purpose`, valid from `issuedAt` until `expiresAt` (epoch ms). */
  sign(
    purpose: TokenPurpose,
    claims: TokenClaims,
    times: { readonly issuedAt: number; readonly expiresAt: number },
  ): Effect.Effect<string, PlaybackUnavailable>;
  /**
   * Verifies signature, purpose, issuer and audience, and expiry against `now` (epoch ms) with
   * `leewayMs` of tolerance past expiry.
   */
  verify(
    purpose: TokenPurpose,
    token: string,
    at: { readonly now: number; readonly leewayMs?: number },
  ): Effect.Effect<VerifiedToken, TokenRejected>;
}

import type { Effect } from "effect";
import type { PlaybackUnavailable, Unauthorized } from "../errors.js";

export interface VerifiedIdentity {
  readonly provider: "google";
  /** The provider's stable account id (`sub`). */
  readonly subject: string;
  readonly email: string;
  /** Whether the provider vouches that the person owns the email. */
  readonly email_verified: boolean;
  readonly name: string | null;
}

/** Verifies an identity provider's ID token. */
export interface IdentityVerifier {
  /**
   * Unauthorized for a token that is forged, expired or meant for another audience;
   * PlaybackUnavailable when the provider is not configured or its keys cannot be fetched.
   */
  verify(idToken: string): Effect.Effect<VerifiedIdentity, Unauthorized | PlaybackUnavailable>;
}

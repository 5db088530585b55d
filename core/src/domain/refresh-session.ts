import { type Expiring, expiryState } from "./expiry.js";
import type { TenantId } from "./ids.js";

/**
 * A refresh session is the family of every token pair descended from one sign-in.
 * Access tokens carry its id, so revoking it stops them at once.
 */
export interface RefreshSession {
  readonly id: string;
  readonly tenant_id: TenantId;
  readonly user_id: string;
  readonly created_at: number;
  readonly revoked_at: number | null;
  readonly revoked_reason: RevokedReason | null;
}

/** account_claimed: a Google identity with the verified email took over an unverified signup. */
export type RevokedReason = "logout" | "reuse_detected" | "password_changed" | "account_claimed";

export interface RefreshToken extends Expiring {
  /** SHA-256 (hex) of the opaque token; the token itself is never stored. */
  readonly token_hash: string;
  readonly session_id: string;
  readonly tenant_id: TenantId;
  readonly user_id: string;
  /** Set when the token was rotated; presenting it again is reuse. */
  readonly used_at: number | null;
}

export const refreshTokenState = (token: RefreshToken, now: number) =>
  expiryState(token, token.used_at, now, { ended: "invalidated", live: "valid" });

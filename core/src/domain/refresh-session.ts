import { Either } from "effect";
import { illegal, type Transition } from "./transition.js";

/**
 * A refresh session is the family of every token pair descended from one sign-in.
 * Access tokens carry its id, so revoking it stops them at once.
 */
export interface RefreshSession {
  readonly id: string;
  readonly tenant_id: string;
  readonly user_id: string;
  readonly created_at: number;
  readonly revoked_at: number | null;
  readonly revoked_reason: RevokedReason | null;
}

export type RevokedReason = "logout" | "reuse_detected" | "password_changed";

export interface RefreshToken {
  /** SHA-256 (hex) of the opaque token; the token itself is never stored. */
  readonly token_hash: string;
  readonly session_id: string;
  readonly tenant_id: string;
  readonly user_id: string;
  readonly created_at: number;
  readonly expires_at: number;
  /** Set when the token was rotated; presenting it again is reuse. */
  readonly used_at: number | null;
}

export type RefreshTokenState = "valid" | "invalidated" | "expired";

export const refreshTokenState = (token: RefreshToken, now: number): RefreshTokenState =>
  token.used_at !== null ? "invalidated" : token.expires_at <= now ? "expired" : "valid";

export type RefreshTokenEvent = { readonly type: "rotate" };

/** valid -> invalidated on refresh; an invalidated or expired token moves nowhere. */
export const transitionRefreshToken: Transition<RefreshToken, RefreshTokenEvent> = (token, event, now) => {
  const state = refreshTokenState(token, now);
  if (event.type === "rotate" && state === "valid") return Either.right({ ...token, used_at: now });
  return illegal("refresh_token", state, event.type);
};

export type RefreshSessionEvent = { readonly type: "revoke"; readonly reason: RevokedReason };

/** active -> revoked; a revoked session stays revoked with its first reason. */
export const transitionRefreshSession: Transition<RefreshSession, RefreshSessionEvent> = (
  session,
  event,
  now,
) =>
  Either.right(
    session.revoked_at === null ? { ...session, revoked_at: now, revoked_reason: event.reason } : session,
  );

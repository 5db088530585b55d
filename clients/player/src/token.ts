/** What the player reads of a playback token: the session, its expiry and whether it is protected. */
export interface TokenClaims {
  readonly sessionId: string;
  readonly assetId: string;
  /** Epoch milliseconds. */
  readonly expiresAt: number;
  readonly drm: boolean;
}

const base64UrlJson = (part: string): unknown => {
  const base64 = part.replace(/-/g, "+").replace(/_/g, "/");
  const binary = atob(base64 + "=".repeat((4 - (base64.length % 4)) % 4));
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  return JSON.parse(new TextDecoder().decode(bytes));
};

/**
 * The claims of a playback token (`v1.` and a compact JWS), read without verifying it: the player
 * only plans with them (when to ask for a new token, whether to ask for an entitlement); the media
 * app checks every request. Undefined for anything that is not such a token.
 */
export const readToken = (token: string): TokenClaims | undefined => {
  const parts = token.split(".");
  if (parts.length !== 4 || parts[0] !== "v1") return undefined;
  try {
    const claims = base64UrlJson(parts[2] as string) as {
      sid?: unknown;
      aid?: unknown;
      exp?: unknown;
      drm?: unknown;
    };
    if (typeof claims.sid !== "string" || typeof claims.aid !== "string" || typeof claims.exp !== "number")
      return undefined;
    return {
      sessionId: claims.sid,
      assetId: claims.aid,
      expiresAt: claims.exp * 1000,
      drm: claims.drm === true,
    };
  } catch {
    return undefined;
  }
};

/**
 * When to ask for the next token: a quarter of the token's life before it ends, at least 10 s
 * and at most 60 s before, so that a 60 s token is renewed 15 s ahead and an hour's one a minute ahead.
 */
export const renewalDelayMs = (claims: TokenClaims, now: number) => {
  const left = claims.expiresAt - now;
  const margin = Math.min(60_000, Math.max(10_000, left / 4));
  return Math.max(0, left - margin);
};

/**
 * `url` with the token of its `/v1/play/{token}/` segment replaced: every file of a session lives
 * there, so a playlist or segment URL hls.js resolved under the old token reaches the same file
 * with the new one.
 */
export const withToken = (url: string, token: string) =>
  url.replace(/\/v1\/play\/[^/?#]+\//, `/v1/play/${encodeURIComponent(token)}/`);

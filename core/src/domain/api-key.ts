import { Either } from "effect";
import type { TenantId } from "./ids.js";
import type { Scope } from "./scope.js";
import { illegal, type Transition } from "./transition.js";

/** The part of every key before the identifying characters. */
export const KEY_TAG = "vod";

export interface ApiKey {
  readonly id: string;
  readonly tenant_id: TenantId;
  readonly name: string;
  readonly prefix: string;
  readonly scopes: ReadonlyArray<Scope>;
  /** SHA-256 (hex) of the full key; the key itself is never stored. */
  readonly key_hash: string;
  readonly last_used_at: number | null;
  readonly expires_at: number | null;
  readonly revoked_at: number | null;
  readonly created_at: number;
}

export type ApiKeyStatus = "active" | "revoked" | "expired";

export const apiKeyStatus = (key: ApiKey, now: number): ApiKeyStatus =>
  key.revoked_at !== null
    ? "revoked"
    : key.expires_at !== null && key.expires_at <= now
      ? "expired"
      : "active";

export type ApiKeyEvent = { readonly type: "revoke" };

/** active -> revoked; revoking again keeps the first revoked_at (DECISIONS: 204 again). */
export const transitionApiKey: Transition<ApiKey, ApiKeyEvent> = (key, event, now) => {
  switch (event.type) {
    case "revoke":
      return Either.right(key.revoked_at === null ? { ...key, revoked_at: now } : key);
    default:
      return illegal("api_key", apiKeyStatus(key, now), (event as { type: string }).type);
  }
};

/** last_used_at is written at most once a minute per key, never once per request. */
export const LAST_USED_RESOLUTION_MS = 60_000;
export const shouldTouch = (key: ApiKey, now: number): boolean =>
  key.last_used_at === null || now - key.last_used_at >= LAST_USED_RESOLUTION_MS;

import { type Expiring, expiryState } from "./expiry.js";
import type { AssetId, PlaybackSessionId, TenantId } from "./ids.js";

export const PLAYBACK_TTL_MIN_SECONDS = 60;
export const PLAYBACK_TTL_MAX_SECONDS = 86_400;
export const PLAYBACK_TTL_DEFAULT_SECONDS = 3_600;

export interface PlaybackSession extends Expiring {
  readonly id: PlaybackSessionId;
  readonly tenant_id: TenantId;
  readonly asset_id: AssetId;
  /** Set when the session is revoked: its token stops working. */
  readonly ended_at: number | null;
  readonly drm: boolean;
}

export const playbackSessionState = (session: PlaybackSession, now: number) =>
  expiryState(session, session.ended_at, now, { ended: "ended", live: "active" });

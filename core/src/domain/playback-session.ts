export const PLAYBACK_TTL_MIN_SECONDS = 60;
export const PLAYBACK_TTL_MAX_SECONDS = 86_400;
export const PLAYBACK_TTL_DEFAULT_SECONDS = 3_600;

export interface PlaybackSession {
  readonly id: string;
  readonly tenant_id: string;
  readonly asset_id: string;
  readonly drm: boolean;
  readonly expires_at: number;
  readonly created_at: number;
  readonly ended_at: number | null;
}

export type PlaybackSessionState = "active" | "ended" | "expired";

export const playbackSessionState = (session: PlaybackSession, now: number): PlaybackSessionState =>
  session.ended_at !== null ? "ended" : session.expires_at <= now ? "expired" : "active";

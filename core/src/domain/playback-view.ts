/**
 * A view: one playback session that sent events (DECISIONS "Playback analytics"), folded from its
 * telemetry events as they are stored. The fold keeps what every metric needs per view, so that a
 * query reads views, never raw events. `docs/analytics.md` states each definition next to Mux's.
 */

/** The fields of a stored telemetry event that the fold reads. */
export interface ViewEvent {
  readonly tenant_id: string;
  readonly session_id: string;
  readonly asset_id: string;
  readonly received_at: number;
  readonly player_version: string | null;
  readonly event: string;
  readonly ts_ms: number;
  readonly rendition: string | null;
  readonly startup_ms: number | null;
}

export interface PlaybackView {
  readonly tenant_id: string;
  readonly session_id: string;
  readonly asset_id: string;
  /** The first player_version the view's batches named. */
  readonly player_version: string | null;
  /** The first rendition the view's events named: the one it started on. */
  readonly rendition: string | null;
  /** When the service received the view's first event: the view's time bucket is taken from it. */
  readonly first_received_at: number;
  /** The player clock of the latest event (the largest `ts_ms` seen). */
  readonly last_ts_ms: number;
  /** The player clock of the first `play`, for a startup time without `startup_ms`. */
  readonly play_ts_ms: number | null;
  readonly state: ViewState;
  /** Sent `play`. */
  readonly played: boolean;
  /** Sent `first_frame`. */
  readonly started: boolean;
  /** Sent `error` and did not play after it. */
  readonly failed: boolean;
  readonly startup_ms: number | null;
  readonly playing_ms: number;
  readonly stall_ms: number;
  /** `stall_start` events that began a stall. */
  readonly stalls: number;
}

/** Where the player is between two events, by the last event that changed it. */
export type ViewState = "idle" | "playing" | "paused" | "stalled" | "ended" | "errored";

export const VIEW_STATES: ReadonlyArray<ViewState> = [
  "idle",
  "playing",
  "paused",
  "stalled",
  "ended",
  "errored",
];

const newView = (event: ViewEvent): PlaybackView => ({
  tenant_id: event.tenant_id,
  session_id: event.session_id,
  asset_id: event.asset_id,
  player_version: event.player_version,
  rendition: event.rendition,
  first_received_at: event.received_at,
  last_ts_ms: event.ts_ms,
  play_ts_ms: null,
  state: "idle",
  played: false,
  started: false,
  failed: false,
  startup_ms: null,
  playing_ms: 0,
  stall_ms: 0,
  stalls: 0,
});

/**
 * The longest gap between two events that counts: a player sends a heartbeat every few seconds
 * while it plays, so a longer silence (a sleeping laptop, a frozen tab) is not watching.
 */
export const MAX_EVENT_GAP_MS = 300_000;

/**
 * The view after one more event, in the order stored. The time between two events (player clock)
 * counts as playing time when the view was playing, as stall time when it was stalled; a clock
 * that goes back, or a gap over
 * MAX_EVENT_GAP_MS, counts nothing. An event kind the fold does not know only moves the clock.
 */
export const foldViewEvent = (view: PlaybackView | undefined, event: ViewEvent): PlaybackView => {
  const before = view ?? newView(event);
  const gap = event.ts_ms - before.last_ts_ms;
  const elapsed = gap > 0 && gap <= MAX_EVENT_GAP_MS ? gap : 0;
  let v: PlaybackView = {
    ...before,
    player_version: before.player_version ?? event.player_version,
    rendition: before.rendition ?? event.rendition,
    first_received_at: Math.min(before.first_received_at, event.received_at),
    last_ts_ms: Math.max(before.last_ts_ms, event.ts_ms),
    playing_ms: before.playing_ms + (before.state === "playing" ? elapsed : 0),
    stall_ms: before.stall_ms + (before.state === "stalled" ? elapsed : 0),
  };
  // Playing again clears an earlier error: the view did not fail.
  const play = (): PlaybackView => ({ ...v, state: "playing", failed: false });
  switch (event.event) {
    case "play":
      v = { ...v, played: true, play_ts_ms: v.play_ts_ms ?? event.ts_ms };
      if (v.started && v.state !== "stalled" && v.state !== "playing") v = play();
      break;
    case "first_frame":
      if (!v.started) {
        const fromPlay = v.play_ts_ms === null ? null : Math.max(0, event.ts_ms - v.play_ts_ms);
        v = { ...v, started: true, startup_ms: event.startup_ms ?? fromPlay };
      }
      v = play();
      break;
    case "pause":
      if (v.state === "playing") v = { ...v, state: "paused" };
      break;
    case "stall_start":
      // Waiting before the first frame is startup time, not a stall.
      if (v.started && v.state !== "stalled") v = { ...v, state: "stalled", stalls: v.stalls + 1 };
      break;
    case "stall_end":
      if (v.state === "stalled") v = play();
      break;
    case "error":
      v = { ...v, state: "errored", failed: true };
      break;
    case "ended":
      v = { ...v, state: "ended" };
      break;
    default:
      // heartbeat, seek, rendition_change and kinds added later: the clock moves, nothing else.
      break;
  }
  return v;
};

/** Folds a batch of events, in the order given, into the views they belong to. */
export const foldViews = (
  views: ReadonlyMap<string, PlaybackView>,
  events: ReadonlyArray<ViewEvent>,
): Map<string, PlaybackView> => {
  const changed = new Map<string, PlaybackView>();
  for (const event of events) {
    const key = viewKey(event.tenant_id, event.session_id);
    changed.set(key, foldViewEvent(changed.get(key) ?? views.get(key), event));
  }
  return changed;
};

export const viewKey = (tenantId: string, sessionId: string) => `${tenantId}\n${sessionId}`;

/** Views whose player asked to play and never showed a first frame. */
export const exitedBeforeStart = (view: PlaybackView) => view.played && !view.started;

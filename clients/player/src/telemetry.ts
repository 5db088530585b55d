/** One playback event as the telemetry intake takes it (docs/playback.md "Telemetry"). */
export interface PlaybackEvent {
  readonly event: string;
  readonly ts_ms: number;
  readonly playhead_ms: number;
  readonly rendition?: string;
  readonly error_code?: string;
  readonly startup_ms?: number;
  readonly stall_ms?: number;
  readonly bitrate_kbps?: number;
  readonly [extra: string]: unknown;
}

/** The intake's limits: at most 50 events and 32 KiB a batch. */
const MAX_EVENTS = 50;
const MAX_BYTES = 32 * 1024;

/**
 * Batches of events to the session's telemetry URL, as `text/plain` so that no CORS preflight
 * precedes them. `flush` sends what is queued; `flush(true)` as the page goes away uses
 * `sendBeacon`, which outlives the page.
 */
export class TelemetryBatches {
  private queue: PlaybackEvent[] = [];

  constructor(
    private readonly url: string,
    private readonly token: () => string,
    private readonly playerVersion: string,
  ) {}

  add(event: PlaybackEvent) {
    this.queue.push(event);
    if (this.queue.length >= MAX_EVENTS) this.flush();
  }

  flush(leaving = false) {
    while (this.queue.length > 0) {
      let events = this.queue.splice(0, MAX_EVENTS);
      let body = this.body(events);
      // A batch over the byte cap (events with large extras) goes as smaller ones.
      while (new Blob([body]).size > MAX_BYTES && events.length > 1) {
        const half = Math.ceil(events.length / 2);
        this.queue.unshift(...events.slice(half));
        events = events.slice(0, half);
        body = this.body(events);
      }
      if (leaving && navigator.sendBeacon(this.url, new Blob([body], { type: "text/plain" }))) continue;
      void fetch(this.url, {
        method: "POST",
        body,
        headers: { "content-type": "text/plain" },
        keepalive: true,
        mode: "cors",
        credentials: "omit",
      }).catch(() => undefined);
    }
  }

  private body(events: ReadonlyArray<PlaybackEvent>) {
    return JSON.stringify({ token: this.token(), player_version: this.playerVersion, events });
  }
}

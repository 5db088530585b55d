import type { Effect } from "effect";
import type { ViewPercentiles, ViewQuery, ViewTotals } from "../domain/analytics.js";
import type { AssetId, PlaybackSessionId, TenantId } from "../domain/ids.js";
import type { StorageError } from "../errors.js";

/** One player beacon event as stored: the spec's fields, the session it came from, the rest kept. */
export interface TelemetryEvent {
  readonly tenant_id: TenantId;
  readonly session_id: PlaybackSessionId;
  readonly asset_id: AssetId;
  /** When the service took the batch (epoch ms). */
  readonly received_at: number;
  readonly player_version: string | null;
  readonly event: string;
  readonly ts_ms: number;
  readonly playhead_ms: number;
  readonly rendition: string | null;
  readonly error_code: string | null;
  readonly startup_ms: number | null;
  readonly stall_ms: number | null;
  readonly bitrate_kbps: number | null;
  /** Every further key of the event, as sent. */
  readonly extra: Readonly<Record<string, unknown>>;
}

/**
 * Where player telemetry goes, and the playback analytics kept from it. Each event is stored raw
 * and folded into its view (`foldViewEvent`, per tenant and playback session) in the same write,
 * so that analytics read views, never raw events.
 */
export interface TelemetrySink {
  /**
   * Stores the events and folds them into their views, in the order given, atomically: either
   * both or neither. Resolves only once they are stored. Concurrent calls may share one write
   * (group commit); each call still learns whether its own events were stored.
   */
  write(events: ReadonlyArray<TelemetryEvent>): Effect.Effect<void, StorageError>;
  /** Deletes every stored event of the tenant (a deleted tenant's); harmless to repeat. */
  removeTenant(tenantId: string): Effect.Effect<void, StorageError>;
  /** The sums over the views a query reads, one row per bucket and group that has views, in order. */
  viewTotals(query: ViewQuery): Effect.Effect<ReadonlyArray<ViewTotals>, StorageError>;
  /**
   * Startup-time percentiles of the views a query reads that have a startup time, one row per
   * bucket and group that has any, in order: nearest rank over the startup times' log-histogram
   * buckets (`percentilesOfBuckets`), so within 1% of the exact nearest rank (1 ms below 1 ms),
   * and the same values from every adapter.
   */
  startupPercentiles(query: ViewQuery): Effect.Effect<ReadonlyArray<ViewPercentiles>, StorageError>;
  /** Deletes raw events received before `cutoff` (epoch ms), of every tenant; views stay. Returns how many. */
  deleteEventsReceivedBefore(cutoff: number): Effect.Effect<number, StorageError>;
}

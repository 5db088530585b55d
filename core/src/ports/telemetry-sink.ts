import type { Effect } from "effect";
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

/** Where player telemetry goes. */
export interface TelemetrySink {
  /**
   * Stores the events; resolves only once they are stored. Concurrent calls may share one write
   * (group commit); each call still learns whether its own events were stored.
   */
  write(events: ReadonlyArray<TelemetryEvent>): Effect.Effect<void, StorageError>;
  /** Deletes every stored event of the tenant (a deleted tenant's); harmless to repeat. */
  removeTenant(tenantId: string): Effect.Effect<void, StorageError>;
}

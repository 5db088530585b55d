import { Effect, Option, Schema } from "effect";
import type { VodConfig } from "../config.js";
import { Unauthorized } from "../errors.js";
import type { TelemetryEvent } from "../ports/telemetry-sink.js";
import { inputProblems, Requests } from "../schema/index.js";
import type { VodPorts } from "../tokens.js";
import { TELEMETRY_GRACE_MS, type VerifyPlaybackToken } from "./playback-sessions.js";
import { enforceRate } from "./support.js";

/** A beacon of a suspended tenant's session is 401, not 403 (DECISIONS). */
const beaconOfSuspendedTenant = () => new Unauthorized({ message: "tenant is suspended" });

const decodeEvent = Schema.decodeUnknownOption(Requests.TelemetryEventInput);

/** The spec's event fields; every other key of an event is kept in `extra`. */
const KNOWN_EVENT_KEYS: ReadonlySet<string> = new Set(Object.keys(Requests.TelemetryEventInput.fields));

/** Telemetry intake: a player's beacons, checked against its playback token, into the sink. */
export const makeTelemetryIntake = (ports: VodPorts, config: VodConfig, verify: VerifyPlaybackToken) => {
  const { clock, telemetrySink, rateLimiter, metrics } = ports;

  /**
   * A telemetry batch, decoded by the catalog's decode (NULs left to the per-event check below:
   * such an event is dropped, not the batch): stores the valid events, counts them.
   */
  const telemetry = (batch: typeof Requests.TelemetryBatch.Type) =>
    Effect.gen(function* () {
      const claims = yield* verify(batch.token, {
        leewayMs: TELEMETRY_GRACE_MS,
        suspended: beaconOfSuspendedTenant,
      });
      const now = clock.now();
      yield* enforceRate(
        rateLimiter,
        `telemetry:${claims.sessionId}`,
        { limit: config.rateLimits.telemetryPerSessionPerMinute, windowMs: 60_000 },
        now,
      );
      const events: TelemetryEvent[] = [];
      for (const raw of batch.events) {
        const event = decodeEvent(raw);
        if (Option.isNone(event) || typeof raw !== "object" || raw === null) continue;
        // Postgres keeps no NUL in text or JSON: such an event is dropped like any invalid one.
        if (inputProblems(raw).length > 0) continue;
        const extra: Record<string, unknown> = {};
        for (const [k, v] of Object.entries(raw)) if (!KNOWN_EVENT_KEYS.has(k)) extra[k] = v;
        const e = event.value;
        events.push({
          tenant_id: claims.tenantId,
          session_id: claims.sessionId,
          asset_id: claims.assetId,
          received_at: now,
          player_version: batch.player_version ?? null,
          event: e.event,
          ts_ms: e.ts_ms,
          playhead_ms: e.playhead_ms,
          rendition: e.rendition ?? null,
          error_code: e.error_code ?? null,
          startup_ms: e.startup_ms ?? null,
          stall_ms: e.stall_ms ?? null,
          bitrate_kbps: e.bitrate_kbps ?? null,
          extra,
        });
      }
      if (events.length > 0) {
        yield* telemetrySink.write(events);
        metrics?.telemetryStored(events.length);
      }
      return { accepted: events.length };
    });

  return { telemetry };
};

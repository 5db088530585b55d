import { Effect, Option, Schema } from "effect";
import type { VodConfig } from "../config.js";
import { InvalidRequest } from "../errors.js";
import type { TelemetryEvent } from "../ports/telemetry-sink.js";
import { Requests } from "../schema/index.js";
import type { VodPorts } from "../tokens.js";
import { TELEMETRY_GRACE_MS, type VerifyPlaybackToken } from "./playback-sessions.js";
import { enforceRate, invalidBody, refuseHostile } from "./support.js";

const decodeEvent = Schema.decodeUnknownOption(Requests.TelemetryEventInput);

/** The spec's event fields; every other key of an event is kept in `extra`. */
const KNOWN_EVENT_KEYS: ReadonlySet<string> = new Set(Object.keys(Requests.TelemetryEventInput.fields));

/** Telemetry intake: a player's beacons, checked against its playback token, into the sink. */
export const makeTelemetryIntake = (ports: VodPorts, config: VodConfig, verify: VerifyPlaybackToken) => {
  const { clock, telemetrySink, rateLimiter, metrics } = ports;

  /** A telemetry batch (already size-checked by the host): stores the valid events, counts them. */
  const telemetry = (bodyText: string) =>
    Effect.gen(function* () {
      const parsed = yield* Effect.try({
        try: () => JSON.parse(bodyText) as unknown,
        catch: () =>
          new InvalidRequest({
            message: "body is not JSON",
            details: { fields: [{ path: [], message: "not JSON" }] },
          }),
      });
      // NULs are left to the per-event check below: such an event is dropped, not the batch.
      yield* refuseHostile(parsed, "not a telemetry batch", { nul: false });
      const batch = yield* Effect.mapError(
        Schema.decodeUnknown(Requests.TelemetryBatch, { errors: "all" })(parsed),
        invalidBody("not a telemetry batch"),
      );
      const claims = yield* verify(batch.token, TELEMETRY_GRACE_MS);
      const now = clock.now();
      yield* enforceRate(
        rateLimiter,
        `telemetry:${claims.sessionId}`,
        { limit: config.rateLimits.telemetryPerSessionPerMinute, windowMs: 60_000 },
        now,
      );
      // JSON text can carry a NUL only as the \u0000 escape: one look at the body tells whether
      // any event needs the per-event check.
      const mayHoldNul = bodyText.includes("\\u0000");
      const events: TelemetryEvent[] = [];
      for (const raw of batch.events) {
        const event = decodeEvent(raw);
        if (Option.isNone(event) || typeof raw !== "object" || raw === null) continue;
        // Postgres keeps no NUL in text or JSON: such an event is dropped like any invalid one.
        if (mayHoldNul && JSON.stringify(raw).includes("\\u0000")) continue;
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

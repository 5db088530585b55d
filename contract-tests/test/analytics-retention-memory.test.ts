import {
  manualClock,
  memoryObjectStore,
  memoryRateLimiter,
  memoryRevocationStore,
  memoryStorage,
  memoryTelemetrySink,
  randomIds,
} from "@vod/adapter-memory";
import {
  AssetId,
  createVod,
  PlaybackSessionId,
  type Principal,
  type TelemetryEvent,
  TenantId,
  type VodPorts,
} from "@vod/core";
import { catalogLinks } from "@vod/http";
import { Effect } from "effect";
import { describe, expect, it } from "vitest";

const DAY = 86_400_000;

/** A port this test never runs: an effect of any of its methods dies, failing the test loudly. */
const unused = <T extends object>(name: string): T =>
  new Proxy({} as T, {
    get: (_, method) => () =>
      Effect.die(new Error(`${name}.${String(method)} was not expected in this test`)),
  });

const platform = (retentionMs: number | null) => {
  const clock = manualClock(1_795_000_000_000);
  const sink = memoryTelemetrySink();
  const ports: VodPorts = {
    clock,
    ids: randomIds(),
    storage: memoryStorage(),
    passwordHasher: unused("passwordHasher"),
    tokenSigner: unused("tokenSigner"),
    identityVerifier: unused("identityVerifier"),
    rateLimiter: memoryRateLimiter(),
    objectStore: memoryObjectStore(),
    revocationStore: memoryRevocationStore(),
    links: catalogLinks({ media: "http://localhost:8080", drm: "http://localhost:8080" }),
    telemetrySink: sink,
  };
  return { clock, sink, vod: createVod(ports, { telemetryRetentionMs: retentionMs }) };
};

const principal: Principal = {
  kind: "api_key",
  keyId: "key_retention",
  scope: "read",
  tenant: {
    id: TenantId("tnt_retention"),
    slug: "retention",
    name: "Retention",
    plan: "free",
    status: "active",
    created_at: 0,
  },
};

const event = (session: string, receivedAt: number, name: string, ts: number): TelemetryEvent => ({
  tenant_id: principal.tenant.id,
  session_id: PlaybackSessionId(session),
  asset_id: AssetId("ast_retention"),
  received_at: receivedAt,
  player_version: null,
  event: name,
  ts_ms: ts,
  playhead_ms: ts,
  rendition: null,
  error_code: null,
  startup_ms: null,
  stall_ms: null,
  bitrate_kbps: null,
  extra: {},
});

describe("raw telemetry retention (VOD_TELEMETRY_RETENTION_DAYS)", () => {
  it("deletes raw events received before now minus the retention, and the views still answer", async () => {
    const { clock, sink, vod } = platform(30 * DAY);
    const now = clock.now();
    const old = [
      event("pbs_old", now - 31 * DAY, "play", 0),
      event("pbs_old", now - 31 * DAY, "first_frame", 500),
    ];
    const recent = [event("pbs_new", now - DAY, "play", 0)];
    await Effect.runPromise(sink.write([...old, ...recent]));
    expect(await Effect.runPromise(vod.analytics.sweepRawEvents())).toBe(2);
    expect(sink.events).toEqual(recent);
    const views = await Effect.runPromise(
      vod.analytics.query(principal, "views", { from: now - 40 * DAY, to: now }),
    );
    expect(views).toEqual({ metric: "views", from: now - 40 * DAY, to: now, data: [{ value: 2 }] });
    // Run again: nothing more is past the retention.
    expect(await Effect.runPromise(vod.analytics.sweepRawEvents())).toBe(0);
  });

  it("keeps raw events for ever with no retention", async () => {
    const { clock, sink, vod } = platform(null);
    const events = [event("pbs_ancient", clock.now() - 3_000 * DAY, "play", 0)];
    await Effect.runPromise(sink.write(events));
    expect(await Effect.runPromise(vod.analytics.sweepRawEvents())).toBe(0);
    expect(sink.events).toEqual(events);
  });
});

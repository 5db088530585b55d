import { Effect, Either, Option, ParseResult, Schema } from "effect";
import type { VodConfig } from "../config.js";
import { PLAYBACK_TTL_DEFAULT_SECONDS, type PlaybackSession } from "../domain/playback-session.js";
import {
  Conflict,
  Forbidden,
  InvalidRequest,
  NotFound,
  type StorageError,
  Unauthorized,
  UploadInProgress,
} from "../errors.js";
import type { ByteStream } from "../ports/object-store.js";
import type { TelemetryEvent } from "../ports/telemetry-sink.js";
import { inputProblems, Requests } from "../schema/index.js";
import type { VodPorts } from "../tokens.js";
import type { Principal } from "./authenticate.js";
import { makeContentKeys } from "./content-keys.js";
import { renditionsPrefix } from "./processing.js";
import { cachedRevocations } from "./revocations.js";
import { enforceRate, orNotFound } from "./support.js";

/** The version marker of playback tokens (spec part 9). */
export const PLAYBACK_TOKEN_PREFIX = "v1.";
/** Telemetry keeps accepting a session's beacons this long after it expires (DECISIONS). */
export const TELEMETRY_GRACE_MS = 15 * 60_000;
/** A segment URL of the store, for redirect delivery, lives this long (DECISIONS). */
export const DELIVERY_URL_TTL_MS = 300_000;
/** An entitlement lives at most this long, and never past its session. */
export const ENTITLEMENT_TTL_MS = 300_000;

/**
 * The byte range a client asked for, resolved once the file's size is known (a suffix range,
 * `bytes=-500`, means nothing without it): a range, "unsatisfiable", or undefined for the whole file.
 */
export type RequestedRange = (
  size: number,
) => { readonly start: number; readonly end: number } | "unsatisfiable" | undefined;

export interface PlaybackClaims {
  readonly sessionId: string;
  readonly tenantId: string;
  readonly assetId: string;
  readonly drm: boolean;
  readonly expiresAt: number;
}

const b64url = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64url");

const CONTENT_TYPES: Record<string, string> = {
  m3u8: "application/vnd.apple.mpegurl",
  mpd: "application/dash+xml",
  m4s: "video/iso.segment",
  mp4: "video/mp4",
  jpg: "image/jpeg",
};

type CreateInput = typeof Requests.CreatePlaybackBody.Type;

/**
 * The file names an asset's renditions can have: one or two plain segments (`master.m3u8`,
 * `720p/3.m4s`), each a short name of letters, digits, `_` or `-` with one extension of a type
 * we deliver. Anything else cannot be one of the asset's files and is 404 before the object
 * store is asked: a NUL, a dot segment or a 5,000-character name never becomes an object key.
 */
const RENDITION_FILE = new RegExp(
  `^(?:[A-Za-z0-9_-]{1,64}/)?[A-Za-z0-9_-]{1,64}\\.(?:${Object.keys(CONTENT_TYPES).join("|")})$`,
);
export const isRenditionFile = (path: string) => RENDITION_FILE.test(path);

const decodeEvent = Schema.decodeUnknownOption(Requests.TelemetryEventInput);

/** Input nested too deep (or holding a NUL, unless `nul: false`) is refused before any schema sees it. */
const refuseHostile = (value: unknown, message: string, options?: { readonly nul?: boolean }) => {
  const fields = inputProblems(value, options);
  return fields.length === 0
    ? Effect.void
    : Effect.fail(new InvalidRequest({ message, details: { fields } }));
};
/** The spec's event fields; every other key of an event is kept in `extra`. */
const KNOWN_EVENT_KEYS: ReadonlySet<string> = new Set(Object.keys(Requests.TelemetryEventInput.fields));

export const makePlayback = (ports: VodPorts, config: VodConfig) => {
  const { clock, ids, storage, tokenSigner, objectStore: store, telemetrySink, rateLimiter } = ports;
  const revocations = cachedRevocations(ports.revocationStore, clock);
  const keys = makeContentKeys(ports, config.drmMasterKey);

  const create = (principal: Principal, input: CreateInput) =>
    Effect.gen(function* () {
      const asset = yield* orNotFound("asset")(storage.assets.get(principal.tenant.id, input.asset_id));
      if (asset.status !== "ready")
        return yield* Effect.fail(
          new UploadInProgress({ message: `asset is ${asset.status}, not ready to play` }),
        );
      const now = clock.now();
      const session: PlaybackSession = {
        id: ids.id("playback"),
        tenant_id: asset.tenant_id,
        asset_id: asset.id,
        drm: asset.drm_enabled,
        expires_at: now + (input.ttl_seconds ?? PLAYBACK_TTL_DEFAULT_SECONDS) * 1000,
        created_at: now,
        ended_at: null,
      };
      yield* storage.playbackSessions.insert(session);
      const jws = yield* tokenSigner.sign(
        "playback",
        { sid: session.id, tid: session.tenant_id, aid: session.asset_id, drm: session.drm },
        { issuedAt: now, expiresAt: session.expires_at },
      );
      const token = `${PLAYBACK_TOKEN_PREFIX}${jws}`;
      return {
        session: {
          id: session.id,
          asset_id: session.asset_id,
          expires_at: session.expires_at,
          drm: session.drm,
        },
        token,
        urls: {
          manifest: `${config.mediaUrl}/v1/play/${token}/master.m3u8`,
          telemetry: `${config.mediaUrl}/v1/telemetry`,
          ...(session.drm ? { entitlement: `${config.drmUrl}/v1/drm/entitlement` } : {}),
        },
      };
    });

  /** Ends the session: its token stops working on every node within the revocation cache's age. */
  const revoke = (principal: Principal, id: string) =>
    Effect.gen(function* () {
      const session = yield* orNotFound("playback session")(
        storage.playbackSessions.get(principal.tenant.id, id),
      );
      yield* storage.playbackSessions.end(session.tenant_id, session.id, clock.now());
      yield* revocations.revoke(session.id, session.expires_at + TELEMETRY_GRACE_MS);
    });

  // Verified tokens, so a player's many requests (segments, beacons) cost one signature check;
  // revocation is still checked on every request. Bounded: cleared when it grows past the cap.
  const verifiedTokens = new Map<string, PlaybackClaims>();
  const VERIFIED_TOKENS_CAP = 50_000;

  /**
   * A playback token's claims, or 401 for a forged, expired or revoked one. A valid credential of
   * another kind (an access token) is 403, as DECISIONS says.
   */
  const verify = (
    token: string | undefined,
    leewayMs = 0,
  ): Effect.Effect<PlaybackClaims, Unauthorized | Forbidden | StorageError> =>
    Effect.gen(function* () {
      if (!token) return yield* Effect.fail(new Unauthorized({ message: "missing playback token" }));
      const now = clock.now();
      if (!token.startsWith(PLAYBACK_TOKEN_PREFIX)) {
        const asAccess = yield* Effect.either(tokenSigner.verify("access", token, { now }));
        return yield* Effect.fail(
          Either.isRight(asAccess)
            ? new Forbidden({ message: "an access token is not a playback token" })
            : new Unauthorized({ message: "invalid playback token" }),
        );
      }
      const claims = yield* claimsOf(token, now, leewayMs);
      if (yield* revocations.isRevoked(claims.sessionId, now))
        return yield* Effect.fail(new Unauthorized({ message: "playback session has ended" }));
      return claims;
    });

  /** The claims of a `v1.` token: from the cache of verified tokens, or by checking its signature. */
  const claimsOf = (
    token: string,
    now: number,
    leewayMs: number,
  ): Effect.Effect<PlaybackClaims, Unauthorized> => {
    const cached = verifiedTokens.get(token);
    if (cached && now < cached.expiresAt + leewayMs) return Effect.succeed(cached);
    return Effect.gen(function* () {
      const verified = yield* Effect.mapError(
        tokenSigner.verify("playback", token.slice(PLAYBACK_TOKEN_PREFIX.length), { now, leewayMs }),
        (rejected) =>
          new Unauthorized({
            message: rejected.reason === "expired" ? "playback token expired" : "invalid playback token",
          }),
      );
      const { sid, tid, aid, drm } = verified.claims;
      if (
        typeof sid !== "string" ||
        typeof tid !== "string" ||
        typeof aid !== "string" ||
        typeof drm !== "boolean"
      )
        return yield* Effect.fail(new Unauthorized({ message: "invalid playback token" }));
      const claims = { sessionId: sid, tenantId: tid, assetId: aid, drm, expiresAt: verified.exp * 1000 };
      if (verifiedTokens.size >= VERIFIED_TOKENS_CAP) verifiedTokens.clear();
      verifiedTokens.set(token, claims);
      return claims;
    });
  };

  /**
   * A file of the session's renditions (`master.m3u8`, `720p/playlist.m3u8`, `720p/3.m4s`, ...).
   * Playlists use relative URIs, so every URI a player resolves stays under the token's path.
   */
  const open = (token: string, path: string, range?: RequestedRange) =>
    Effect.gen(function* () {
      const claims = yield* verify(token);
      if (!isRenditionFile(path)) return yield* Effect.fail(new NotFound({ message: "no such file" }));
      const key = `${renditionsPrefix(claims.tenantId, claims.assetId)}${path}`;
      const head = yield* store.head(key);
      if (Option.isNone(head)) return yield* Effect.fail(new NotFound({ message: "no such file" }));
      // Segments may come straight from the store; playlists never do (token and revocation
      // checked on each, and the token carried in every URI).
      const isPlaylist = path.endsWith(".m3u8") || path.endsWith(".mpd");
      if (store.deliveryUrl && !isPlaylist) {
        const url = yield* store.deliveryUrl(key, clock.now() + DELIVERY_URL_TTL_MS);
        return { kind: "redirect" as const, url };
      }
      const size = head.value.size;
      const wanted = range?.(size);
      if (wanted === "unsatisfiable") return { kind: "unsatisfiable" as const, size };
      const bounded = wanted ? { start: wanted.start, end: Math.min(wanted.end, size - 1) } : undefined;
      const body: ByteStream = yield* Effect.catchTag(store.get(key, bounded), "NotFound", () =>
        Effect.fail(new NotFound({ message: "no such file" })),
      );
      const contentType = CONTENT_TYPES[path.slice(path.lastIndexOf(".") + 1)] ?? head.value.contentType;
      return { kind: "file" as const, body, size, range: bounded, contentType, expiresAt: claims.expiresAt };
    });

  /** The entitlement of a DRM session: licence headers and key systems (DECISIONS, content protection). */
  const entitlement = (token: string | undefined) =>
    Effect.gen(function* () {
      const claims = yield* verify(token);
      if (!claims.drm)
        return yield* Effect.fail(
          new Conflict({ message: "this playback session has no content protection" }),
        );
      const now = clock.now();
      const expiresAt = Math.min(claims.expiresAt, now + ENTITLEMENT_TTL_MS);
      const license = yield* tokenSigner.sign(
        "license",
        { sid: claims.sessionId, tid: claims.tenantId, aid: claims.assetId },
        { issuedAt: now, expiresAt },
      );
      const systems: Record<string, { license_url: string; certificate_url?: string }> = {
        "org.w3.clearkey": { license_url: `${config.drmUrl}/v1/drm/clearkey/license` },
      };
      if (config.keySystems.widevine)
        systems["com.widevine.alpha"] = { license_url: config.keySystems.widevine };
      if (config.keySystems.playready)
        systems["com.microsoft.playready"] = { license_url: config.keySystems.playready };
      if (config.keySystems.fairplay)
        systems["com.apple.fps"] = {
          license_url: config.keySystems.fairplay.licenseUrl,
          certificate_url: config.keySystems.fairplay.certificateUrl,
        };
      return {
        expires_at: expiresAt,
        license_headers: { "x-vod-license-token": license },
        key_systems: systems,
      };
    });

  /** The W3C ClearKey licence: the content key, only to a holder of a valid licence token. */
  const clearKeyLicense = (licenseToken: string | undefined, request: unknown) =>
    Effect.gen(function* () {
      if (!licenseToken) return yield* Effect.fail(new Unauthorized({ message: "missing licence token" }));
      const now = clock.now();
      const verified = yield* Effect.mapError(
        tokenSigner.verify("license", licenseToken, { now }),
        () => new Unauthorized({ message: "invalid or expired licence token" }),
      );
      const { sid, tid, aid } = verified.claims;
      if (typeof sid !== "string" || typeof tid !== "string" || typeof aid !== "string")
        return yield* Effect.fail(new Unauthorized({ message: "invalid licence token" }));
      if (yield* revocations.isRevoked(sid, now))
        return yield* Effect.fail(new Unauthorized({ message: "playback session has ended" }));
      yield* refuseHostile(request, "not a ClearKey licence request");
      const body = yield* Effect.mapError(
        Schema.decodeUnknown(Requests.ClearKeyRequest)(request),
        (e) =>
          new InvalidRequest({
            message: "not a ClearKey licence request",
            details: {
              fields: ParseResult.ArrayFormatter.formatErrorSync(e).map((i) => ({
                path: i.path,
                message: i.message,
              })),
            },
          }),
      );
      const key = yield* keys.find(tid, aid);
      if (Option.isNone(key))
        return yield* Effect.fail(new NotFound({ message: "no content key for this asset" }));
      const kid = b64url(key.value.kid);
      return {
        keys: body.kids.includes(kid) ? [{ kty: "oct" as const, kid, k: b64url(key.value.key) }] : [],
        type: body.type ?? "temporary",
      };
    });

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
        (e) =>
          new InvalidRequest({
            message: "not a telemetry batch",
            details: {
              fields: ParseResult.ArrayFormatter.formatErrorSync(e).map((i) => ({
                path: i.path,
                message: i.message,
              })),
            },
          }),
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
      if (events.length > 0) yield* telemetrySink.write(events);
      return { accepted: events.length };
    });

  return { create, revoke, verify, open, entitlement, clearKeyLicense, telemetry, contentKeys: keys };
};

export type Playback = ReturnType<typeof makePlayback>;

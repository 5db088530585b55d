import { Effect, Either, Option, Schema } from "effect";
import type { Asset, StaticRenditionName } from "../domain/asset.js";
import type { AssetId, PlaybackSessionId, TenantId } from "../domain/ids.js";
import { PLAYBACK_TTL_DEFAULT_SECONDS, type PlaybackSession } from "../domain/playback-session.js";
import { Forbidden, type StorageError, Unauthorized, UploadInProgress } from "../errors.js";
import type { RevocationStore } from "../ports/revocation-store.js";
import type { Requests } from "../schema/index.js";
import type { VodPorts } from "../tokens.js";
import { type Principal, refuseUnlessActive, type TenantIsActive, tenantSuspended } from "./authenticate.js";
import { orNotFound } from "./support.js";

/** The version marker of playback tokens (spec part 9). */
export const PLAYBACK_TOKEN_PREFIX = "v1.";
/** Telemetry keeps accepting a session's beacons this long after it expires (DECISIONS). */
export const TELEMETRY_GRACE_MS = 15 * 60_000;

export interface PlaybackClaims {
  readonly sessionId: PlaybackSessionId;
  readonly tenantId: TenantId;
  readonly assetId: AssetId;
  readonly drm: boolean;
  readonly expiresAt: number;
}

/** How a token check treats what the default would refuse. */
export interface VerifyOptions {
  /** Accepts a token this long past its expiry. */
  readonly leewayMs?: number;
  /** What a suspended tenant's token gets: 403 by default; telemetry answers 401 (DECISIONS). */
  readonly suspended?: () => Unauthorized | Forbidden;
}

/** Checks a playback token: what delivery, entitlement and telemetry all start with. */
export type VerifyPlaybackToken = (
  token: string | undefined,
  options?: VerifyOptions,
) => Effect.Effect<PlaybackClaims, Unauthorized | Forbidden | StorageError>;

/**
 * What a playback token carries (short names keep the token, which is in every segment URL,
 * short). Other claims of the token are ignored.
 */
const PlaybackTokenClaims = Schema.Struct({
  sid: Schema.String.pipe(Schema.brand("PlaybackSessionId")),
  tid: Schema.String.pipe(Schema.brand("TenantId")),
  aid: Schema.String.pipe(Schema.brand("AssetId")),
  drm: Schema.Boolean,
});
const decodeClaims = Schema.decodeUnknownOption(PlaybackTokenClaims);

type CreateInput = typeof Requests.CreatePlaybackBody.Type;

/** Playback sessions: creating one signs its token, revoking one ends it, `verify` checks a token. */
export const makePlaybackSessions = (
  ports: VodPorts,
  revocations: RevocationStore,
  tenantIsActive: TenantIsActive,
) => {
  const { clock, ids, links, storage, tokenSigner } = ports;

  /** The session's URLs of the static renditions that are ready (DECISIONS: "where made"). */
  const staticUrls = (asset: Asset, token: string) => {
    const ready = (name: StaticRenditionName) =>
      asset.mp4_support === "standard" &&
      asset.static_renditions.some((r) => r.name === name && r.status === "ready");
    return {
      ...(ready("high.mp4") ? { mp4_high: links.staticRendition(token, "high.mp4") } : {}),
      ...(ready("low.mp4") ? { mp4_low: links.staticRendition(token, "low.mp4") } : {}),
      ...(ready("audio.m4a") ? { audio: links.staticRendition(token, "audio.m4a") } : {}),
    };
  };

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
        {
          sid: session.id,
          tid: session.tenant_id,
          aid: session.asset_id,
          drm: session.drm,
        } satisfies typeof PlaybackTokenClaims.Type,
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
          manifest: links.playFile(token, "master.m3u8"),
          telemetry: links.telemetry(),
          ...(session.drm ? { entitlement: links.entitlement() } : {}),
          thumbnail: links.thumbnail(token),
          storyboard: links.storyboard(token),
          dash: links.playFile(token, "manifest.mpd"),
          ...staticUrls(asset, token),
        },
      };
    });

  /** Ends the session: its token stops working on every node within the revocation cache's age. */
  const revoke = (principal: Principal, id: PlaybackSessionId) =>
    Effect.gen(function* () {
      const session = yield* orNotFound("playback session")(
        storage.playbackSessions.get(principal.tenant.id, id),
      );
      yield* storage.playbackSessions.end(session.tenant_id, session.id, clock.now());
      yield* revocations.revoke(session.id, session.expires_at + TELEMETRY_GRACE_MS);
    });

  /**
   * Ends every playback session of an asset (it was deleted) and revokes each whose token may
   * still be presented, telemetry's grace included. Safe to run again: a retried deletion job
   * writes the revocations once more.
   */
  const endForAsset = (tenantId: TenantId, assetId: AssetId) =>
    Effect.gen(function* () {
      const now = clock.now();
      const sessions = yield* storage.playbackSessions.endForAsset(
        tenantId,
        assetId,
        now,
        now - TELEMETRY_GRACE_MS,
      );
      yield* Effect.forEach(
        sessions,
        (session) => revocations.revoke(session.id, session.expires_at + TELEMETRY_GRACE_MS),
        { concurrency: 8, discard: true },
      );
    });

  // Verified tokens, so a player's many requests (segments, beacons) cost one signature check;
  // revocation is still checked on every request. Bounded: cleared when it grows past the cap.
  const verifiedTokens = new Map<string, PlaybackClaims>();
  const VERIFIED_TOKENS_CAP = 50_000;

  /**
   * A playback token's claims, or 401 for a forged, expired or revoked one. A valid credential of
   * another kind (an access token) is 403, as DECISIONS says, and so is a suspended tenant's token.
   */
  const verify: VerifyPlaybackToken = (token, { leewayMs = 0, suspended = tenantSuspended } = {}) =>
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
      yield* refuseUnlessActive(yield* tenantIsActive(claims.tenantId), suspended);
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
      const decoded = decodeClaims(verified.claims);
      if (Option.isNone(decoded))
        return yield* Effect.fail(new Unauthorized({ message: "invalid playback token" }));
      const { sid, tid, aid, drm } = decoded.value;
      const claims = { sessionId: sid, tenantId: tid, assetId: aid, drm, expiresAt: verified.exp * 1000 };
      if (verifiedTokens.size >= VERIFIED_TOKENS_CAP) verifiedTokens.clear();
      verifiedTokens.set(token, claims);
      return claims;
    });
  };

  return { create, revoke, endForAsset, verify };
};

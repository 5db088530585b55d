import { Effect, Option, Schema } from "effect";
import type { VodConfig } from "../config.js";
import { Conflict, NotFound, Unauthorized } from "../errors.js";
import type { RevocationStore } from "../ports/revocation-store.js";
import type { Requests } from "../schema/index.js";
import type { VodPorts } from "../tokens.js";
import { refuseUnlessActive, type TenantIsActive } from "./authenticate.js";
import type { makeContentKeys } from "./content-keys.js";
import type { VerifyPlaybackToken } from "./playback-sessions.js";

/** An entitlement lives at most this long, and never past its session. */
export const ENTITLEMENT_TTL_MS = 300_000;

/** What a licence token carries: the playback session it was issued for. */
const LicenseTokenClaims = Schema.Struct({
  sid: Schema.String.pipe(Schema.brand("PlaybackSessionId")),
  tid: Schema.String.pipe(Schema.brand("TenantId")),
  aid: Schema.String.pipe(Schema.brand("AssetId")),
});
const decodeLicenseClaims = Schema.decodeUnknownOption(LicenseTokenClaims);
export type LicenseClaims = typeof LicenseTokenClaims.Type;

const b64url = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64url");

/** Content protection: a DRM session's entitlement, and the ClearKey licence it leads to. */
export const makeEntitlement = (
  ports: VodPorts,
  config: VodConfig,
  verify: VerifyPlaybackToken,
  revocations: RevocationStore,
  keys: ReturnType<typeof makeContentKeys>,
  tenantIsActive: TenantIsActive,
) => {
  const { clock, tokenSigner } = ports;

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
        {
          sid: claims.sessionId,
          tid: claims.tenantId,
          aid: claims.assetId,
        } satisfies typeof LicenseTokenClaims.Type,
        { issuedAt: now, expiresAt },
      );
      const systems: Record<string, { license_url: string; certificate_url?: string }> = {
        "org.w3.clearkey": { license_url: ports.links.clearKeyLicense() },
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

  /** The playback session a licence token was issued for, while the token and its session last. */
  const verifyLicense = (licenseToken: string | undefined) =>
    Effect.gen(function* () {
      if (!licenseToken) return yield* Effect.fail(new Unauthorized({ message: "missing licence token" }));
      const now = clock.now();
      const verified = yield* Effect.mapError(
        tokenSigner.verify("license", licenseToken, { now }),
        () => new Unauthorized({ message: "invalid or expired licence token" }),
      );
      const decoded = decodeLicenseClaims(verified.claims);
      if (Option.isNone(decoded))
        return yield* Effect.fail(new Unauthorized({ message: "invalid licence token" }));
      if (yield* revocations.isRevoked(decoded.value.sid, now))
        return yield* Effect.fail(new Unauthorized({ message: "playback session has ended" }));
      yield* refuseUnlessActive(yield* tenantIsActive(decoded.value.tid));
      return decoded.value;
    });

  /** The W3C ClearKey licence of a verified licence token's asset: its content key, if asked for. */
  const licenseFor = (claims: LicenseClaims, body: typeof Requests.ClearKeyRequest.Type) =>
    Effect.gen(function* () {
      const key = yield* keys.find(claims.tid, claims.aid);
      if (Option.isNone(key))
        return yield* Effect.fail(new NotFound({ message: "no content key for this asset" }));
      const kid = b64url(key.value.kid);
      return {
        keys: body.kids.includes(kid) ? [{ kty: "oct" as const, kid, k: b64url(key.value.key) }] : [],
        type: body.type ?? "temporary",
      };
    });

  /** The W3C ClearKey licence: the content key, only to a holder of a valid licence token. */
  const clearKeyLicense = (licenseToken: string | undefined, body: typeof Requests.ClearKeyRequest.Type) =>
    Effect.flatMap(verifyLicense(licenseToken), (claims) => licenseFor(claims, body));

  return { entitlement, verifyLicense, licenseFor, clearKeyLicense };
};

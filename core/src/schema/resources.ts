import { Schema } from "effect";
import { ANALYTICS_METRICS } from "../domain/analytics.js";
import {
  assetStatuses,
  assetVisibilities,
  failureCodes,
  mp4Supports,
  renditionStatuses,
  staticRenditionNames,
  staticRenditionStatuses,
} from "../domain/asset.js";
import { roles, scopes } from "../domain/scope.js";
import { tenantPlans, tenantStatuses } from "../domain/tenant.js";
import { textTrackStatuses } from "../domain/text-track.js";
import { deliveryStatuses, webhookEventTypes } from "../domain/webhook.js";

/** Epoch milliseconds. */
export const EpochMs = Schema.Int.annotations({
  identifier: "EpochMs",
  description: "milliseconds since the Unix epoch",
});

/** An absolute URL the client follows as it is (upload part, manifest, telemetry, entitlement). */
const Url = Schema.String.annotations({ jsonSchema: { type: "string", format: "uri" } });

/** A struct the OpenAPI document names as a component of its own. */
const component = <F extends Schema.Struct.Fields>(identifier: string, fields: F) =>
  Schema.Struct(fields).annotations({ identifier });

export const Scope = Schema.Literal(...scopes);
export const Role = Schema.Literal(...roles);
export const AssetStatus = Schema.Literal(...assetStatuses);
export const AssetVisibility = Schema.Literal(...assetVisibilities);
export const Mp4Support = Schema.Literal(...mp4Supports);

export const User = component("User", {
  id: Schema.String,
  tenant_id: Schema.String,
  email: Schema.String,
  email_verified: Schema.Boolean,
  name: Schema.NullOr(Schema.String),
  role: Role,
  created_at: EpochMs,
});

export const Tenant = component("Tenant", {
  id: Schema.String,
  slug: Schema.String,
  name: Schema.String,
  plan: Schema.Literal(...tenantPlans),
  status: Schema.Literal(...tenantStatuses),
  created_at: EpochMs,
});

export const ApiKey = component("ApiKey", {
  id: Schema.String,
  name: Schema.String,
  prefix: Schema.String,
  scopes: Schema.Array(Scope),
  last_used_at: Schema.NullOr(EpochMs),
  expires_at: Schema.NullOr(EpochMs),
  revoked_at: Schema.NullOr(EpochMs),
  created_at: EpochMs,
});

export const AssetRendition = component("AssetRendition", {
  name: Schema.String,
  width: Schema.Int,
  height: Schema.Int,
  bitrate_kbps: Schema.Int,
  status: Schema.Literal(...renditionStatuses),
});

export const StaticRendition = component("StaticRendition", {
  name: Schema.Literal(...staticRenditionNames),
  status: Schema.Literal(...staticRenditionStatuses),
  size_bytes: Schema.NullOr(Schema.Int),
});

export const Asset = component("Asset", {
  id: Schema.String,
  title: Schema.String,
  status: AssetStatus,
  failure_code: Schema.NullOr(Schema.Literal(...failureCodes)),
  source_width: Schema.NullOr(Schema.Int),
  source_height: Schema.NullOr(Schema.Int),
  source_fps: Schema.NullOr(Schema.Number),
  source_codec: Schema.NullOr(Schema.String),
  source_duration_ms: Schema.NullOr(Schema.Int),
  source_bitrate_kbps: Schema.NullOr(Schema.Int),
  origin_size_bytes: Schema.NullOr(Schema.Int),
  checksum_sha256: Schema.NullOr(Schema.String),
  drm_enabled: Schema.Boolean,
  visibility: AssetVisibility,
  published_at: Schema.NullOr(EpochMs),
  renditions: Schema.Array(AssetRendition),
  ready_at: Schema.NullOr(EpochMs),
  mp4_support: Mp4Support,
  static_renditions: Schema.Array(StaticRendition),
  created_at: EpochMs,
});

export const TextTrack = component("TextTrack", {
  id: Schema.String,
  type: Schema.Literal("text"),
  language_code: Schema.String,
  name: Schema.String,
  closed_captions: Schema.Boolean,
  status: Schema.Literal(...textTrackStatuses),
  created_at: EpochMs,
});

/** The token fields of signup, login, google and refresh responses. */
export const TokenFields = {
  access_token: Schema.String,
  refresh_token: Schema.String,
  token_type: Schema.Literal("bearer"),
  /** Seconds. */
  expires_in: Schema.Int,
};
export const Tokens = Schema.Struct(TokenFields).annotations({ identifier: "Tokens" });
export type Tokens = typeof Tokens.Type;

export const ErrorBody = Schema.Struct({
  error: Schema.String,
  code: Schema.String,
  message: Schema.String,
  details: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
}).annotations({ identifier: "Error" });

const PartUrl = Schema.Struct({ number: Schema.Int, url: Url }).annotations({ identifier: "PartUrl" });

/** The upload session fields every response carries. */
const UploadFields = {
  id: Schema.String,
  asset_id: Schema.String,
  part_size: Schema.Int,
  part_count: Schema.Int,
  size_bytes: Schema.Int,
  expires_at: EpochMs,
};

const UploadState = {
  status: Schema.Literal("created", "completed", "aborted", "expired"),
  created_at: EpochMs,
  completed_at: Schema.NullOr(EpochMs),
};

export const UploadStarted = Schema.Struct({ ...UploadFields, parts: Schema.Array(PartUrl) }).annotations({
  identifier: "UploadStarted",
});

export const UploadResumed = component("UploadResumed", {
  ...UploadFields,
  ...UploadState,
  uploaded_parts: Schema.Array(
    Schema.Struct({ number: Schema.Int, size: Schema.Int, etag: Schema.String }).annotations({
      identifier: "UploadedPart",
    }),
  ),
  missing_part_urls: Schema.Array(PartUrl),
});

export const UploadSession = Schema.Struct({ ...UploadFields, ...UploadState }).annotations({
  identifier: "UploadSession",
});

export const PlaybackCreated = Schema.Struct({
  session: Schema.Struct({
    id: Schema.String,
    asset_id: Schema.String,
    expires_at: EpochMs,
    drm: Schema.Boolean,
  }).annotations({ identifier: "PlaybackSession" }),
  token: Schema.String,
  urls: Schema.Struct({
    manifest: Url,
    telemetry: Url,
    entitlement: Schema.optional(Url),
    /** The JPEG thumbnail at the default time (the middle). */
    thumbnail: Url,
    /** The storyboard's WebVTT, whose cues point into `storyboard.jpg`. */
    storyboard: Url,
    /** The DASH manifest: the same renditions and text tracks as `manifest`, ClearKey-protected for DRM. */
    dash: Url,
    /** The static renditions that are ready (`mp4_support: standard`). */
    mp4_high: Schema.optional(Url),
    mp4_low: Schema.optional(Url),
    audio: Schema.optional(Url),
  }),
}).annotations({ identifier: "PlaybackSessionCreated" });

const KeySystem = Schema.Struct({
  license_url: Schema.String,
  certificate_url: Schema.optional(Schema.String),
}).annotations({ identifier: "KeySystem" });

/** A DRM session's entitlement: the configured key systems among the four DECISIONS names. */
export const Entitlement = component("Entitlement", {
  expires_at: EpochMs,
  license_headers: Schema.Struct({ "x-vod-license-token": Schema.String }),
  key_systems: Schema.Struct({
    "org.w3.clearkey": Schema.optional(KeySystem),
    "com.widevine.alpha": Schema.optional(KeySystem),
    "com.microsoft.playready": Schema.optional(KeySystem),
    "com.apple.fps": Schema.optional(KeySystem),
  }),
});

/** The W3C ClearKey licence: a JWK set. */
export const ClearKeyLicense = component("ClearKeyLicense", {
  keys: Schema.Array(Schema.Struct({ kty: Schema.Literal("oct"), kid: Schema.String, k: Schema.String })),
  type: Schema.String,
});

export const WebhookEventType = Schema.Literal(...webhookEventTypes);

export const Webhook = component("Webhook", {
  id: Schema.String,
  url: Url,
  events: Schema.Array(Schema.Union(WebhookEventType, Schema.Literal("*"))),
  description: Schema.NullOr(Schema.String),
  created_at: EpochMs,
});

export const WebhookDelivery = component("WebhookDelivery", {
  id: Schema.String,
  event_id: Schema.String,
  event_type: WebhookEventType,
  status: Schema.Literal(...deliveryStatuses),
  attempts: Schema.Int,
  last_status_code: Schema.NullOr(Schema.Int),
  next_attempt_at: Schema.NullOr(EpochMs),
  created_at: EpochMs,
});

export const StartupPercentiles = component("StartupPercentiles", {
  p50: Schema.Number,
  p90: Schema.Number,
  p95: Schema.Number,
});

/** One value of an analytics answer: its bucket (start, epoch ms) with an interval, its group with group_by. */
export const AnalyticsDatum = component("AnalyticsDatum", {
  bucket: Schema.optional(EpochMs),
  group: Schema.optional(Schema.NullOr(Schema.String)),
  value: Schema.NullOr(Schema.Union(Schema.Number, StartupPercentiles)),
});

export const AnalyticsAnswer = component("Analytics", {
  metric: Schema.Literal(...ANALYTICS_METRICS),
  from: EpochMs,
  to: EpochMs,
  data: Schema.Array(AnalyticsDatum),
});

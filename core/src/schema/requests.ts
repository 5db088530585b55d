import { Schema } from "effect";
import { ANALYTICS_GROUPS, ANALYTICS_INTERVALS, ANALYTICS_METRICS } from "../domain/analytics.js";
import { PLAYBACK_TTL_MAX_SECONDS, PLAYBACK_TTL_MIN_SECONDS } from "../domain/playback-session.js";
import { MAX_TEXT_TRACK_BYTES } from "../domain/text-track.js";
import { MAX_PART_COUNT } from "../domain/upload-session.js";
import { AssetStatus, AssetVisibility, Mp4Support, Scope, WebhookEventType } from "./resources.js";

// Validation messages never echo the value: a password must not come back in an error body.
const msg = (message: string) => ({ message: () => message });

/** Unicode code points, as a person counts characters (a UTF-16 surrogate pair is one). */
const codePoints = (s: string) => {
  let n = 0;
  for (const _ of s) n++;
  return n;
};

/**
 * Length limits count code points (DECISIONS): a title of 200 emoji is 200 characters, not the
 * 400 UTF-16 units `Schema.maxLength` would count. JSON Schema counts code points too.
 */
const maxChars = (max: number, message = `must be at most ${max} characters`) =>
  Schema.filter<typeof Schema.String>((s) => codePoints(s) <= max, {
    ...msg(message),
    jsonSchema: { maxLength: max },
  });

const minChars = (min: number, message = `must be at least ${min} characters`) =>
  Schema.filter<typeof Schema.String>((s) => codePoints(s) >= min, {
    ...msg(message),
    jsonSchema: { minLength: min },
  });

export const Email = Schema.String.pipe(
  maxChars(254),
  Schema.pattern(/^[^\s@]+@[^\s@]+\.[^\s@]+$/, msg("must be an email address")),
);

/** Passwords chosen by a person: 8 to 256 characters (DECISIONS). */
export const NewPassword = Schema.String.annotations(msg("must be a string")).pipe(
  minChars(8),
  maxChars(256),
);

/** A password presented at sign-in; bounded so a huge one cannot buy seconds of hashing. */
export const PresentedPassword = Schema.String.annotations(msg("must be a string")).pipe(maxChars(1024));

const NonEmpty = Schema.String.pipe(Schema.minLength(1, msg("must not be empty")));

// Ids a client names, branded by where they stand; whether one exists is the use case's to say.
const AssetIdField = NonEmpty.pipe(Schema.brand("AssetId"));
const UploadIdField = NonEmpty.pipe(Schema.brand("UploadId"));
const TenantIdField = NonEmpty.pipe(Schema.brand("TenantId"));

export const SignupBody = Schema.Struct({
  email: Email,
  password: NewPassword,
  name: Schema.optional(Schema.String.pipe(maxChars(200))),
  tenantName: Schema.optional(Schema.String.pipe(minChars(1), maxChars(200))),
});

export const LoginBody = Schema.Struct({ email: Email, password: PresentedPassword });

export const GoogleBody = Schema.Struct({ id_token: NonEmpty });

export const RefreshBody = Schema.Struct({ refresh_token: NonEmpty });

export const LogoutBody = Schema.Struct({ refresh_token: Schema.optional(NonEmpty) });

/** current_password is left out only by a user who has no password yet (accounts.ts says so otherwise). */
/** Deleting the tenant: the owner's password, or none after a fresh sign-in (accounts.ts). */
export const DeleteTenantBody = Schema.Struct({ password: Schema.optional(PresentedPassword) });

export const PasswordChangeBody = Schema.Struct({
  current_password: Schema.optional(PresentedPassword),
  new_password: NewPassword,
});

/** A token from a link of account mail: 43 base62 characters as sent, bounded for anything else. */
const MailToken = Schema.String.pipe(Schema.minLength(1, msg("must not be empty")), maxChars(256));

export const EmailConfirmBody = Schema.Struct({ token: MailToken });

export const PasswordForgotBody = Schema.Struct({ email: Email });

export const PasswordResetBody = Schema.Struct({ token: MailToken, new_password: NewPassword });

export const CreateApiKeyBody = Schema.Struct({
  name: Schema.String.pipe(minChars(1), maxChars(64)),
  scopes: Schema.Array(Scope).pipe(Schema.minItems(1)),
});

/** Listing API keys: without `status`, every key (newest first, at most 500). */
export const ListApiKeysQuery = Schema.Struct({
  status: Schema.optional(Schema.Literal("active", "revoked")),
});

export const CreateAssetBody = Schema.Struct({
  title: Schema.optional(Schema.String.pipe(maxChars(200))),
  drm: Schema.optional(Schema.Boolean),
  mp4_support: Schema.optional(Mp4Support),
});

/**
 * PATCH: title, visibility and mp4_support only; drm_enabled and the rest cannot change (an
 * unknown field is refused).
 */
export const UpdateAssetBody = Schema.Struct({
  title: Schema.optional(Schema.String.pipe(maxChars(200))),
  visibility: Schema.optional(AssetVisibility),
  mp4_support: Schema.optional(Mp4Support),
});

export const ListAssetsQuery = Schema.Struct({
  status: Schema.optional(AssetStatus),
  limit: Schema.optionalWith(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 100)), {
    default: () => 50,
  }),
  cursor: Schema.optional(NonEmpty),
});

export const IdParams = Schema.Struct({ id: NonEmpty });
export const AssetIdParams = Schema.Struct({ id: AssetIdField });
export const UploadIdParams = Schema.Struct({ id: UploadIdField });

export const Sha256Hex = Schema.String.pipe(
  Schema.pattern(/^[0-9a-f]{64}$/, msg("must be 64 lowercase hexadecimal characters")),
);

export const StartUploadBody = Schema.Struct({
  asset_id: AssetIdField,
  size_bytes: Schema.Int.pipe(Schema.between(1, 107_374_182_400)),
  sha256: Schema.optional(Sha256Hex),
});

export const CompleteUploadBody = Schema.Struct({
  parts: Schema.optional(
    Schema.Array(
      Schema.Struct({
        number: Schema.Int.pipe(Schema.greaterThanOrEqualTo(1)),
        etag: Schema.optional(Schema.String),
        sha256: Schema.optional(Sha256Hex),
      }),
    ),
  ),
});

/** The query of a part upload URL: tenant, expiry (epoch seconds) and signature. */
export const PartUrlQuery = Schema.Struct({
  t: TenantIdField,
  e: Schema.NumberFromString.pipe(Schema.int()),
  s: NonEmpty,
});

export const PartParams = Schema.Struct({
  id: UploadIdField,
  number: Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, MAX_PART_COUNT)),
});

export const CreatePlaybackBody = Schema.Struct({
  asset_id: AssetIdField,
  ttl_seconds: Schema.optional(
    Schema.Int.pipe(Schema.between(PLAYBACK_TTL_MIN_SECONDS, PLAYBACK_TTL_MAX_SECONDS)),
  ),
});

/** A telemetry batch; events are checked one by one afterwards (invalid ones are dropped). */
export const TelemetryBatch = Schema.Struct({
  token: NonEmpty,
  player_version: Schema.optional(Schema.String.pipe(maxChars(200))),
  events: Schema.Array(Schema.Unknown).pipe(Schema.maxItems(50, msg("must hold at most 50 events"))),
});

const optionalNumber = Schema.optional(Schema.Number.pipe(Schema.finite()));

/** One event as the spec defines it; further keys are kept as they are. */
export const TelemetryEventInput = Schema.Struct({
  event: Schema.String.pipe(minChars(1), maxChars(64)),
  ts_ms: Schema.Number.pipe(Schema.finite()),
  playhead_ms: Schema.Number.pipe(Schema.finite()),
  rendition: Schema.optional(Schema.String.pipe(maxChars(64))),
  error_code: Schema.optional(Schema.String.pipe(maxChars(128))),
  startup_ms: optionalNumber,
  stall_ms: optionalNumber,
  bitrate_kbps: optionalNumber,
});

export const AnalyticsParams = Schema.Struct({ metric: Schema.Literal(...ANALYTICS_METRICS) });

/** Epoch milliseconds in a query string. */
const EpochMsParam = Schema.NumberFromString.pipe(
  Schema.int(msg("must be an integer (epoch milliseconds)")),
  Schema.between(0, 8_640_000_000_000_000, msg("must be epoch milliseconds")),
);

/** The range and shape of an analytics query; the range itself is checked by the use case. */
export const AnalyticsQuery = Schema.Struct({
  from: EpochMsParam,
  to: EpochMsParam,
  asset_id: Schema.optional(NonEmpty.pipe(maxChars(200), Schema.brand("AssetId"))),
  interval: Schema.optional(Schema.Literal(...ANALYTICS_INTERVALS)),
  group_by: Schema.optional(Schema.Literal(...ANALYTICS_GROUPS)),
});

export const ClearKeyRequest = Schema.Struct({
  kids: Schema.Array(Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{1,64}$/))).pipe(Schema.minItems(1)),
  type: Schema.optional(Schema.String),
});

/** A media file of a playback session: the token, then the file's path under it. */
export const PlayParams = Schema.Struct({ token: Schema.String, path: Schema.String });

/** The token of a playback file whose name is the route's own (`thumbnail.jpg`). */
export const PlayTokenParams = Schema.Struct({ token: Schema.String });

const seconds = Schema.NumberFromString.pipe(Schema.finite(), Schema.nonNegative());
const pixels = (max: number) => Schema.NumberFromString.pipe(Schema.int(), Schema.between(8, max));

/** `thumbnail.*`: DECISIONS "Images, downloads and text tracks"; the asset's own bounds are the use case's. */
export const ThumbnailQuery = Schema.Struct({
  time: Schema.optional(seconds),
  width: Schema.optional(pixels(1920)),
  height: Schema.optional(pixels(1920)),
  fit_mode: Schema.optional(Schema.Literal("preserve", "crop", "pad")),
});

const isFileNameChar = (c: string) => {
  const code = c.codePointAt(0) ?? 0;
  return code > 0x1f && (code < 0x7f || code > 0x9f) && c !== "/" && c !== "\\" && c !== '"';
};
/**
 * A file name a download is saved under: at most 200 characters, none a control character, a
 * slash, a backslash or a double quote, and not `.` or `..` (docs/playback.md).
 */
export const DownloadName = Schema.String.pipe(
  minChars(1),
  maxChars(200),
  Schema.filter((s) => [...s].every(isFileNameChar) && s !== "." && s !== "..", {
    message: () => "must be a file name: no control character, slash, backslash or double quote",
  }),
);

/** `high.mp4`, `low.mp4`, `audio.m4a`: `download=NAME` saves the file as NAME. */
export const StaticRenditionQuery = Schema.Struct({ download: Schema.optional(DownloadName) });

/** `animated.*`: at most 10 s, 640 px wide, 30 frames a second. */
export const AnimatedQuery = Schema.Struct({
  start: Schema.optional(seconds),
  end: Schema.optional(seconds),
  width: Schema.optional(pixels(640)),
  fps: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 30))),
});

const isWebUrl = (s: string) => {
  try {
    const url = new URL(s);
    return (
      (url.protocol === "https:" || url.protocol === "http:") && url.username === "" && url.password === ""
    );
  } catch {
    return false;
  }
};

/** Where events go; whether it may be sent to (https, a public address) is the sender's rule. */
export const WebhookUrl = Schema.String.pipe(
  maxChars(2048),
  Schema.filter(isWebUrl, {
    ...msg("must be an absolute http(s) URL without credentials"),
    jsonSchema: { format: "uri" },
    // Random strings are almost never URLs: a generator filtering them would never finish. Hosts
    // under .invalid (RFC 6761) never resolve, so generated webhooks send nothing anywhere.
    arbitrary: () => (fc) =>
      fc
        .tuple(fc.constantFrom("https", "http"), fc.domain(), fc.webPath())
        .map(([scheme, domain, path]) => `${scheme}://${domain}.invalid${path}`),
  }),
);

export const CreateWebhookBody = Schema.Struct({
  url: WebhookUrl,
  events: Schema.Array(Schema.Union(WebhookEventType, Schema.Literal("*"))).pipe(
    Schema.minItems(1, msg('must name at least one event type, or "*"')),
    Schema.maxItems(20),
  ),
  description: Schema.optional(Schema.String.pipe(maxChars(200))),
});

/** A BCP 47 language tag, as `Intl` reads one (`en`, `pt-BR`, `zh-Hant`). */
export const LanguageCode = Schema.String.pipe(
  maxChars(64),
  Schema.filter(
    (s) => {
      try {
        return Intl.getCanonicalLocales(s).length === 1;
      } catch {
        return false;
      }
    },
    {
      ...msg("must be a BCP 47 language tag, such as en or pt-BR"),
      // Random strings are rarely language tags: a generator filtering them would never finish.
      arbitrary: () => (fc) => fc.constantFrom("en", "en-US", "fr", "pt-BR", "zh-Hant", "de-CH"),
    },
  ),
);

const utf8Bytes = (s: string) => new TextEncoder().encode(s).byteLength;

/** A text track of an asset: the content is read (WebVTT or SRT) by the use case. */
export const CreateTextTrackBody = Schema.Struct({
  type: Schema.Literal("text"),
  language_code: LanguageCode,
  name: Schema.optional(Schema.String.pipe(minChars(1), maxChars(200))),
  closed_captions: Schema.optional(Schema.Boolean),
  content: Schema.String.pipe(
    Schema.filter((s) => s.length <= MAX_TEXT_TRACK_BYTES && utf8Bytes(s) <= MAX_TEXT_TRACK_BYTES, {
      ...msg(`must be at most ${MAX_TEXT_TRACK_BYTES} bytes (2 MiB) of UTF-8`),
    }),
  ),
});

export const TextTrackParams = Schema.Struct({ id: AssetIdField, track_id: NonEmpty });

export const DeliveryParams = Schema.Struct({ id: NonEmpty, delivery_id: NonEmpty });

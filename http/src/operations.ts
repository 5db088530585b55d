import { createHash, timingSafeEqual } from "node:crypto";
import {
  IMAGE_MEDIA_TYPES,
  type ImageFile,
  InvalidRequest,
  MAX_TEXT_TRACK_BYTES,
  NotFound,
  PlaybackUnavailable,
  type Principal,
  RENDITION_MEDIA_TYPES,
  type RequestedRange,
  type Requirement,
  Requests as Rq,
  Resources as Rs,
  STATIC_RENDITION_MEDIA_TYPES,
  type StaticRenditionName,
  StorageError,
  Unauthorized,
  type Vod,
  type VodError,
} from "@vod/core";
import { create as contentDisposition } from "content-disposition";
import { Effect, Schema } from "effect";
import { errorReply } from "./errors.js";
import {
  type AuthedCall,
  authedOperation,
  type HttpMethod,
  headerOf,
  type Operation,
  type PublicCall,
  publicOperation,
  type Reply,
} from "./operation.js";
import { embedPage, playerScript as loadPlayerScript } from "./player.js";
import { REFERENCE_PAGE, referenceScript } from "./reference.js";

const params = Schema.Struct({ params: Rq.IdParams });

/** A route's head: `METHOD /path`, its success status and its summary. */
const at = <M extends HttpMethod>(
  route: `${M} /${string}`,
  status: 200 | 201 | 202 | 204,
  summary: string,
) => {
  const space = route.indexOf(" ");
  return { method: route.slice(0, space) as M, path: route.slice(space + 1), status, summary };
};

/** Every route of the spec: method and path, success status, and what its operation does. */
const routes = {
  signup: at("POST /v1/auth/signup", 201, "Create a tenant and its owner user, and sign in."),
  login: at("POST /v1/auth/login", 200, "Sign in with email and password."),
  google: at(
    "POST /v1/auth/google",
    200,
    "Sign in with a Google ID token; creates the account when the identity is new.",
  ),
  refresh: at(
    "POST /v1/auth/refresh",
    200,
    "Rotate a refresh token: the presented one is invalidated and a new pair issued.",
  ),
  logout: at(
    "POST /v1/auth/logout",
    204,
    "End the access token's session, and the given refresh token's session.",
  ),
  changePassword: at(
    "POST /v1/auth/password",
    204,
    "Change (or, without current_password, set a first) password of the current user; every other session of the user ends.",
  ),
  me: at("GET /v1/auth/me", 200, "The identity behind the credential."),
  deleteTenant: at(
    "DELETE /v1/tenant",
    204,
    "Delete the caller's tenant (owner only, with the password, or without one within 5 minutes of a sign-in of an account that has none): every credential of it is refused at once, its slug is never given again, and its rows and objects are removed in the background.",
  ),
  requestEmailVerification: at(
    "POST /v1/auth/email/verify",
    202,
    "Mail the current user a link that confirms their email address (valid 24 hours, once).",
  ),
  confirmEmail: at(
    "POST /v1/auth/email/confirm",
    200,
    "Confirm the email address with the token of a verification link.",
  ),
  forgotPassword: at(
    "POST /v1/auth/password/forgot",
    202,
    "Mail a password reset link (valid 30 minutes, once) if the email has an account; the answer is the same either way.",
  ),
  resetPassword: at(
    "POST /v1/auth/password/reset",
    204,
    "Set a new password with the token of a reset link; every session of the user ends.",
  ),
  listApiKeys: at(
    "GET /v1/api-keys",
    200,
    "API keys of the tenant, newest first, at most 500; `status` keeps the active or the revoked ones.",
  ),
  createApiKey: at(
    "POST /v1/api-keys",
    201,
    "Create an API key; the full key is in this response only. A key has one scope: of several sent, the highest (admin, then write, then read) is kept. Past the tenant's quota of active keys (200 by default): 409.",
  ),
  revokeApiKey: at("DELETE /v1/api-keys/:id", 204, "Revoke an API key; it stops working at once."),
  listAssets: at("GET /v1/assets", 200, "Assets of the tenant, newest first, keyset paginated."),
  createAsset: at("POST /v1/assets", 201, "Create an asset draft (pending, private)."),
  getAsset: at("GET /v1/assets/:id", 200, "One asset of the tenant."),
  updateAsset: at(
    "PATCH /v1/assets/:id",
    200,
    "Change an asset's title or visibility; nothing else of it can change.",
  ),
  deleteAsset: at(
    "DELETE /v1/assets/:id",
    204,
    "Delete an asset at once: its open upload is aborted, its playback sessions end, its objects are removed in the background.",
  ),
  createTextTrack: at(
    "POST /v1/assets/:id/tracks",
    201,
    "Add a text track (captions or subtitles) to an asset: WebVTT or SRT `content` of at most 2 MiB, stored as WebVTT. Ready at once: the asset's HLS master lists it in its subtitle group and its DASH manifest as a text AdaptationSet. At most 30 per asset (409 quota_exceeded); content that is neither format: 400 naming the line.",
  ),
  listTextTracks: at("GET /v1/assets/:id/tracks", 200, "The asset's text tracks, oldest first."),
  deleteTextTrack: at(
    "DELETE /v1/assets/:id/tracks/:track_id",
    204,
    "Remove a text track: manifests fetched from then on no longer list it, and its files are deleted.",
  ),
  startUpload: at(
    "POST /v1/uploads",
    201,
    "Start a multipart upload session for an asset: one upload URL per part.",
  ),
  resumeUpload: at(
    "GET /v1/uploads/:id",
    200,
    "Resume an upload: the parts stored so far and fresh URLs for the missing ones.",
  ),
  abortUpload: at("DELETE /v1/uploads/:id", 204, "Abort an upload session; its stored parts are removed."),
  completeUpload: at(
    "POST /v1/uploads/:id/complete",
    200,
    "Verify the stored parts, assemble the origin file and start processing. Idempotent.",
  ),
  createPlaybackSession: at(
    "POST /v1/playback/sessions",
    201,
    "Mint a playback session for a ready asset: a signed token and its delivery URLs.",
  ),
  revokePlaybackSession: at(
    "DELETE /v1/playback/sessions/:id",
    204,
    "End a playback session; its token stops working everywhere within about two minutes.",
  ),
  uploadPart: at(
    "PUT /v1/uploads/:id/parts/:number",
    200,
    "Upload one part's bytes to the signed URL `startUpload` or `resumeUpload` gave.",
  ),
  thumbnailJpg: at(
    "GET /v1/play/:token/thumbnail.jpg",
    200,
    "A JPEG of the frame at `time` (default: the middle), `width`/`height` at most the source's and 1920, fitted by `fit_mode`.",
  ),
  thumbnailPng: at("GET /v1/play/:token/thumbnail.png", 200, "The thumbnail as PNG (see thumbnail.jpg)."),
  thumbnailWebp: at("GET /v1/play/:token/thumbnail.webp", 200, "The thumbnail as WebP (see thumbnail.jpg)."),
  animatedGif: at(
    "GET /v1/play/:token/animated.gif",
    200,
    "An animated GIF from `start` to `end` (at most 10 s; default 0 to 5 s), `width` at most 640 (default 320), `fps` at most 30 (default 15).",
  ),
  animatedWebp: at(
    "GET /v1/play/:token/animated.webp",
    200,
    "The animated preview as WebP (see animated.gif).",
  ),
  storyboardJpg: at(
    "GET /v1/play/:token/storyboard.jpg",
    200,
    "A sprite sheet of at most 100 frames at a regular interval, ten to a row: the tiles storyboard.vtt points at.",
  ),
  storyboardWebp: at("GET /v1/play/:token/storyboard.webp", 200, "The storyboard's sprite sheet as WebP."),
  storyboardVtt: at(
    "GET /v1/play/:token/storyboard.vtt",
    200,
    "WebVTT cues covering the duration in order, each pointing at its tile: `storyboard.jpg#xywh=x,y,w,h`.",
  ),
  staticHigh: at(
    "GET /v1/play/:token/high.mp4",
    200,
    "The static MP4 of the best rendition up to 1080p, with audio (`mp4_support: standard`); byte ranges supported, `download=NAME` saves it as NAME.",
  ),
  staticLow: at(
    "GET /v1/play/:token/low.mp4",
    200,
    "The static MP4 of the lowest rendition, with audio (see high.mp4).",
  ),
  staticAudio: at("GET /v1/play/:token/audio.m4a", 200, "The audio alone, as M4A (see high.mp4)."),
  playFile: at(
    "GET /v1/play/:token/*path",
    200,
    "A manifest, segment or key file of a playback session; byte ranges supported.",
  ),
  playerScript: at(
    "GET /v1/player.js",
    200,
    'The `<vod-player>` web component (hls.js bundled), one ES module: `<script type="module">` from any origin. Revalidated by its ETag.',
  ),
  embed: at(
    "GET /v1/embed/:token",
    200,
    "An HTML page that plays the session at full size, for an iframe; `autoplay=1` (muted) and `muted=1`. Its parent hands it fresh tokens by postMessage.",
  ),
  telemetry: at(
    "POST /v1/telemetry",
    204,
    "A player's batch of playback events, with the playback token in the body.",
  ),
  entitlement: at(
    "POST /v1/drm/entitlement",
    200,
    "The DRM entitlement of a playback session: licence URL and token.",
  ),
  clearKeyLicense: at(
    "POST /v1/drm/clearkey/license",
    200,
    "A W3C ClearKey licence for the requested key ids.",
  ),
  createWebhook: at(
    "POST /v1/webhooks",
    201,
    "Register an endpoint for the tenant's events; its signing secret is in this response only. Past the tenant's quota (20 by default): 409.",
  ),
  listWebhooks: at("GET /v1/webhooks", 200, "Webhooks of the tenant, newest first, at most 100."),
  getWebhook: at("GET /v1/webhooks/:id", 200, "One webhook of the tenant."),
  deleteWebhook: at("DELETE /v1/webhooks/:id", 204, "Delete a webhook; nothing more is sent to it."),
  listWebhookDeliveries: at(
    "GET /v1/webhooks/:id/deliveries",
    200,
    "A webhook's deliveries, newest first, at most 100: status, attempts, last status code.",
  ),
  redeliverWebhook: at(
    "POST /v1/webhooks/:id/deliveries/:delivery_id/redeliver",
    202,
    "Send a delivery's event again (same webhook-id), as a new delivery.",
  ),
  getAnalytics: at(
    "GET /v1/analytics/:metric",
    200,
    "A playback metric over the tenant's views whose first event was received in [from, to) (at most 90 days): one value, or per `interval` bucket and `group_by` group that has views.",
  ),
  health: at("GET /healthz", 200, "Liveness: 200 once the process serves."),
  ready: at(
    "GET /readyz",
    200,
    "Readiness: 200 when the database (and Redis, when configured) answer within 2 s, else 503 storage_error with `details.checks`.",
  ),
  metrics: at(
    "GET /metrics",
    200,
    "Prometheus metrics (text exposition format); with VOD_METRICS_TOKEN set, that token as a bearer.",
  ),
  openApi: at("GET /v1/openapi.json", 200, "This document."),
  apiReference: at(
    "GET /docs",
    200,
    "This document as a web page: the API reference, rendered in the browser (Scalar, served by the platform itself).",
  ),
  apiReferenceScript: at("GET /docs/reference.js", 200, "The script that renders the API reference page."),
  apiPreflight: at(
    "OPTIONS /*path",
    204,
    "CORS preflight of the API, for the origins of VOD_CORS_ORIGINS; from any other origin, 404. The media and DRM routes answer their own.",
  ),
} as const;

/** An entry's head from `routes`: its id, method, path, status and summary. */
const route = (id: keyof typeof routes) => ({ id, ...routes[id] });

/**
 * An operation on the tenant's resource its path's `:id` names: who may, what it answers, the use
 * case. The id takes the brand the use case asks for (an asset's, an upload's): the path names
 * that kind of resource, and whether one exists is the use case's to say.
 */
const onId = <Id extends string, O, OE>(
  auth: Requirement,
  output: Schema.Schema<O, OE> | null,
  use: (vod: Vod) => (principal: Principal, id: Id) => Effect.Effect<O, VodError>,
) => ({
  auth,
  input: params,
  output,
  run: (vod: Vod, input: typeof params.Type, call: AuthedCall) =>
    use(vod)(call.principal, input.params.id as Id),
});

/** An operation that ends the tenant's resource its path's `:id` names, answering 204 with no body. */
const endingId = <Id extends string>(
  auth: Requirement,
  use: (vod: Vod) => (principal: Principal, id: Id) => Effect.Effect<void, VodError>,
) => onId(auth, null, use);

/** An operation of the tenant's made from its JSON body: who may, the body, the answer, the use case. */
const onBody = <A, I, O, OE>(
  auth: Requirement,
  request: Schema.Schema<A, I>,
  output: Schema.Schema<O, OE>,
  use: (vod: Vod) => (principal: Principal, body: A) => Effect.Effect<O, VodError>,
) => ({
  auth,
  input: body(request),
  output,
  run: (vod: Vod, input: { readonly body: A }, call: AuthedCall) => use(vod)(call.principal, input.body),
});

/** An operation on the tenant's resources as a whole (a list): who may, what it answers, the use case. */
const onTenant = <O, OE>(
  auth: Requirement,
  output: Schema.Schema<O, OE>,
  use: (vod: Vod) => (principal: Principal) => Effect.Effect<O, VodError>,
) => ({
  auth,
  input: none,
  output,
  run: (vod: Vod, _input: unknown, call: AuthedCall) => use(vod)(call.principal),
});

const body = <A, I>(schema: Schema.Schema<A, I>) => Schema.Struct({ body: schema });
const none = Schema.Struct({});

const User = Schema.Struct({ user: Rs.User, ...Rs.TokenFields });
type UserCall = AuthedCall & { principal: Principal & { kind: "user" } };
const asUser = (call: AuthedCall) => call as UserCall;
const read = { scope: "read" } as const;
const write = { scope: "write" } as const;
const admin = { scope: "admin" } as const;
const readAsUser = { scope: "read", kinds: ["user"] } as const;

const AssetReply = Schema.Struct({ asset: Rs.Asset });
/**
 * A track's body: its JSON-escaped content may take up to six bytes per byte of content (`\u0001`),
 * so any content within the 2 MiB the schema allows fits, with room for the other fields.
 */
const TEXT_TRACK_BODY_BYTES = 6 * MAX_TEXT_TRACK_BYTES + 64 * 1024;
const WebhookReply = Schema.Struct({ webhook: Rs.Webhook });
const WebhookCreated = Schema.Struct({ webhook: Rs.Webhook, secret: Schema.String });
const ApiKeyCreated = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  prefix: Schema.String,
  scopes: Schema.Array(Rs.Scope),
  created_at: Rs.EpochMs,
  key: Schema.String,
});
const UploadStarted = Schema.Struct({ upload: Rs.UploadStarted });

export const signup = publicOperation({
  ...route("signup"),
  input: body(Rq.SignupBody),
  output: Schema.Struct({ user: Rs.User, tenant: Rs.Tenant, ...Rs.TokenFields }),
  errors: ["Conflict", "RateLimited"],
  run: (vod, { body }, call) => vod.accounts.signup(body, call.clientIp),
});

export const login = publicOperation({
  ...route("login"),
  input: body(Rq.LoginBody),
  output: User,
  errors: ["Unauthorized", "Forbidden", "RateLimited"],
  run: (vod, { body }, call) => vod.accounts.login(body, call.clientIp),
});

export const google = publicOperation({
  ...route("google"),
  input: body(Rq.GoogleBody),
  output: Schema.Struct({ user: Rs.User, ...Rs.TokenFields, created: Schema.Boolean }),
  errors: ["Unauthorized", "Forbidden", "Conflict", "RateLimited"],
  run: (vod, { body }, call) => vod.accounts.google(body.id_token, call.clientIp),
});

export const refresh = publicOperation({
  ...route("refresh"),
  input: body(Rq.RefreshBody),
  output: Rs.Tokens,
  errors: ["Unauthorized", "Forbidden", "RateLimited"],
  run: (vod, { body }, call) => vod.accounts.refresh(body.refresh_token, call.clientIp),
});

export const logout = authedOperation({
  ...route("logout"),
  auth: readAsUser,
  input: body(Rq.LogoutBody),
  output: null,
  // A replay would answer 204 and leave the session it names valid.
  idempotency: { recorded: false },
  run: (vod, { body }, call) => vod.accounts.logout(asUser(call).principal, body.refresh_token),
});

export const changePassword = authedOperation({
  ...route("changePassword"),
  auth: readAsUser,
  input: body(Rq.PasswordChangeBody),
  output: null,
  // Its body holds passwords, and a replay would change nothing.
  idempotency: { recorded: false },
  run: (vod, { body }, call) => vod.accounts.changePassword(asUser(call).principal, body, call.clientIp),
});

export const me = authedOperation({
  ...route("me"),
  auth: read,
  input: none,
  output: Schema.Union(
    Schema.Struct({
      auth: Schema.Struct({ kind: Schema.Literal("user"), role: Rs.Role }),
      user: Rs.User,
      tenant: Rs.Tenant,
    }),
    Schema.Struct({
      auth: Schema.Struct({
        kind: Schema.Literal("api_key"),
        key_id: Schema.String,
        scopes: Schema.Array(Rs.Scope),
      }),
      tenant: Rs.Tenant,
    }),
  ),
  run: (vod, _input, call) => Effect.succeed(vod.accounts.me(call.principal)),
});

export const deleteTenant = authedOperation({
  ...route("deleteTenant"),
  // Owner and admin hold the admin scope; the use case lets the owner alone through.
  auth: { scope: "admin", kinds: ["user"] },
  input: body(Rq.DeleteTenantBody),
  output: null,
  errors: ["RateLimited"],
  run: (vod, { body }, call) => vod.accounts.deleteTenant(asUser(call).principal, body, call.clientIp),
});

export const requestEmailVerification = authedOperation({
  ...route("requestEmailVerification"),
  auth: readAsUser,
  input: none,
  output: null,
  errors: ["Conflict", "RateLimited"],
  run: (vod, _input, call) => vod.accountMail.requestVerification(asUser(call).principal),
});

export const confirmEmail = publicOperation({
  ...route("confirmEmail"),
  input: body(Rq.EmailConfirmBody),
  output: Schema.Struct({ user: Rs.User }),
  errors: ["RateLimited"],
  run: (vod, { body }, call) => vod.accountMail.confirmEmail(body.token, call.clientIp),
});

export const forgotPassword = publicOperation({
  ...route("forgotPassword"),
  input: body(Rq.PasswordForgotBody),
  output: null,
  errors: ["RateLimited"],
  run: (vod, { body }, call) => vod.accountMail.forgotPassword(body.email, call.clientIp),
});

export const resetPassword = publicOperation({
  ...route("resetPassword"),
  input: body(Rq.PasswordResetBody),
  output: null,
  errors: ["RateLimited"],
  run: (vod, { body }, call) => vod.accountMail.resetPassword(body, call.clientIp),
});

export const listApiKeys = authedOperation({
  ...route("listApiKeys"),
  auth: read,
  input: Schema.Struct({ query: Rq.ListApiKeysQuery }),
  output: Schema.Struct({ data: Schema.Array(Rs.ApiKey) }),
  run: (vod, { query }, call) => vod.apiKeys.list(call.principal, query),
});

export const createApiKey = authedOperation({
  ...route("createApiKey"),
  ...onBody(admin, Rq.CreateApiKeyBody, ApiKeyCreated, (vod) => vod.apiKeys.create),
  // Past the tenant's quota of active keys.
  errors: ["Conflict"],
  idempotency: { secrets: [["key"]] },
});

export const revokeApiKey = authedOperation({
  ...route("revokeApiKey"),
  ...endingId(admin, (vod) => vod.apiKeys.revoke),
});

export const listAssets = authedOperation({
  ...route("listAssets"),
  auth: read,
  input: Schema.Struct({ query: Rq.ListAssetsQuery }),
  output: Schema.Struct({ data: Schema.Array(Rs.Asset), next_cursor: Schema.NullOr(Schema.String) }),
  run: (vod, { query }, call) => vod.assets.list(call.principal, query),
});

export const createAsset = authedOperation({
  ...route("createAsset"),
  ...onBody(write, Rq.CreateAssetBody, AssetReply, (vod) => vod.assets.create),
});

export const getAsset = authedOperation({
  ...route("getAsset"),
  ...onId(read, AssetReply, (vod) => vod.assets.get),
});

export const updateAsset = authedOperation({
  ...route("updateAsset"),
  auth: write,
  input: Schema.Struct({ params: Rq.AssetIdParams, body: Rq.UpdateAssetBody }),
  output: AssetReply,
  run: (vod, { params, body }, call) => vod.assets.update(call.principal, params.id, body),
});

export const deleteAsset = authedOperation({
  ...route("deleteAsset"),
  ...endingId(write, (vod) => vod.assets.remove),
});

export const createTextTrack = authedOperation({
  ...route("createTextTrack"),
  auth: write,
  body: { kind: "text", maxBytes: TEXT_TRACK_BODY_BYTES, mediaTypes: ["application/json"] },
  input: Schema.Struct({ params: Rq.AssetIdParams, body: Rq.CreateTextTrackBody }),
  output: Schema.Struct({ track: Rs.TextTrack }),
  // Past the asset's 30 tracks.
  errors: ["Conflict"],
  run: (vod, { params, body }, call) => vod.textTracks.add(call.principal, params.id, body),
});

export const listTextTracks = authedOperation({
  ...route("listTextTracks"),
  ...onId(read, Schema.Struct({ data: Schema.Array(Rs.TextTrack) }), (vod) => vod.textTracks.list),
});

export const deleteTextTrack = authedOperation({
  ...route("deleteTextTrack"),
  auth: write,
  input: Schema.Struct({ params: Rq.TextTrackParams }),
  output: null,
  run: (vod, { params }, call) => vod.textTracks.remove(call.principal, params.id, params.track_id),
});

export const startUpload = authedOperation({
  ...route("startUpload"),
  ...onBody(write, Rq.StartUploadBody, UploadStarted, (vod) => vod.uploads.start),
  errors: ["UploadInProgress"],
});

export const resumeUpload = authedOperation({
  ...route("resumeUpload"),
  ...onId(read, Schema.Struct({ upload: Rs.UploadResumed }), (vod) => vod.uploads.resume),
});

export const abortUpload = authedOperation({
  ...route("abortUpload"),
  ...endingId(write, (vod) => vod.uploads.abort),
  errors: ["UploadInProgress"],
});

export const completeUpload = authedOperation({
  ...route("completeUpload"),
  auth: write,
  input: Schema.Struct({ params: Rq.UploadIdParams, body: Rq.CompleteUploadBody }),
  output: Schema.Struct({ upload: Rs.UploadSession, asset: Rs.Asset }),
  errors: ["UploadInProgress"],
  run: (vod, { params, body }, call) => vod.uploads.complete(call.principal, params.id, body),
});

export const createPlaybackSession = authedOperation({
  ...route("createPlaybackSession"),
  ...onBody(read, Rq.CreatePlaybackBody, Rs.PlaybackCreated, (vod) => vod.playback.create),
  errors: ["UploadInProgress"],
  // The token plays the asset, and the manifest URL carries it.
  idempotency: { secrets: [["token"], ["urls", "manifest"]] },
});

export const revokePlaybackSession = authedOperation({
  ...route("revokePlaybackSession"),
  ...endingId(read, (vod) => vod.playback.revoke),
});

export const uploadPart = publicOperation({
  ...route("uploadPart"),
  app: "media",
  credential: { token: "part-signature", in: "query" },
  body: { kind: "stream", mediaType: "application/octet-stream" },
  // Browsers upload parts straight from a page, and read the ETag.
  cors: {
    allowHeaders: ["content-type", "content-md5", "x-request-id"],
    exposeHeaders: ["ETag", "x-request-id"],
  },
  input: Schema.Struct({ params: Rq.PartParams, query: Rq.PartUrlQuery }),
  output: null,
  // The tenant is suspended.
  errors: ["Forbidden", "UploadInProgress"],
  run: (vod, { params, query }, call) =>
    vod.uploads.receivePart(
      {
        uploadId: params.id,
        number: params.number,
        tenantId: query.t,
        expiresSec: query.e,
        signature: query.s,
      },
      call.stream ?? noBytes(),
    ),
  reply: {
    kind: { kind: "headers", headers: { ETag: "the part's ETag, quoted" } },
    of: ({ etag }) => ({ status: 200, headers: { etag: `"${etag}"` } }),
  },
});

async function* noBytes(): AsyncIterable<Uint8Array> {}

/** CORS of every playback file: players and pages on any origin, ranges included. */
const PLAY_CORS = {
  allowHeaders: ["range"],
  exposeHeaders: ["content-length", "content-range", "accept-ranges"],
};

type Opened = Effect.Effect.Success<ReturnType<Vod["playback"]["open"]>> | ImageFile;

/**
 * A range past the file's end: 416 with a Content-Range naming the file's size (RFC 9110), and
 * the spec's error body like every other error (docs/decisions.md: invalid_request, its reason
 * in details).
 */
const unsatisfiable = (size: number): Reply => ({
  status: 416,
  headers: { "content-range": `bytes */${size}` },
  body: errorReply(
    new InvalidRequest({
      message: `the range lies outside the file (${size} bytes)`,
      details: { reason: "range_not_satisfiable", size },
    }),
  ).body,
});

/** A media file as HTTP answers it: whole or by range, a redirect to the store, or 416. */
const fileReply = (file: Opened, vod: Vod): Reply => {
  if (file.kind === "unsatisfiable") return unsatisfiable(file.size);
  // The signed URL is short-lived: no cache may keep the redirect longer than it works.
  if (file.kind === "redirect")
    return { status: 302, headers: { location: file.url, "cache-control": "private, no-store" } };
  // Private: the URL carries a credential. Segments never change; playlists are re-read.
  const maxAge = Math.max(0, Math.min(86_400, Math.floor((file.expiresAt - vod.ports.clock.now()) / 1000)));
  const headers = {
    "cache-control": file.playlist ? "private, no-cache" : `private, max-age=${maxAge}, immutable`,
    "content-type": file.contentType,
    "accept-ranges": "bytes",
  };
  if (!file.range)
    return { status: 200, headers: { ...headers, "content-length": String(file.size) }, stream: file.body };
  return {
    status: 206,
    headers: {
      ...headers,
      "content-range": `bytes ${file.range.start}-${file.range.end}/${file.size}`,
      "content-length": String(file.range.end - file.range.start + 1),
    },
    stream: file.body,
  };
};

export const playFile = publicOperation({
  ...route("playFile"),
  app: "media",
  credential: { token: "playback", in: "path" },
  body: { kind: "none" },
  // A file name with a NUL is no file of the asset: 404 like any other.
  lenient: { nul: true },
  cors: PLAY_CORS,
  input: Schema.Struct({ params: Rq.PlayParams }),
  output: null,
  errors: ["Forbidden", "PlaybackUnavailable"],
  run: (vod, { params }, call) => vod.playback.open(params.token, params.path, call.range),
  reply: {
    kind: { kind: "file", mediaTypes: [...new Set(Object.values(RENDITION_MEDIA_TYPES))] },
    of: (file, vod) => fileReply(file, vod),
  },
});

/**
 * A playback file whose name is its route's (`thumbnail.jpg`), made on request: answered as
 * every playback file is (`fileReply`). Listed before `playFile`, whose `*path` would take it.
 */
const imageOperation = <Q, QE>(
  id: keyof typeof routes,
  mediaType: string,
  query: Schema.Schema<Q, QE>,
  run: (
    vod: Vod,
    token: string,
    query: Q,
    call: { readonly range?: RequestedRange },
  ) => Effect.Effect<ImageFile, VodError>,
) =>
  publicOperation({
    ...route(id),
    app: "media",
    credential: { token: "playback", in: "path" },
    body: { kind: "none" },
    cors: PLAY_CORS,
    input: Schema.Struct({ params: Rq.PlayTokenParams, query }),
    output: null,
    // Too many images being made on this node at once: 429 with Retry-After. A protected
    // asset's origin too large to copy where it cannot be read in place: 409.
    errors: ["Forbidden", "PlaybackUnavailable", "RateLimited", "Conflict"],
    run: (vod, input, call) => run(vod, input.params.token, input.query, call),
    reply: { kind: { kind: "file", mediaTypes: [mediaType] }, of: (file, vod) => fileReply(file, vod) },
  });

// One operation per file name and format: the route names the format, the query the picture.
const thumbnailOf = (id: keyof typeof routes, format: "jpg" | "png" | "webp") =>
  imageOperation(id, IMAGE_MEDIA_TYPES[format], Rq.ThumbnailQuery, (vod, token, q, call) =>
    vod.playback.images.thumbnail(token, format, q, call.range),
  );
const animatedOf = (id: keyof typeof routes, format: "gif" | "webp") =>
  imageOperation(id, IMAGE_MEDIA_TYPES[format], Rq.AnimatedQuery, (vod, token, q, call) =>
    vod.playback.images.animated(token, format, q, call.range),
  );
const noQuery = Schema.Struct({});
const storyboardOf = (id: keyof typeof routes, format: "jpg" | "webp") =>
  imageOperation(id, IMAGE_MEDIA_TYPES[format], noQuery, (vod, token, _q, call) =>
    vod.playback.images.storyboard(token, format, call.range),
  );

export const thumbnailJpg = thumbnailOf("thumbnailJpg", "jpg");
export const thumbnailPng = thumbnailOf("thumbnailPng", "png");
export const thumbnailWebp = thumbnailOf("thumbnailWebp", "webp");
export const animatedGif = animatedOf("animatedGif", "gif");
export const animatedWebp = animatedOf("animatedWebp", "webp");
export const storyboardJpg = storyboardOf("storyboardJpg", "jpg");
export const storyboardWebp = storyboardOf("storyboardWebp", "webp");
export const storyboardVtt = imageOperation(
  "storyboardVtt",
  IMAGE_MEDIA_TYPES.vtt,
  noQuery,
  (vod, token, _q, call) => vod.playback.images.storyboardCues(token, call.range),
);

const NOT_MODIFIED = 304;

export const playerScript = publicOperation({
  ...route("playerScript"),
  app: "media",
  body: { kind: "none" },
  stateless: true,
  // A module script from another origin is fetched with CORS.
  cors: { allowHeaders: [], exposeHeaders: ["etag"] },
  input: none,
  output: null,
  // The bundle was not built (`npm run build -w @vod/player`).
  errors: ["PlaybackUnavailable"],
  run: (_vod, _input, call) =>
    Effect.flatMap(Effect.promise(loadPlayerScript), (script) =>
      script === undefined
        ? Effect.fail(new PlaybackUnavailable({ message: "the player is not built on this host" }))
        : Effect.succeed({ script, fresh: headerOf(call, "if-none-match") === script.etag }),
    ),
  reply: {
    kind: { kind: "opaque", mediaTypes: ["text/javascript"] },
    of: ({ script, fresh }) => {
      // Public: the same bytes for everyone. A page re-validates after five minutes, so a new
      // version reaches viewers that soon.
      const headers = { "cache-control": "public, max-age=300", etag: script.etag };
      if (fresh) return { status: NOT_MODIFIED, headers };
      return {
        status: 200,
        headers: {
          ...headers,
          "content-type": "text/javascript; charset=utf-8",
          "content-length": String(script.bytes.length),
        },
        stream: once(script.bytes),
      };
    },
  },
});

const flag = Schema.optional(Schema.Literal("0", "1", "true", "false"));
const on = (value: string | undefined) => value === "1" || value === "true";

export const embed = publicOperation({
  ...route("embed"),
  app: "media",
  credential: { token: "playback", in: "path" },
  body: { kind: "none" },
  input: Schema.Struct({ params: Rq.PlayTokenParams, query: Schema.Struct({ autoplay: flag, muted: flag }) }),
  output: null,
  errors: ["Forbidden", "PlaybackUnavailable"],
  run: (vod, { params, query }) =>
    Effect.map(vod.playback.verify(params.token), (claims) => ({
      page: embedPage(params.token, claims.drm ? vod.ports.links.entitlement() : undefined, {
        autoplay: on(query.autoplay),
        muted: on(query.muted),
      }),
    })),
  reply: {
    kind: { kind: "opaque", mediaTypes: ["text/html"] },
    of: ({ page }) => ({
      status: 200,
      headers: {
        // Private and re-read: the page holds the session's token, a credential.
        "cache-control": "private, no-cache",
        "content-type": "text/html; charset=utf-8",
        "content-length": String(Buffer.byteLength(page)),
        // The token in the page's URL must not travel on as a Referer.
        "referrer-policy": "no-referrer",
      },
      stream: once(page),
    }),
  },
});
/**
 * A static rendition (`high.mp4`, `low.mp4`, `audio.m4a`), answered as every playback file is; with
 * `download=NAME`, as an attachment named NAME (RFC 6266, `filename*` for what ASCII cannot say).
 * Listed before `playFile`, whose `*path` would take it.
 */
const staticRenditionOperation = (id: keyof typeof routes, name: StaticRenditionName) =>
  publicOperation({
    ...route(id),
    app: "media",
    credential: { token: "playback", in: "path" },
    body: { kind: "none" },
    cors: { ...PLAY_CORS, exposeHeaders: [...PLAY_CORS.exposeHeaders, "content-disposition"] },
    input: Schema.Struct({ params: Rq.PlayTokenParams, query: Rq.StaticRenditionQuery }),
    output: null,
    errors: ["Forbidden", "PlaybackUnavailable"],
    run: (vod, { params, query }, call) =>
      vod.playback.staticRenditions.open(params.token, name, call.range, query.download),
    reply: {
      kind: {
        kind: "file",
        mediaTypes: [STATIC_RENDITION_MEDIA_TYPES[name]],
        headers: { "Content-Disposition": "with `download`: `attachment` and the file name asked for" },
      },
      of: ({ file, download }, vod) => {
        const reply = fileReply(file, vod);
        if (download === undefined || reply.status >= 300) return reply;
        return {
          ...reply,
          headers: {
            ...reply.headers,
            "content-disposition": contentDisposition(download, { type: "attachment" }),
          },
        };
      },
    },
  });

export const staticHigh = staticRenditionOperation("staticHigh", "high.mp4");
export const staticLow = staticRenditionOperation("staticLow", "low.mp4");
export const staticAudio = staticRenditionOperation("staticAudio", "audio.m4a");

/** DECISIONS: a telemetry batch is at most 32 KiB, refused before it is read whole. */
export const TELEMETRY_MAX_BYTES = 32 * 1024;

export const telemetry = publicOperation({
  ...route("telemetry"),
  app: "media",
  credential: { token: "playback", in: "body" },
  // Beacons go as text/plain (no CORS preflight) as often as JSON.
  body: { kind: "text", maxBytes: TELEMETRY_MAX_BYTES, mediaTypes: ["text/plain", "application/json"] },
  // Invalid events, a NUL in one included, are dropped and counted; the batch stands. Events
  // keep their extra keys (schema: unknown); the batch's own fields are checked as anywhere.
  lenient: { nul: true },
  cors: { allowHeaders: ["content-type"], exposeHeaders: ["x-telemetry-accepted"] },
  input: body(Rq.TelemetryBatch),
  output: null,
  errors: ["Forbidden", "RateLimited"],
  run: (vod, input) => vod.playback.telemetry(input.body),
  reply: {
    kind: { kind: "headers", headers: { "x-telemetry-accepted": "how many events were stored" } },
    of: ({ accepted }) => ({ status: 204, headers: { "x-telemetry-accepted": String(accepted) } }),
  },
});

export const entitlement = publicOperation({
  ...route("entitlement"),
  credential: { token: "playback", in: "bearer" },
  app: "drm",
  body: { kind: "none" },
  cors: { allowHeaders: ["authorization", "content-type"] },
  input: none,
  output: Rs.Entitlement,
  errors: ["Forbidden", "Conflict"],
  run: (vod, _input, call) => vod.playback.entitlement(call.credentials.bearer),
});

const LICENSE_TOKEN = "x-vod-license-token";

export const clearKeyLicense = publicOperation({
  ...route("clearKeyLicense"),
  app: "drm",
  credential: { token: "license", in: "header", name: LICENSE_TOKEN },
  // EME players post the licence request as raw bytes; whatever its content type, it is JSON.
  body: { kind: "text", maxBytes: 16 * 1024, mediaTypes: ["application/json", "application/octet-stream"] },
  cors: { allowHeaders: ["content-type", LICENSE_TOKEN] },
  input: body(Rq.ClearKeyRequest),
  output: Rs.ClearKeyLicense,
  // The asset has no content key.
  errors: ["Forbidden", "NotFound"],
  verify: (vod, call) => vod.playback.verifyLicense(headerOf(call, LICENSE_TOKEN)),
  run: (vod, input, call) => vod.playback.licenseFor(call.claims, input.body),
});

export const createWebhook = authedOperation({
  ...route("createWebhook"),
  ...onBody(admin, Rq.CreateWebhookBody, WebhookCreated, (vod) => vod.webhooks.create),
  // Past the tenant's quota of webhooks.
  errors: ["Conflict"],
  idempotency: { secrets: [["secret"]] },
});

export const listWebhooks = authedOperation({
  ...route("listWebhooks"),
  ...onTenant(admin, Schema.Struct({ data: Schema.Array(Rs.Webhook) }), (vod) => vod.webhooks.list),
});

export const getWebhook = authedOperation({
  ...route("getWebhook"),
  ...onId(admin, WebhookReply, (vod) => vod.webhooks.get),
});

export const deleteWebhook = authedOperation({
  ...route("deleteWebhook"),
  ...endingId(admin, (vod) => vod.webhooks.remove),
});

export const listWebhookDeliveries = authedOperation({
  ...route("listWebhookDeliveries"),
  ...onId(admin, Schema.Struct({ data: Schema.Array(Rs.WebhookDelivery) }), (vod) => vod.webhooks.deliveries),
});

export const redeliverWebhook = authedOperation({
  ...route("redeliverWebhook"),
  auth: admin,
  input: Schema.Struct({ params: Rq.DeliveryParams }),
  output: Schema.Struct({ delivery: Rs.WebhookDelivery }),
  run: (vod, { params }, call) => vod.webhooks.redeliver(call.principal, params.id, params.delivery_id),
});

export const getAnalytics = authedOperation({
  ...route("getAnalytics"),
  auth: read,
  input: Schema.Struct({ params: Rq.AnalyticsParams, query: Rq.AnalyticsQuery }),
  output: Rs.AnalyticsAnswer,
  // asset_id of no asset of the tenant's.
  errors: ["NotFound"],
  run: (vod, { params, query }, call) => vod.analytics.query(call.principal, params.metric, query),
});

// The host's own routes: they answer from the process (`call.host`), not from a use case.

const NO_BODY = { kind: "none" } as const;

/** The answer to a route the handler was not given what it needs for: as if it were not there. */
const noRoute = (call: PublicCall) => new NotFound({ message: `no route for ${call.method} ${call.path}` });

export const health = publicOperation({
  ...route("health"),
  body: NO_BODY,
  stateless: true,
  input: none,
  output: Schema.Struct({ status: Schema.Literal("ok") }),
  run: () => Effect.succeed({ status: "ok" as const }),
});

export const ready = publicOperation({
  ...route("ready"),
  body: NO_BODY,
  stateless: true,
  input: none,
  output: Schema.Struct({
    status: Schema.Literal("ok"),
    checks: Schema.Record({ key: Schema.String, value: Schema.Literal("ok", "failed") }),
  }),
  errors: ["StorageError"],
  run: (_vod, _input, call) =>
    Effect.map(
      Effect.promise(
        (): Promise<Readonly<Record<string, "ok" | "failed">>> =>
          call.host?.readiness() ?? Promise.resolve({}),
      ),
      (checks) => ({ status: "ok" as const, checks }),
    ),
  reply: {
    kind: { kind: "json" },
    of: (ready) => {
      const down = Object.keys(ready.checks).filter((name) => ready.checks[name] !== "ok");
      if (down.length === 0) return { status: 200, body: ready };
      // A load balancer reads the status; an operator reads which dependency is down.
      const { status, headers, body } = errorReply(new StorageError({ message: "not ready" }));
      return {
        status,
        headers,
        body: { ...body, message: `not ready: ${down.join(", ")}`, details: { checks: ready.checks } },
      };
    },
  },
});

/** Both sides hashed first: equal lengths for timingSafeEqual, and the token's length not told either. */
const sameSecret = (given: string, expected: string) =>
  timingSafeEqual(
    createHash("sha256").update(given).digest(),
    createHash("sha256").update(expected).digest(),
  );

async function* once(text: string | Uint8Array): AsyncIterable<Uint8Array> {
  yield typeof text === "string" ? Buffer.from(text) : text;
}

export const metrics = publicOperation({
  ...route("metrics"),
  body: NO_BODY,
  stateless: true,
  credential: { token: "metrics", in: "bearer" },
  input: none,
  output: null,
  errors: ["Unauthorized"],
  verify: (_vod, call) => {
    const registry = call.host?.metrics;
    if (registry === undefined) return Effect.fail(noRoute(call));
    const token = call.host?.metricsToken;
    const bearer = call.credentials.bearer;
    if (token !== undefined && (bearer === undefined || !sameSecret(bearer, token)))
      return Effect.fail(new Unauthorized({ message: "a metrics token is required" }));
    return Effect.succeed(registry);
  },
  run: (_vod, _input, call) =>
    Effect.map(
      Effect.promise(() => call.claims.render()),
      (text) => ({ text, contentType: call.claims.contentType }),
    ),
  reply: {
    kind: { kind: "opaque", mediaTypes: ["text/plain"] },
    of: ({ text, contentType }) => ({
      status: 200,
      headers: { "content-type": contentType, "content-length": String(Buffer.byteLength(text)) },
      stream: once(text),
    }),
  },
});

export const openApi = publicOperation({
  ...route("openApi"),
  body: NO_BODY,
  stateless: true,
  input: none,
  output: null,
  run: (_vod, _input, call) =>
    call.host?.document === undefined ? Effect.fail(noRoute(call)) : Effect.succeed(call.host.document),
  reply: {
    kind: { kind: "opaque", mediaTypes: ["application/json"] },
    of: (document) => ({ status: 200, body: document }),
  },
});

/** The page of `apiReference`: the same document, so absent where `/v1/openapi.json` is. */
export const apiReference = publicOperation({
  ...route("apiReference"),
  body: NO_BODY,
  stateless: true,
  input: none,
  output: null,
  run: (_vod, _input, call) =>
    call.host?.document === undefined ? Effect.fail(noRoute(call)) : Effect.succeed(REFERENCE_PAGE),
  reply: {
    kind: { kind: "opaque", mediaTypes: ["text/html"] },
    of: (page) => ({
      status: 200,
      headers: {
        "content-type": "text/html; charset=utf-8",
        "content-length": String(Buffer.byteLength(page)),
      },
      stream: once(page),
    }),
  },
});

export const apiReferenceScript = publicOperation({
  ...route("apiReferenceScript"),
  body: NO_BODY,
  stateless: true,
  input: none,
  output: null,
  run: (_vod, _input, call) =>
    call.host?.document === undefined
      ? Effect.fail(noRoute(call))
      : // The renderer is a dependency of this package: unreadable, the install is broken (a 500).
        Effect.promise(referenceScript),
  reply: {
    kind: { kind: "opaque", mediaTypes: ["text/javascript"] },
    of: (script) => ({
      status: 200,
      headers: {
        "content-type": "text/javascript; charset=utf-8",
        "content-length": String(script.byteLength),
        // The same bytes until the platform is upgraded; an hour spares reloads 5 MB each.
        "cache-control": "public, max-age=3600",
      },
      stream: once(script),
    }),
  },
});

/** What a browser page may send the API and read back (DECISIONS "Operations"). */
export const API_CORS = {
  methods: "GET, POST, PATCH, DELETE, OPTIONS",
  headers: "authorization, content-type, x-api-key, idempotency-key, x-request-id",
  expose: "Retry-After, Idempotent-Replayed, x-request-id",
};

export const apiPreflight = publicOperation({
  ...route("apiPreflight"),
  body: NO_BODY,
  stateless: true,
  // Whatever the path holds, a preflight only asks about CORS.
  lenient: { nul: true },
  input: Schema.Struct({ params: Schema.Struct({ path: Schema.String }) }),
  output: null,
  errors: ["NotFound"],
  run: (_vod, _input, call) =>
    call.host?.corsAllows(headerOf(call, "origin")) ? Effect.void : Effect.fail(noRoute(call)),
  reply: {
    kind: {
      kind: "headers",
      headers: {
        "access-control-allow-methods": "the API's methods",
        "access-control-allow-headers": "the request headers a page may send",
        "access-control-max-age": "how long a browser may keep this answer, in seconds",
      },
    },
    of: () => ({
      status: 204,
      headers: {
        "access-control-allow-methods": API_CORS.methods,
        "access-control-allow-headers": API_CORS.headers,
        "access-control-max-age": "600",
      },
    }),
  },
});

/** The host's own routes: what every process that serves HTTP answers. */
export const hostOperations: ReadonlyArray<Operation> = [
  health,
  ready,
  metrics,
  openApi,
  apiReference,
  apiReferenceScript,
  apiPreflight,
];

/** Every operation of the API, in the spec's order, then the host's own. */
export const operations: ReadonlyArray<Operation> = [
  signup,
  login,
  google,
  refresh,
  logout,
  changePassword,
  me,
  deleteTenant,
  requestEmailVerification,
  confirmEmail,
  forgotPassword,
  resetPassword,
  listApiKeys,
  createApiKey,
  revokeApiKey,
  listAssets,
  createAsset,
  getAsset,
  updateAsset,
  deleteAsset,
  createTextTrack,
  listTextTracks,
  deleteTextTrack,
  startUpload,
  resumeUpload,
  abortUpload,
  completeUpload,
  createPlaybackSession,
  revokePlaybackSession,
  uploadPart,
  thumbnailJpg,
  thumbnailPng,
  thumbnailWebp,
  animatedGif,
  animatedWebp,
  storyboardJpg,
  storyboardWebp,
  storyboardVtt,
  staticHigh,
  staticLow,
  staticAudio,
  playFile,
  playerScript,
  embed,
  telemetry,
  entitlement,
  clearKeyLicense,
  createWebhook,
  listWebhooks,
  getWebhook,
  deleteWebhook,
  listWebhookDeliveries,
  redeliverWebhook,
  getAnalytics,
  ...hostOperations,
];

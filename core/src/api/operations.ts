import { Effect, Schema } from "effect";
import { Requests as Rq, Resources as Rs } from "../schema/index.js";
import type { Principal } from "../use-cases/authenticate.js";
import type { Vod } from "../vod.js";
import {
  type AuthedCall,
  authedOperation,
  type Operation,
  type PublicCall,
  publicOperation,
  type Reply,
} from "./operation.js";

const body = <A, I>(schema: Schema.Schema<A, I>) => Schema.Struct({ body: schema });
const params = Schema.Struct({ params: Rq.IdParams });
const none = Schema.Struct({});

const User = Schema.Struct({ user: Rs.User, ...Rs.TokenFields });
type UserCall = AuthedCall & { principal: Principal & { kind: "user" } };
const asUser = (call: AuthedCall) => call as UserCall;
const userOnly = ["user"] as const;

export const signup = publicOperation({
  id: "signup",
  method: "POST",
  path: "/v1/auth/signup",
  summary: "Create a tenant and its owner user, and sign in.",
  status: 201,
  input: body(Rq.SignupBody),
  output: Schema.Struct({ user: Rs.User, tenant: Rs.Tenant, ...Rs.TokenFields }),
  errors: ["Conflict", "RateLimited"],
  run: (vod, { body }, call) => vod.accounts.signup(body, call.clientIp),
});

export const login = publicOperation({
  id: "login",
  method: "POST",
  path: "/v1/auth/login",
  summary: "Sign in with email and password.",
  status: 200,
  input: body(Rq.LoginBody),
  output: User,
  errors: ["Unauthorized", "Forbidden", "RateLimited"],
  run: (vod, { body }, call) => vod.accounts.login(body, call.clientIp),
});

export const google = publicOperation({
  id: "google",
  method: "POST",
  path: "/v1/auth/google",
  summary: "Sign in with a Google ID token; creates the account when the identity is new.",
  status: 200,
  input: body(Rq.GoogleBody),
  output: Schema.Struct({ user: Rs.User, ...Rs.TokenFields, created: Schema.Boolean }),
  errors: ["Unauthorized", "Forbidden", "Conflict", "RateLimited"],
  run: (vod, { body }, call) => vod.accounts.google(body.id_token, call.clientIp),
});

export const refresh = publicOperation({
  id: "refresh",
  method: "POST",
  path: "/v1/auth/refresh",
  summary: "Rotate a refresh token: the presented one is invalidated and a new pair issued.",
  status: 200,
  input: body(Rq.RefreshBody),
  output: Rs.Tokens,
  errors: ["Unauthorized", "Forbidden", "RateLimited"],
  run: (vod, { body }, call) => vod.accounts.refresh(body.refresh_token, call.clientIp),
});

export const logout = authedOperation({
  id: "logout",
  method: "POST",
  path: "/v1/auth/logout",
  summary: "End the access token's session, and the given refresh token's session.",
  status: 204,
  auth: { scope: "read", kinds: userOnly },
  input: body(Rq.LogoutBody),
  output: null,
  run: (vod, { body }, call) => vod.accounts.logout(asUser(call).principal, body.refresh_token),
});

export const changePassword = authedOperation({
  id: "changePassword",
  method: "POST",
  path: "/v1/auth/password",
  summary: "Change the current user's password; every other session of the user ends.",
  status: 204,
  auth: { scope: "read", kinds: userOnly },
  input: body(Rq.PasswordChangeBody),
  output: null,
  run: (vod, { body }, call) => vod.accounts.changePassword(asUser(call).principal, body),
});

export const me = authedOperation({
  id: "me",
  method: "GET",
  path: "/v1/auth/me",
  summary: "The identity behind the credential.",
  status: 200,
  auth: { scope: "read" },
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

export const listApiKeys = authedOperation({
  id: "listApiKeys",
  method: "GET",
  path: "/v1/api-keys",
  summary: "API keys of the tenant, newest first, at most 500.",
  status: 200,
  auth: { scope: "read" },
  input: none,
  output: Schema.Struct({ data: Schema.Array(Rs.ApiKey) }),
  run: (vod, _input, call) => vod.apiKeys.list(call.principal),
});

export const createApiKey = authedOperation({
  id: "createApiKey",
  method: "POST",
  path: "/v1/api-keys",
  summary: "Create an API key; the full key is in this response only.",
  status: 201,
  auth: { scope: "admin" },
  input: body(Rq.CreateApiKeyBody),
  output: Schema.Struct({
    id: Schema.String,
    name: Schema.String,
    prefix: Schema.String,
    scopes: Schema.Array(Rs.Scope),
    created_at: Rs.EpochMs,
    key: Schema.String,
  }),
  run: (vod, { body }, call) => vod.apiKeys.create(call.principal, body),
});

export const revokeApiKey = authedOperation({
  id: "revokeApiKey",
  method: "DELETE",
  path: "/v1/api-keys/:id",
  summary: "Revoke an API key; it stops working at once.",
  status: 204,
  auth: { scope: "admin" },
  input: params,
  output: null,
  run: (vod, { params }, call) => vod.apiKeys.revoke(call.principal, params.id),
});

export const listAssets = authedOperation({
  id: "listAssets",
  method: "GET",
  path: "/v1/assets",
  summary: "Assets of the tenant, newest first, keyset paginated.",
  status: 200,
  auth: { scope: "read" },
  input: Schema.Struct({ query: Rq.ListAssetsQuery }),
  output: Schema.Struct({ data: Schema.Array(Rs.Asset), next_cursor: Schema.NullOr(Schema.String) }),
  run: (vod, { query }, call) => vod.assets.list(call.principal, query),
});

export const createAsset = authedOperation({
  id: "createAsset",
  method: "POST",
  path: "/v1/assets",
  summary: "Create an asset draft (pending, private).",
  status: 201,
  auth: { scope: "write" },
  input: body(Rq.CreateAssetBody),
  output: Schema.Struct({ asset: Rs.Asset }),
  run: (vod, { body }, call) => vod.assets.create(call.principal, body),
});

export const getAsset = authedOperation({
  id: "getAsset",
  method: "GET",
  path: "/v1/assets/:id",
  summary: "One asset of the tenant.",
  status: 200,
  auth: { scope: "read" },
  input: params,
  output: Schema.Struct({ asset: Rs.Asset }),
  run: (vod, { params }, call) => vod.assets.get(call.principal, params.id),
});

export const startUpload = authedOperation({
  id: "startUpload",
  method: "POST",
  path: "/v1/uploads",
  summary: "Start a multipart upload session for an asset: one upload URL per part.",
  status: 201,
  auth: { scope: "write" },
  input: body(Rq.StartUploadBody),
  output: Schema.Struct({ upload: Rs.UploadStarted }),
  errors: ["UploadInProgress"],
  run: (vod, { body }, call) => vod.uploads.start(call.principal, body),
});

export const resumeUpload = authedOperation({
  id: "resumeUpload",
  method: "GET",
  path: "/v1/uploads/:id",
  summary: "Resume an upload: the parts stored so far and fresh URLs for the missing ones.",
  status: 200,
  auth: { scope: "read" },
  input: params,
  output: Schema.Struct({ upload: Rs.UploadResumed }),
  run: (vod, { params }, call) => vod.uploads.resume(call.principal, params.id),
});

export const abortUpload = authedOperation({
  id: "abortUpload",
  method: "DELETE",
  path: "/v1/uploads/:id",
  summary: "Abort an upload session; its stored parts are removed.",
  status: 204,
  auth: { scope: "write" },
  input: params,
  output: null,
  errors: ["UploadInProgress"],
  run: (vod, { params }, call) => vod.uploads.abort(call.principal, params.id),
});

export const completeUpload = authedOperation({
  id: "completeUpload",
  method: "POST",
  path: "/v1/uploads/:id/complete",
  summary: "Verify the stored parts, assemble the origin file and start processing. Idempotent.",
  status: 200,
  auth: { scope: "write" },
  input: Schema.Struct({ params: Rq.IdParams, body: Rq.CompleteUploadBody }),
  output: Schema.Struct({ upload: Rs.UploadSession, asset: Rs.Asset }),
  errors: ["UploadInProgress"],
  run: (vod, { params, body }, call) => vod.uploads.complete(call.principal, params.id, body),
});

export const createPlaybackSession = authedOperation({
  id: "createPlaybackSession",
  method: "POST",
  path: "/v1/playback/sessions",
  summary: "Mint a playback session for a ready asset: a signed token and its delivery URLs.",
  status: 201,
  auth: { scope: "read" },
  input: body(Rq.CreatePlaybackBody),
  output: Rs.PlaybackCreated,
  errors: ["UploadInProgress"],
  run: (vod, { body }, call) => vod.playback.create(call.principal, body),
});

export const revokePlaybackSession = authedOperation({
  id: "revokePlaybackSession",
  method: "DELETE",
  path: "/v1/playback/sessions/:id",
  summary: "End a playback session; its token stops working everywhere within about two minutes.",
  status: 204,
  auth: { scope: "read" },
  input: params,
  output: null,
  run: (vod, { params }, call) => vod.playback.revoke(call.principal, params.id),
});

export const uploadPart = publicOperation({
  id: "uploadPart",
  method: "PUT",
  path: "/v1/uploads/:id/parts/:number",
  summary: "Upload one part's bytes to the signed URL `startUpload` or `resumeUpload` gave.",
  app: "media",
  credential: { token: "part-signature", in: "query" },
  body: { kind: "stream", mediaType: "application/octet-stream" },
  // Browsers upload parts straight from a page, and read the ETag.
  cors: {
    allowHeaders: ["content-type", "content-md5", "x-request-id"],
    exposeHeaders: ["ETag", "x-request-id"],
  },
  status: 200,
  input: Schema.Struct({ params: Rq.PartParams, query: Rq.PartUrlQuery }),
  output: null,
  errors: ["UploadInProgress"],
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

type Opened = Effect.Effect.Success<ReturnType<Vod["playback"]["open"]>>;

/** A media file as HTTP answers it: whole or by range, a redirect to the store, or 416. */
const fileReply = (file: Opened, vod: Vod): Reply => {
  if (file.kind === "unsatisfiable")
    return { status: 416, headers: { "content-range": `bytes */${file.size}` } };
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
  id: "playFile",
  method: "GET",
  path: "/v1/play/:token/*path",
  summary: "A manifest, segment or key file of a playback session; byte ranges supported.",
  app: "media",
  credential: { token: "playback", in: "path" },
  body: { kind: "none" },
  // A file name with a NUL is no file of the asset: 404 like any other.
  lenient: { nul: true },
  cors: { allowHeaders: ["range"], exposeHeaders: ["content-length", "content-range", "accept-ranges"] },
  status: 200,
  input: Schema.Struct({ params: Rq.PlayParams }),
  output: null,
  errors: ["Forbidden", "PlaybackUnavailable"],
  run: (vod, { params }, call) => vod.playback.open(params.token, params.path, call.range),
  reply: { kind: { kind: "file" }, of: (file, vod) => fileReply(file, vod) },
});

/** DECISIONS: a telemetry batch is at most 32 KiB, refused before it is read whole. */
export const TELEMETRY_MAX_BYTES = 32 * 1024;

export const telemetry = publicOperation({
  id: "telemetry",
  method: "POST",
  path: "/v1/telemetry",
  summary: "A player's batch of playback events, with the playback token in the body.",
  app: "media",
  credential: { token: "playback", in: "body" },
  // Beacons go as text/plain (no CORS preflight) as often as JSON.
  body: { kind: "text", maxBytes: TELEMETRY_MAX_BYTES, mediaTypes: ["text/plain", "application/json"] },
  // Invalid events, a NUL in one included, are dropped and counted; the batch stands.
  lenient: { unknownFields: true, nul: true },
  cors: { allowHeaders: ["content-type"], exposeHeaders: ["x-telemetry-accepted"] },
  status: 204,
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
  id: "entitlement",
  method: "POST",
  path: "/v1/drm/entitlement",
  summary: "The DRM entitlement of a playback session: licence URL and token.",
  app: "drm",
  credential: { token: "playback", in: "bearer" },
  body: { kind: "none" },
  cors: { allowHeaders: ["authorization", "content-type"] },
  status: 200,
  input: none,
  output: Rs.Entitlement,
  errors: ["Forbidden", "Conflict"],
  run: (vod, _input, call) => vod.playback.entitlement(call.credentials.bearer),
});

const LICENSE_TOKEN = "x-vod-license-token";

const headerOf = (call: PublicCall, name: string) => {
  const value = call.headers?.[name];
  return typeof value === "string" ? value : undefined;
};

export const clearKeyLicense = publicOperation({
  id: "clearKeyLicense",
  method: "POST",
  path: "/v1/drm/clearkey/license",
  summary: "A W3C ClearKey licence for the requested key ids.",
  app: "drm",
  credential: { token: "license", in: "header", name: LICENSE_TOKEN },
  // EME players post the licence request as raw bytes; whatever its content type, it is JSON.
  body: { kind: "text", maxBytes: 16 * 1024, mediaTypes: ["application/json", "application/octet-stream"] },
  lenient: { unknownFields: true },
  cors: { allowHeaders: ["content-type", LICENSE_TOKEN] },
  status: 200,
  input: body(Rq.ClearKeyRequest),
  output: Rs.ClearKeyLicense,
  // The asset has no content key.
  errors: ["Forbidden", "NotFound"],
  run: (vod, input, call) => vod.playback.clearKeyLicense(headerOf(call, LICENSE_TOKEN), input.body),
});

/** Every operation of the API, in the spec's order. */
export const operations: ReadonlyArray<Operation> = [
  signup,
  login,
  google,
  refresh,
  logout,
  changePassword,
  me,
  listApiKeys,
  createApiKey,
  revokeApiKey,
  listAssets,
  createAsset,
  getAsset,
  startUpload,
  resumeUpload,
  abortUpload,
  completeUpload,
  createPlaybackSession,
  revokePlaybackSession,
  uploadPart,
  playFile,
  telemetry,
  entitlement,
  clearKeyLicense,
];

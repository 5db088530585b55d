import { Effect, Schema } from "effect";
import { Requests as Rq, Resources as Rs } from "../schema/index.js";
import type { Principal } from "../use-cases/authenticate.js";
import { type AuthedCall, authedOperation, type Operation, publicOperation } from "./operation.js";

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

export const createWebhook = authedOperation({
  id: "createWebhook",
  method: "POST",
  path: "/v1/webhooks",
  summary: "Register an endpoint for the tenant's events; its signing secret is in this response only.",
  status: 201,
  auth: { scope: "admin" },
  input: body(Rq.CreateWebhookBody),
  output: Schema.Struct({ webhook: Rs.Webhook, secret: Schema.String }),
  run: (vod, { body }, call) => vod.webhooks.create(call.principal, body),
});

export const listWebhooks = authedOperation({
  id: "listWebhooks",
  method: "GET",
  path: "/v1/webhooks",
  summary: "Webhooks of the tenant, newest first, at most 100.",
  status: 200,
  auth: { scope: "admin" },
  input: none,
  output: Schema.Struct({ data: Schema.Array(Rs.Webhook) }),
  run: (vod, _input, call) => vod.webhooks.list(call.principal),
});

export const getWebhook = authedOperation({
  id: "getWebhook",
  method: "GET",
  path: "/v1/webhooks/:id",
  summary: "One webhook of the tenant.",
  status: 200,
  auth: { scope: "admin" },
  input: params,
  output: Schema.Struct({ webhook: Rs.Webhook }),
  run: (vod, { params }, call) => vod.webhooks.get(call.principal, params.id),
});

export const deleteWebhook = authedOperation({
  id: "deleteWebhook",
  method: "DELETE",
  path: "/v1/webhooks/:id",
  summary: "Delete a webhook; nothing more is sent to it.",
  status: 204,
  auth: { scope: "admin" },
  input: params,
  output: null,
  run: (vod, { params }, call) => vod.webhooks.remove(call.principal, params.id),
});

export const listWebhookDeliveries = authedOperation({
  id: "listWebhookDeliveries",
  method: "GET",
  path: "/v1/webhooks/:id/deliveries",
  summary: "A webhook's deliveries, newest first, at most 100: status, attempts, last status code.",
  status: 200,
  auth: { scope: "admin" },
  input: params,
  output: Schema.Struct({ data: Schema.Array(Rs.WebhookDelivery) }),
  run: (vod, { params }, call) => vod.webhooks.deliveries(call.principal, params.id),
});

export const redeliverWebhook = authedOperation({
  id: "redeliverWebhook",
  method: "POST",
  path: "/v1/webhooks/:id/deliveries/:delivery_id/redeliver",
  summary: "Send a delivery's event again (same webhook-id), as a new delivery.",
  status: 202,
  auth: { scope: "admin" },
  input: Schema.Struct({ params: Rq.DeliveryParams }),
  output: Schema.Struct({ delivery: Rs.WebhookDelivery }),
  run: (vod, { params }, call) => vod.webhooks.redeliver(call.principal, params.id, params.delivery_id),
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
  createWebhook,
  listWebhooks,
  getWebhook,
  deleteWebhook,
  listWebhookDeliveries,
  redeliverWebhook,
];

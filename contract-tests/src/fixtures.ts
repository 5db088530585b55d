import { randomUUID } from "node:crypto";
import type {
  ApiKey,
  Asset,
  EmailToken,
  RefreshSession,
  RefreshToken,
  Tenant,
  UploadSession,
  UserRecord,
  Webhook,
  WebhookDelivery,
} from "@vod/core";
import { AssetId, newAssetDraft, PlaybackSessionId, TenantId, UploadId } from "@vod/core";

/** Unique ids per call, so tests never collide on shared storage. */
export const uid = (prefix: string) => `${prefix}_${randomUUID().replaceAll("-", "")}`;

/** A unique id of each branded kind, as the Ids port would mint one. */
export const newId = {
  tenant: () => TenantId(uid("tnt")),
  asset: () => AssetId(uid("ast")),
  upload: () => UploadId(uid("upl")),
  playback: () => PlaybackSessionId(uid("pbs")),
};

export const aTenant = (over: Partial<Tenant> = {}): Tenant => ({
  id: newId.tenant(),
  slug: `t-${randomUUID().slice(0, 6)}`,
  name: "Tenant",
  plan: "free",
  status: "active",
  created_at: 1_700_000_000_000,
  ...over,
});

export const aUser = (tenant: Tenant, over: Partial<UserRecord> = {}): UserRecord => ({
  id: uid("usr"),
  tenant_id: tenant.id,
  email: `${randomUUID()}@example.com`,
  email_verified: false,
  name: null,
  role: "owner",
  created_at: 1_700_000_000_000,
  password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaA",
  ...over,
});

export const aSession = (user: UserRecord, over: Partial<RefreshSession> = {}): RefreshSession => ({
  id: uid("ses"),
  tenant_id: user.tenant_id,
  user_id: user.id,
  created_at: 1_700_000_000_000,
  revoked_at: null,
  revoked_reason: null,
  ...over,
});

export const aToken = (session: RefreshSession, over: Partial<RefreshToken> = {}): RefreshToken => ({
  token_hash: uid("hash"),
  session_id: session.id,
  tenant_id: session.tenant_id,
  user_id: session.user_id,
  created_at: 1_700_000_000_000,
  expires_at: 1_800_000_000_000,
  used_at: null,
  ...over,
});

export const anEmailToken = (
  user: { readonly id: string; readonly tenant_id: TenantId; readonly email: string },
  over: Partial<EmailToken> = {},
): EmailToken => ({
  token_hash: uid("hash"),
  purpose: "reset_password",
  tenant_id: user.tenant_id,
  user_id: user.id,
  email: user.email,
  created_at: 1_700_000_000_000,
  expires_at: 1_700_001_800_000,
  used_at: null,
  ...over,
});

export const anApiKey = (tenant: Tenant, over: Partial<ApiKey> = {}): ApiKey => ({
  id: uid("key"),
  tenant_id: tenant.id,
  name: "key",
  prefix: "vod_abcdefgh",
  scopes: ["write"],
  key_hash: uid("hash"),
  last_used_at: null,
  expires_at: null,
  revoked_at: null,
  created_at: 1_700_000_000_000,
  ...over,
});

export const anUpload = (asset: Asset, over: Partial<UploadSession> = {}): UploadSession => ({
  id: newId.upload(),
  tenant_id: asset.tenant_id,
  asset_id: asset.id,
  status: "created",
  part_size: 8 * 1024 * 1024,
  part_count: 2,
  size_bytes: 10 * 1024 * 1024,
  sha256: null,
  expires_at: 1_800_000_000_000,
  created_at: 1_700_000_000_000,
  completed_at: null,
  completed_parts: null,
  ...over,
});

export const anAsset = (tenant: Tenant, over: Partial<Asset> = {}): Asset => ({
  ...newAssetDraft({ id: newId.asset(), tenant_id: tenant.id, now: 1_700_000_000_000 }),
  ...over,
});

export const aWebhook = (tenant: Tenant, over: Partial<Webhook> = {}): Webhook => ({
  id: uid("whk"),
  tenant_id: tenant.id,
  url: "https://hooks.example.com/vod",
  events: ["*"],
  description: null,
  secret: `whsec_${Buffer.from(randomUUID()).toString("base64")}`,
  created_at: 1_700_000_000_000,
  deleted_at: null,
  ...over,
});

export const aDelivery = (webhook: Webhook, over: Partial<WebhookDelivery> = {}): WebhookDelivery => ({
  id: uid("dlv"),
  tenant_id: webhook.tenant_id,
  webhook_id: webhook.id,
  event_id: uid("evt"),
  event_type: "asset.ready",
  payload: '{"id":"evt_1","type":"asset.ready"}',
  status: "pending",
  attempts: 0,
  last_status_code: null,
  next_attempt_at: 1_700_000_000_000,
  created_at: 1_700_000_000_000,
  ...over,
});

import type { Effect, Option } from "effect";
import type { ApiKey } from "../domain/api-key.js";
import type { Asset, AssetDetails, AssetStatus } from "../domain/asset.js";
import type { EmailToken, EmailTokenPurpose } from "../domain/email-token.js";
import type { AssetId, PlaybackSessionId, TenantId, UploadId } from "../domain/ids.js";
import type { PlaybackSession } from "../domain/playback-session.js";
import type { RefreshSession, RefreshToken, RevokedReason } from "../domain/refresh-session.js";
import type { Tenant, TenantStatus } from "../domain/tenant.js";
import type { TextTrack } from "../domain/text-track.js";
import type { UploadedPart, UploadSession } from "../domain/upload-session.js";
import type { Identity, UserRecord } from "../domain/user.js";
import type { DeliveryAttempt, Webhook, WebhookDelivery, WebhookEventType } from "../domain/webhook.js";
import type { Conflict, StorageError } from "../errors.js";
import type { JobRepository } from "./job-queue.js";

/**
 * Repositories of the core. Every method is atomic on its own; several together are atomic only
 * inside `Storage.transaction`. Tenant-owned reads take the tenant id: a row of another tenant is
 * simply not there.
 */
type Op<A, E = never> = Effect.Effect<A, E | StorageError>;

export interface TenantRepository {
  /** Conflict when the slug is taken, or was a deleted tenant's: a slug is never reused. */
  insert(tenant: Tenant): Op<void, Conflict>;
  get(id: TenantId): Op<Option.Option<Tenant>>;
  setStatus(id: TenantId, status: TenantStatus): Op<void>;
  /**
   * Sets the status `deleted` and retires the slug for good (kept only as its SHA-256, apart
   * from the tenant's rows). False when the tenant is not there or deleted already: of two
   * racing deletions one gets true.
   */
  markDeleted(id: string, at: number): Op<boolean>;
  /**
   * Deletes every row of the tenant in every table, the tenant's own row last; the retired slug
   * stays. Harmless to repeat. Not atomic: a run cut short is finished by the next.
   */
  purge(id: string): Op<void>;
  /**
   * Inside a transaction: holds the tenant until it ends, so that creates counted against a
   * quota take turns (a count and its insert are one decision). Outside one it holds nothing.
   */
  lock(id: TenantId): Op<void>;
}

export interface UserRepository {
  /** Conflict when the email is taken (without regard to case). */
  insert(user: UserRecord): Op<void, Conflict>;
  get(tenantId: TenantId, id: string): Op<Option.Option<UserRecord>>;
  /** Looks across tenants, without regard to case. */
  findByEmail(email: string): Op<Option.Option<UserRecord>>;
  /** null: the user has no password any more (signs in through its linked identity). */
  setPasswordHash(tenantId: TenantId, id: string, passwordHash: string | null): Op<void>;
  setEmailVerified(tenantId: TenantId, id: string, verified: boolean): Op<void>;
}

export interface IdentityRepository {
  /** Conflict when the provider account is linked already. */
  insert(identity: Identity): Op<void, Conflict>;
  find(provider: Identity["provider"], subject: string): Op<Option.Option<Identity>>;
}

export interface RefreshSessionRepository {
  insertSession(session: RefreshSession): Op<void>;
  getSession(tenantId: TenantId, id: string): Op<Option.Option<RefreshSession>>;
  /** Revokes one session; a revoked one keeps its first revoked_at and reason. */
  revokeSession(tenantId: TenantId, id: string, at: number, reason: RevokedReason): Op<void>;
  /** Revokes every live session of the user except `exceptSessionId`. */
  revokeUserSessions(
    tenantId: TenantId,
    userId: string,
    exceptSessionId: string | null,
    at: number,
    reason: RevokedReason,
  ): Op<void>;
  insertToken(token: RefreshToken): Op<void>;
  /** By hash alone: the token is the credential that tells the tenant. */
  findToken(tokenHash: string): Op<Option.Option<RefreshToken>>;
  /**
   * Marks the token used if, and only if, it is unused. Of two calls racing on one token exactly
   * one gets `true`; that is what makes reuse detection hold under concurrency.
   */
  markTokenUsed(tokenHash: string, at: number): Op<boolean>;
  /** Deletes up to `limit` tokens, of any tenant, that expired at or before `before`; answers how many. */
  deleteTokensExpired(before: number, limit: number): Op<number>;
}

export interface EmailTokenRepository {
  insert(token: EmailToken): Op<void>;
  /**
   * Uses the token: marks it used if, and only if, it is of `purpose`, unused and not expired at
   * `at` (expired from `expires_at` on), and answers it as it was; none otherwise (unknown, used,
   * expired, or another purpose). By hash alone: the token tells the tenant. Of racing calls on
   * one token exactly one gets it.
   */
  use(tokenHash: string, purpose: EmailTokenPurpose, at: number): Op<Option.Option<EmailToken>>;
  /** Marks every unused token of the user of `purpose` used: a new password ends the other reset links. */
  useAllOfUser(tenantId: TenantId, userId: string, purpose: EmailTokenPurpose, at: number): Op<void>;
  /** Deletes up to `limit` tokens, of any tenant, that expired at or before `before`; answers how many. */
  deleteExpired(before: number, limit: number): Op<number>;
}

export interface ApiKeyRepository {
  insert(key: ApiKey): Op<void>;
  get(tenantId: TenantId, id: string): Op<Option.Option<ApiKey>>;
  findByHash(keyHash: string): Op<Option.Option<ApiKey>>;
  /**
   * Newest first (created_at, then id, descending); with `status`, only the keys active at `now`
   * (neither revoked nor expired) or only the revoked ones.
   */
  list(
    tenantId: TenantId,
    limit: number,
    filter?: { readonly status?: "active" | "revoked"; readonly now: number },
  ): Op<ReadonlyArray<ApiKey>>;
  /** How many of the tenant's keys are active at `now`: neither revoked nor expired. */
  countActive(tenantId: TenantId, now: number): Op<number>;
  /** Sets revoked_at if it is not set yet. */
  revoke(tenantId: TenantId, id: string, at: number): Op<void>;
  /** Sets revoked_at on every key of the tenant that has none; answers how many. */
  revokeAll(tenantId: TenantId, at: number): Op<number>;
  touch(tenantId: TenantId, id: string, at: number): Op<void>;
}

/** A position in the newest-first order of assets: rows strictly after it come next. */
export interface AssetKey {
  readonly created_at: number;
  readonly id: AssetId;
}

export interface AssetRepository {
  insert(asset: Asset): Op<void>;
  get(tenantId: TenantId, id: AssetId): Op<Option.Option<Asset>>;
  /** Newest first by (created_at, id) descending, strictly after `after` when given. */
  list(
    tenantId: TenantId,
    query: {
      readonly status?: AssetStatus | undefined;
      readonly limit: number;
      readonly after?: AssetKey | undefined;
    },
  ): Op<ReadonlyArray<Asset>>;
  /**
   * Stores the asset's processing facts as given (the state machine made them): status,
   * failure_code, source_* and the origin facts. Title, visibility and published_at are the
   * client's, written by `updateDetails` alone, so a long processing run never undoes a PATCH made
   * meanwhile. A deleted asset stays deleted: nothing is written.
   */
  update(asset: Asset): Op<void>;
  /** Writes the given fields only; the asset as stored after it, none when it is not there. */
  updateDetails(tenantId: TenantId, id: AssetId, details: AssetDetails): Op<Option.Option<Asset>>;
  /**
   * Deletes the asset: from then on `get`, `list`, `update` and `updateDetails` do not see it.
   * False when it was not there (deleted already, or another tenant's): of two racing deletes one
   * gets true.
   */
  remove(tenantId: TenantId, id: AssetId, at: number): Op<boolean>;
}

export interface UploadRepository {
  /** Conflict when the asset has an open (`created`) session already: at most one per asset. */
  insert(session: UploadSession): Op<void, Conflict>;
  get(tenantId: TenantId, id: UploadId): Op<Option.Option<UploadSession>>;
  /** The session whose status is stored as created for the asset, if any (it may be past expiry). */
  findOpen(tenantId: TenantId, assetId: AssetId): Op<Option.Option<UploadSession>>;
  /** Moves a stored `created` session to `status`; false when it was not `created` any more. */
  close(tenantId: TenantId, id: UploadId, status: "aborted" | "expired"): Op<boolean>;
  /** Completes a stored `created` session; false when another call completed it first. */
  complete(tenantId: TenantId, id: UploadId, at: number, parts: ReadonlyArray<UploadedPart>): Op<boolean>;
  /** The tenant's sessions stored as created (open), any asset, at most `limit`. */
  listOpen(tenantId: TenantId, limit: number): Op<ReadonlyArray<UploadSession>>;
  /** Sessions stored as created whose expiry has passed, oldest first. */
  listExpired(now: number, limit: number): Op<ReadonlyArray<UploadSession>>;
}

export interface PlaybackSessionRepository {
  insert(session: PlaybackSession): Op<void>;
  get(tenantId: TenantId, id: PlaybackSessionId): Op<Option.Option<PlaybackSession>>;
  /** Sets ended_at if it is not set yet. */
  end(tenantId: TenantId, id: PlaybackSessionId, at: number): Op<void>;
  /**
   * Sets ended_at on every session of the asset that has none, and answers the asset's sessions
   * (ended now or before) whose expires_at is after `expiringAfter`: those whose tokens may still
   * be presented, so that their revocation can be written (again: revoking is idempotent).
   */
  endForAsset(
    tenantId: TenantId,
    assetId: AssetId,
    at: number,
    expiringAfter: number,
  ): Op<ReadonlyArray<PlaybackSession>>;
}

/** An asset's content key, kept only wrapped (encrypted under the master key). */
export interface ContentKey {
  readonly tenant_id: TenantId;
  readonly asset_id: AssetId;
  /** Key id, 32 lowercase hex characters. */
  readonly kid: string;
  /** The key wrapped by the master key (base64url of iv, ciphertext and tag). */
  readonly wrapped_key: string;
  readonly created_at: number;
}

export interface ContentKeyRepository {
  /** Keeps the first key of an asset: a retried processing run reuses it. */
  insertIfAbsent(key: ContentKey): Op<ContentKey>;
  get(tenantId: TenantId, assetId: AssetId): Op<Option.Option<ContentKey>>;
}

/** The answer a repeated request replays: status and body as first sent (null: no body). */
export interface IdempotentResponse {
  readonly status: number;
  readonly body: unknown;
}

/** Where a claim on an idempotency key stands. */
export type IdempotencyClaim =
  /** The caller runs the request, and then completes or releases the key. */
  | { readonly _tag: "Claimed" }
  /** Another request with the key is running. */
  | { readonly _tag: "Running"; readonly fingerprint: string }
  /** The first request's response, to replay. */
  | { readonly _tag: "Done"; readonly fingerprint: string; readonly response: IdempotentResponse };

/**
 * Idempotency key records, per principal (the credential's owner: an API key, or a user) and key
 * within the tenant, shared by every node. `fingerprint` identifies the request (method, path,
 * body) the key was first used for. A response is stored as given: secrets in it are sealed by
 * the caller.
 */
export interface IdempotencyKeyRepository {
  /**
   * Claims the key for a request, running until `lockedUntil`, remembered until `expiresAt`.
   * Atomic: of concurrent claims exactly one is Claimed. A record past its expiry counts as
   * absent, and a running one past `lockedUntil` (its node died) is claimed anew.
   */
  claim(
    tenantId: TenantId,
    principal: string,
    key: string,
    fingerprint: string,
    times: { readonly now: number; readonly lockedUntil: number; readonly expiresAt: number },
  ): Op<IdempotencyClaim>;
  /** Stores the response of the claimed request: later claims answer Done with it. */
  complete(
    tenantId: TenantId,
    principal: string,
    key: string,
    fingerprint: string,
    response: IdempotentResponse,
  ): Op<void>;
  /** Forgets a running claim whose response is not to be replayed: the key is free again. */
  release(tenantId: TenantId, principal: string, key: string, fingerprint: string): Op<void>;
  /** Deletes up to `limit` records past their expiry, of any tenant; answers how many. */
  deleteExpired(now: number, limit: number): Op<number>;
}

export interface WebhookRepository {
  insert(webhook: Webhook): Op<void>;
  /** A webhook not deleted. */
  get(tenantId: TenantId, id: string): Op<Option.Option<Webhook>>;
  /** Webhooks not deleted, newest first (created_at, then id, descending). */
  list(tenantId: TenantId, limit: number): Op<ReadonlyArray<Webhook>>;
  /** How many of the tenant's webhooks are not deleted. */
  count(tenantId: TenantId): Op<number>;
  /** Webhooks not deleted that subscribe to `type` (or to every type). */
  listSubscribed(tenantId: TenantId, type: WebhookEventType): Op<ReadonlyArray<Webhook>>;
  /** Sets deleted_at if it is not set yet; false when there was no such live webhook. */
  remove(tenantId: TenantId, id: string, at: number): Op<boolean>;
  /** Sets deleted_at on every live webhook of the tenant; answers how many. */
  removeAll(tenantId: TenantId, at: number): Op<number>;
}

export interface WebhookDeliveryRepository {
  insert(delivery: WebhookDelivery): Op<void>;
  get(tenantId: TenantId, id: string): Op<Option.Option<WebhookDelivery>>;
  /** The webhook's deliveries, newest first (created_at, then id, descending). */
  listByWebhook(tenantId: TenantId, webhookId: string, limit: number): Op<ReadonlyArray<WebhookDelivery>>;
  /**
   * Records an attempt if, and only if, the delivery is still pending with `attemptsBefore`
   * attempts: of two runs of one attempt (at least once delivery of jobs) one records it.
   */
  recordAttempt(
    tenantId: TenantId,
    id: string,
    attemptsBefore: number,
    attempt: DeliveryAttempt,
  ): Op<boolean>;
}

/**
 * One chunk of a long source in the ledger of its asset: which unit of renditions (their names
 * joined by commas, `unitKey`), which part of the source, and when its encoding was recorded done.
 */
export interface AssetChunk {
  readonly tenant_id: TenantId;
  readonly asset_id: AssetId;
  readonly unit: string;
  readonly chunk_index: number;
  readonly chunk_count: number;
  readonly start_ms: number;
  /** Null: to the end of the source. */
  readonly end_ms: number | null;
  readonly done_at: number | null;
}

/** The chunk ledger: what a chunked asset's encode-chunk jobs have done. */
export interface ChunkRepository {
  /** Records the asset's chunks, all of one asset, unless it has a ledger already: false then. */
  insertAll(chunks: ReadonlyArray<AssetChunk>): Op<boolean>;
  /** The asset's chunks by unit, then index. */
  list(tenantId: TenantId, assetId: AssetId): Op<ReadonlyArray<AssetChunk>>;
  /**
   * Marks one chunk done if it is not yet: `marked` whether this call did, `left` how many of
   * its unit are still not done after it. Inside a transaction, calls on one unit take turns
   * until it ends, so of the calls that mark a unit's last chunks exactly one sees `left` 0.
   */
  markDone(
    tenantId: TenantId,
    assetId: AssetId,
    unit: string,
    index: number,
    at: number,
  ): Op<{ readonly marked: boolean; readonly left: number }>;
}

/** The text tracks of assets. A removed track is no longer seen by `get`, `list` or `count`. */
export interface TextTrackRepository {
  insert(track: TextTrack): Op<void>;
  get(tenantId: string, assetId: string, id: string): Op<Option.Option<TextTrack>>;
  /** The asset's tracks, oldest first (by created_at, then id). */
  list(tenantId: string, assetId: string): Op<ReadonlyArray<TextTrack>>;
  count(tenantId: string, assetId: string): Op<number>;
  /** False when it was not there (removed already, or another tenant's or asset's). */
  remove(tenantId: string, assetId: string, id: string, at: number): Op<boolean>;
}

export interface Repositories {
  readonly tenants: TenantRepository;
  readonly users: UserRepository;
  readonly identities: IdentityRepository;
  readonly refreshSessions: RefreshSessionRepository;
  readonly emailTokens: EmailTokenRepository;
  readonly apiKeys: ApiKeyRepository;
  readonly assets: AssetRepository;
  readonly uploads: UploadRepository;
  readonly playbackSessions: PlaybackSessionRepository;
  readonly contentKeys: ContentKeyRepository;
  readonly idempotencyKeys: IdempotencyKeyRepository;
  readonly webhooks: WebhookRepository;
  readonly webhookDeliveries: WebhookDeliveryRepository;
  readonly chunks: ChunkRepository;
  readonly textTracks: TextTrackRepository;
  /** Enqueues jobs in the unit of work: they exist if and only if it commits. */
  readonly jobs: JobRepository;
}

import type {
  ApiKey,
  Asset,
  ContentKey,
  EmailToken,
  Identity,
  PlaybackSession,
  RefreshSession,
  RefreshToken,
  Tenant,
  TenantStatus,
  TextTrack,
  UploadSession,
  UserRecord,
  Webhook,
} from "@vod/core";

/**
 * Reads (and, for fixtures the API cannot make, writes) what a storage adapter really stored,
 * beside the adapter: maps for memory, SQL for Postgres. Suites check rows through it, not
 * through the adapter under test.
 */
export interface StorageBackdoor {
  tenant(id: string): Promise<Tenant | undefined>;
  user(id: string): Promise<UserRecord | undefined>;
  identity(provider: Identity["provider"], subject: string): Promise<Identity | undefined>;
  refreshSession(id: string): Promise<RefreshSession | undefined>;
  refreshTokensOfSession(sessionId: string): Promise<ReadonlyArray<RefreshToken>>;
  /** The user's tokens of account mail as stored (hashes only), oldest first. */
  emailTokensOfUser(userId: string): Promise<ReadonlyArray<EmailToken>>;
  apiKey(id: string): Promise<ApiKey | undefined>;
  asset(id: string): Promise<Asset | undefined>;
  upload(id: string): Promise<UploadSession | undefined>;
  playbackSession(id: string): Promise<PlaybackSession | undefined>;
  /** The asset's content key as stored (wrapped). */
  contentKey(assetId: string): Promise<ContentKey | undefined>;
  /** The text track as stored, a removed one too (deleted_at set). */
  textTrack(id: string): Promise<TextTrack | undefined>;
  /** The webhook as stored, a deleted one too (deleted_at set). */
  webhook(id: string): Promise<Webhook | undefined>;
  /**
   * The tenant's Idempotency-Key records as stored, every column or field (principal, key,
   * fingerprint, status, body), for checks of what they hold.
   */
  idempotencyRecords(tenantId: string): Promise<ReadonlyArray<Record<string, unknown>>>;
  /**
   * How many rows (records) of the tenant each table (map) holds, tables with none left out: the
   * tenant's own row, and every row whose tenant_id is the tenant's, in every table that has the
   * column (Postgres: as information_schema lists them, so a new table is counted too). The job
   * queue's tables are not counted.
   */
  rowsOfTenant(tenantId: string): Promise<Readonly<Record<string, number>>>;
  /** Every job the queue holds, in any state. */
  jobs(): Promise<ReadonlyArray<{ name: string; data: unknown; state: string }>>;
  /** Fixture writes the API has no operation for. */
  insertUser(user: UserRecord): Promise<void>;
  /** Many keys at once (a tenant with hundreds of revoked keys), as given. */
  insertApiKeys(keys: ReadonlyArray<ApiKey>): Promise<void>;
  setTenantStatus(id: string, status: TenantStatus): Promise<void>;
}

import type {
  ApiKey,
  Asset,
  AssetChunk,
  ContentKey,
  EmailToken,
  IdempotentResponse,
  Identity,
  JobName,
  JobTypes,
  PlaybackSession,
  RefreshSession,
  RefreshToken,
  Tenant,
  TextTrack,
  UploadSession,
  UserRecord,
  Webhook,
  WebhookDelivery,
} from "@vod/core";

/** A job as the memory queue keeps it. */
export interface MemoryJob {
  readonly id: string;
  readonly name: JobName;
  readonly data: JobTypes[JobName];
  readonly state: "queued" | "active" | "completed" | "failed";
  /** Runs started so far. */
  readonly attempts: number;
  /** Not handed out before this time (backoff). */
  readonly runAfter: number;
  /** Due jobs of a higher one are handed out first. */
  readonly priority: number;
  /** An active job whose lease ran out is handed out again (its worker is presumed dead). */
  readonly leaseUntil: number;
  readonly lastError: string | null;
}

/** An Idempotency-Key record as the memory adapter keeps it. */
export interface MemoryIdempotencyRecord {
  readonly tenantId: string;
  /** Whose record it is: an API key or a user (`idempotencyPrincipal`). */
  readonly principal: string;
  readonly key: string;
  readonly fingerprint: string;
  /** Null while the first request runs. */
  readonly response: IdempotentResponse | null;
  readonly lockedUntil: number;
  readonly expiresAt: number;
}

/** Everything the memory adapter stores. Records are replaced, never mutated in place. */
export interface MemoryState {
  readonly tenants: Map<string, Tenant>;
  readonly users: Map<string, UserRecord>;
  /** Lowercased email -> user id: the unique index. */
  readonly usersByEmail: Map<string, string>;
  /** `${provider}:${subject}` -> identity. */
  readonly identities: Map<string, Identity>;
  readonly refreshSessions: Map<string, RefreshSession>;
  readonly refreshTokens: Map<string, RefreshToken>;
  /** token_hash -> the token of account mail. */
  readonly emailTokens: Map<string, EmailToken>;
  readonly apiKeys: Map<string, ApiKey>;
  readonly apiKeysByHash: Map<string, string>;
  readonly assets: Map<string, Asset>;
  readonly uploads: Map<string, UploadSession>;
  readonly jobs: Map<string, MemoryJob>;
  readonly playbackSessions: Map<string, PlaybackSession>;
  /** `${tenant_id}/${asset_id}` -> key. */
  readonly contentKeys: Map<string, ContentKey>;
  /** JSON `[tenant_id, principal, key]` -> record. */
  readonly idempotencyKeys: Map<string, MemoryIdempotencyRecord>;
  readonly webhooks: Map<string, Webhook>;
  readonly webhookDeliveries: Map<string, WebhookDelivery>;
  /** JSON `[tenant_id, asset_id, unit, chunk_index]` -> the chunk ledger's row. */
  readonly chunks: Map<string, AssetChunk>;
  /** SHA-256 of every deleted tenant's slug: never given to a new tenant. */
  readonly retiredSlugs: Set<string>;
  readonly textTracks: Map<string, TextTrack>;
}

export const emptyState = (): MemoryState => ({
  tenants: new Map(),
  users: new Map(),
  usersByEmail: new Map(),
  identities: new Map(),
  refreshSessions: new Map(),
  refreshTokens: new Map(),
  emailTokens: new Map(),
  apiKeys: new Map(),
  apiKeysByHash: new Map(),
  assets: new Map(),
  uploads: new Map(),
  jobs: new Map(),
  playbackSessions: new Map(),
  contentKeys: new Map(),
  idempotencyKeys: new Map(),
  webhooks: new Map(),
  webhookDeliveries: new Map(),
  chunks: new Map(),
  retiredSlugs: new Set(),
  textTracks: new Map(),
});

/** Shallow copies of every map and set: enough to roll back, because records are never mutated. */
export const snapshot = (state: MemoryState): MemoryState =>
  Object.fromEntries(
    Object.entries(state).map(([k, v]) => [
      k,
      v instanceof Set ? new Set(v) : new Map(v as Map<unknown, unknown>),
    ]),
  ) as unknown as MemoryState;

export const restore = (state: MemoryState, from: MemoryState): void => {
  for (const key of Object.keys(state) as Array<keyof MemoryState>) {
    const target = state[key];
    if (target instanceof Set) {
      target.clear();
      for (const v of from[key] as Set<string>) target.add(v);
      continue;
    }
    const map = target as Map<unknown, unknown>;
    map.clear();
    for (const [k, v] of from[key] as Map<unknown, unknown>) map.set(k, v);
  }
};

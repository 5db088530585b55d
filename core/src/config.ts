/** Settings of the core; every value has a default a host may override. */
export interface VodConfig {
  /** Lifetime of an access token (DECISIONS: 900 s). */
  readonly accessTokenTtlSeconds: number;
  /** Lifetime of a refresh token from its issue (DECISIONS: 30 days). */
  readonly refreshTokenTtlMs: number;
  /**
   * Key of the HMAC that makes list cursors tamper-evident. Give every node of a cluster the same
   * one, and keep it across restarts, or cursors in flight stop working.
   */
  readonly cursorSecret: Uint8Array;
  /**
   * Public URL of the web app whose pages take the links of account mail:
   * `{appUrl}/verify-email#token=…` and `{appUrl}/reset-password#token=…`. The token is in the
   * fragment, which browsers send to no server (no access log, no Referer); the page POSTs it.
   */
  readonly appUrl: string;
  /** 32 bytes that wrap content keys at rest (AES-256-GCM). Lose it and DRM assets cannot play. */
  readonly drmMasterKey: Uint8Array;
  /** Licence servers of third-party key systems, listed in entitlements when configured. */
  readonly keySystems: {
    readonly widevine?: string | undefined;
    readonly playready?: string | undefined;
    readonly fairplay?: { readonly licenseUrl: string; readonly certificateUrl: string } | undefined;
  };
  /**
   * Key of the HMAC that signs part upload URLs. The same on every node that serves the media
   * app, and kept across restarts, or URLs handed out stop working.
   */
  readonly uploadUrlSecret: Uint8Array;
  readonly processing: {
    /** Sources longer than this fail with source_too_long. */
    readonly maxSourceDurationMs: number;
    /** Runs a processing job gets before the asset fails with processing_error. */
    readonly maxAttempts: number;
    /**
     * The longest one processing run may take: it is then stopped (its tools killed) and retried,
     * and on the last attempt the asset fails with processing_error.
     */
    readonly maxRunMs: number;
    /**
     * Length of the chunks a long source is cut into, each encoded by a job any worker may take;
     * a multiple of the 6 s segment, so that every chunk starts a segment.
     */
    readonly chunkSeconds: number;
    /** Sources of at least this many chunks are chunked; shorter ones are made in one job. */
    readonly minChunks: number;
  };
  /** Images made on request (thumbnails, animated previews, storyboards), per node. */
  readonly images: {
    /** How many this node makes at once. */
    readonly concurrency: number;
    /** How many more wait for a turn; past that a request is refused as rate limited, to retry shortly. */
    readonly maxWaiting: number;
  };
  readonly webhooks: {
    /** Wait before the second attempt of a delivery; doubled for each further one. */
    readonly retryBaseMs: number;
    /** How long after an event its delivery is retried before it fails for good. */
    readonly retryForMs: number;
  };
  /**
   * What one tenant may hold at once (DECISIONS "Account security"): past it a create is 409
   * conflict, `details.reason: "quota_exceeded"`. Bounded, so that no list hides a credential.
   */
  readonly quotas: {
    /** API keys neither revoked nor expired. */
    readonly activeApiKeysPerTenant: number;
    /** Webhooks not deleted. */
    readonly webhooksPerTenant: number;
  };
  /**
   * How long raw telemetry events are kept (by the time they were received); the views folded
   * from them stay. Null: kept for ever.
   */
  readonly telemetryRetentionMs: number | null;
  readonly rateLimits: {
    /** One bucket per client IP shared by signup, login, google and refresh. */
    readonly authPerIpPerMinute: number;
    /** Failed logins of one email from one client IP per 15 minutes. */
    readonly loginFailuresPerEmailAndIpPer15Minutes: number;
    /** Failed logins of one email from all IPs per 15 minutes. */
    readonly loginFailuresPerEmailPer15Minutes: number;
    readonly apiPerCredentialPerMinute: number;
    /** Telemetry batches per playback session per minute. */
    readonly telemetryPerSessionPerMinute: number;
    /** Verification mails per user, and reset requests per email, per hour. */
    readonly accountMailPerHour: number;
  };
}

export const defaultRateLimits: VodConfig["rateLimits"] = {
  authPerIpPerMinute: 20,
  loginFailuresPerEmailAndIpPer15Minutes: 10,
  loginFailuresPerEmailPer15Minutes: 100,
  apiPerCredentialPerMinute: 1200,
  telemetryPerSessionPerMinute: 120,
  accountMailPerHour: 5,
};

export const defaultConfig = (secrets: {
  cursorSecret: Uint8Array;
  uploadUrlSecret: Uint8Array;
  drmMasterKey: Uint8Array;
}): VodConfig => ({
  accessTokenTtlSeconds: 900,
  refreshTokenTtlMs: 30 * 24 * 60 * 60 * 1000,
  cursorSecret: secrets.cursorSecret,
  uploadUrlSecret: secrets.uploadUrlSecret,
  appUrl: "http://localhost:8080",
  drmMasterKey: secrets.drmMasterKey,
  keySystems: {},
  processing: {
    maxSourceDurationMs: 6 * 60 * 60 * 1000,
    maxAttempts: 3,
    maxRunMs: 12 * 60 * 60 * 1000,
    chunkSeconds: 30,
    minChunks: 3,
  },
  images: { concurrency: 2, maxWaiting: 32 },
  webhooks: { retryBaseMs: 30_000, retryForMs: 24 * 60 * 60 * 1000 },
  quotas: { activeApiKeysPerTenant: 200, webhooksPerTenant: 20 },
  telemetryRetentionMs: 30 * 24 * 60 * 60 * 1000,
  rateLimits: defaultRateLimits,
});

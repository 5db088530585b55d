import { SEGMENT_SECONDS, type VodConfig, type VodSettings } from "@vod/core";
import type { TrustProxy } from "@vod/http";
import { Either, ParseResult, Schema } from "effect";
import proxyaddr from "proxy-addr";
import { DEFAULT_HEAP_GROWING_PERCENT } from "./heap.js";

const Port = Schema.NumberFromString.pipe(Schema.int(), Schema.between(0, 65535)).annotations({
  message: () => ({ message: "must be a port number from 0 to 65535", override: true }),
});
const PositiveInt = Schema.NumberFromString.pipe(Schema.int(), Schema.positive());
const Url = Schema.String.pipe(
  Schema.filter((s) => URL.canParse(s) && /^https?:$/.test(new URL(s).protocol), {
    message: () => "must be an http(s) URL",
  }),
);
const Flag = Schema.transform(Schema.Literal("true", "false", "1", "0"), Schema.Boolean, {
  strict: true,
  decode: (s) => s === "true" || s === "1",
  encode: (b) => (b ? "true" : "false"),
});
/**
 * `*`, or origins separated by commas, each as a browser sends it in `Origin`
 * (`https://app.example.com`, a port when not the default, no path or trailing slash).
 */
const CorsOrigins = Schema.transform(
  Schema.String.pipe(
    Schema.filter(
      (s) =>
        s.trim() === "*" ||
        s.split(",").every((o) => URL.canParse(o.trim()) && new URL(o.trim()).origin === o.trim()),
      { message: () => "must be * or comma-separated origins like https://app.example.com" },
    ),
  ),
  Schema.Array(Schema.String),
  {
    strict: true,
    decode: (s) => s.split(",").map((o) => o.trim()),
    encode: (origins) => origins.join(","),
  },
);
const opt = <A>(schema: Schema.Schema<A, string>) => Schema.optional(schema);

/**
 * Which proxies in front of the host are trusted to append the address they were called from to
 * X-Forwarded-For: the number of hops next to the host, or the addresses they call from.
 */
export type { TrustProxy };

const TRUST_PROXY_FORMS =
  "must be the number of trusted proxy hops (1 on Cloud Run or behind one load balancer) or a comma-separated list of trusted CIDRs (10.0.0.0/8,2001:db8::/32)";
const compiles = (list: ReadonlyArray<string>) => {
  try {
    proxyaddr.compile([...list]);
    return true;
  } catch {
    return false;
  }
};
const cidrsOf = (s: string) => s.split(",").map((entry) => entry.trim());
/**
 * `true` (which trusted every address X-Forwarded-For names, the client's own included) is
 * refused rather than read as some number: a deployment that set it must choose what it trusts.
 */
const TrustProxyVar = Schema.transform(
  Schema.String.pipe(
    Schema.filter(
      (s) => s !== "true" && (s === "false" || /^\d{1,2}$/.test(s.trim()) || compiles(cidrsOf(s))),
      {
        message: (issue) =>
          issue.actual === "true"
            ? `true is no longer accepted (it let clients choose their address): ${TRUST_PROXY_FORMS}`
            : TRUST_PROXY_FORMS,
      },
    ),
  ),
  Schema.Union(Schema.Struct({ hops: Schema.Number }), Schema.Struct({ cidrs: Schema.Array(Schema.String) })),
  {
    strict: true,
    decode: (s): TrustProxy =>
      s === "false"
        ? { hops: 0 }
        : /^\d+$/.test(s.trim())
          ? { hops: Number(s.trim()) }
          : { cidrs: cidrsOf(s) },
    encode: (trust) => ("hops" in trust ? String(trust.hops) : trust.cidrs.join(",")),
  },
);

/**
 * A postgres:// URL, including the Unix-socket form Cloud SQL documents,
 * `postgres://USER:PASSWORD@/DB?host=/cloudsql/...`: the WHATWG parser refuses a user with an
 * empty host, but pg reads the socket directory from `host=`, so that form is checked with a
 * stand-in host name.
 */
const isPostgresUrl = (s: string) => {
  const url = URL.canParse(s)
    ? s
    : /^postgres(ql)?:\/\/[^/@]*@\/[^?]*\?(.*&)?host=\//.test(s)
      ? s.replace("@/", "@socket/")
      : "";
  return URL.canParse(url) && /^postgres(ql)?:$/.test(new URL(url).protocol);
};

/** The environment the host reads; every variable is documented in the root README. */
const Env = Schema.Struct({
  PORT: Schema.optionalWith(Port, { default: () => 8080 }),
  VOD_OPS_PORT: opt(Port),
  VOD_HOST: Schema.optionalWith(Schema.String, { default: () => "0.0.0.0" }),
  VOD_DATA_DIR: Schema.optionalWith(Schema.String.pipe(Schema.minLength(1)), { default: () => "./data" }),
  VOD_BASE_URL: opt(Url),
  VOD_MEDIA_URL: opt(Url),
  VOD_DRM_URL: opt(Url),
  VOD_APP_URL: opt(Url),
  VOD_SMTP_URL: opt(
    Schema.String.pipe(
      Schema.filter(
        (s) => URL.canParse(s) && /^smtps?:$/.test(new URL(s).protocol) && new URL(s).hostname !== "",
        {
          message: () => "must be an smtp:// or smtps:// URL (user and password URL-encoded)",
        },
      ),
    ),
  ),
  VOD_MAIL_FROM: opt(
    Schema.String.pipe(
      Schema.pattern(/^(?:[^<>\r\n]*<[^\s@<>]+@[^\s@<>]+>|[^\s@<>]+@[^\s@<>]+)$/, {
        message: () => "must be an address, or a name and <address>",
      }),
    ),
  ),
  VOD_GOOGLE_CLIENT_ID: opt(Schema.String.pipe(Schema.minLength(1))),
  VOD_GOOGLE_CERTS_URL: opt(Url),
  VOD_RATE_LIMIT_AUTH_PER_MINUTE: Schema.optionalWith(PositiveInt, { default: () => 20 }),
  VOD_RATE_LIMIT_LOGIN_PER_EMAIL: Schema.optionalWith(PositiveInt, { default: () => 100 }),
  VOD_RATE_LIMIT_LOGIN_PER_EMAIL_AND_IP: Schema.optionalWith(PositiveInt, { default: () => 10 }),
  VOD_RATE_LIMIT_API_PER_MINUTE: Schema.optionalWith(PositiveInt, { default: () => 1200 }),
  VOD_RATE_LIMIT_ACCOUNT_MAIL_PER_HOUR: Schema.optionalWith(PositiveInt, { default: () => 5 }),
  VOD_STORAGE: Schema.optionalWith(Schema.Literal("postgres", "memory"), {
    default: () => "postgres" as const,
  }),
  VOD_DATABASE_URL: opt(
    Schema.String.pipe(
      Schema.filter(isPostgresUrl, {
        message: () => "must be a postgres:// URL",
      }),
    ),
  ),
  VOD_DATABASE_POOL_SIZE: Schema.optionalWith(PositiveInt, { default: () => 10 }),
  VOD_REDIS_URL: opt(
    Schema.String.pipe(
      Schema.filter((s) => URL.canParse(s) && /^rediss?:$/.test(new URL(s).protocol), {
        message: () => "must be a redis:// or rediss:// URL",
      }),
    ),
  ),
  VOD_HEAP_GROWING_PERCENT: Schema.optionalWith(
    Schema.NumberFromString.pipe(
      Schema.filter((n) => Number.isInteger(n) && n >= 0 && n <= 1000, {
        message: () => "must be an integer from 0 to 1000",
      }),
    ),
    { default: () => DEFAULT_HEAP_GROWING_PERCENT },
  ),
  VOD_REDIS_KEY_PREFIX: Schema.optionalWith(Schema.String.pipe(Schema.minLength(1)), {
    default: () => "vod:",
  }),
  VOD_DATABASE_SCHEMA: opt(
    Schema.String.pipe(
      Schema.pattern(/^[a-z_][a-z0-9_]{0,62}$/, { message: () => "must be lowercase letters, digits and _" }),
    ),
  ),
  VOD_OBJECT_STORE: Schema.optionalWith(Schema.Literal("filesystem", "memory", "gcs"), {
    default: () => "filesystem" as const,
  }),
  VOD_OBJECTS_DIR: opt(Schema.String.pipe(Schema.minLength(1))),
  VOD_GCS_BUCKET: opt(
    Schema.String.pipe(
      Schema.pattern(/^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$/, { message: () => "must be a bucket name" }),
    ),
  ),
  VOD_GCS_PREFIX: opt(
    Schema.String.pipe(
      Schema.pattern(/^[^/].*\/$/, { message: () => "must end with / and not start with /" }),
    ),
  ),
  VOD_GCS_API_ENDPOINT: opt(Url),
  VOD_GCS_DELIVERY: Schema.optionalWith(Schema.Literal("proxy", "redirect"), {
    default: () => "proxy" as const,
  }),
  VOD_GCS_HMAC_ACCESS_ID: opt(Schema.String.pipe(Schema.minLength(1))),
  VOD_GCS_HMAC_SECRET: opt(Schema.String.pipe(Schema.minLength(1))),
  VOD_UPLOAD_URL_SECRET: opt(
    Schema.String.pipe(Schema.minLength(32, { message: () => "must be at least 32 characters" })),
  ),
  VOD_WORKER_CONCURRENCY: Schema.optionalWith(
    Schema.NumberFromString.pipe(Schema.int(), Schema.between(0, 64)),
    {
      default: () => 1,
    },
  ),
  VOD_JOB_MAX_ATTEMPTS: Schema.optionalWith(PositiveInt, { default: () => 3 }),
  VOD_JOB_RETRY_DELAY_SECONDS: Schema.optionalWith(PositiveInt, { default: () => 10 }),
  VOD_JOB_LEASE_SECONDS: Schema.optionalWith(PositiveInt, { default: () => 60 }),
  VOD_JOB_MAX_RUN_SECONDS: Schema.optionalWith(PositiveInt, { default: () => 12 * 3600 }),
  VOD_JOB_MAINTENANCE_SECONDS: Schema.optionalWith(PositiveInt, { default: () => 60 }),
  VOD_SHUTDOWN_GRACE_SECONDS: Schema.optionalWith(
    Schema.NumberFromString.pipe(Schema.int(), Schema.between(0, 3600)),
    { default: () => 8 },
  ),
  VOD_WEBHOOKS_ALLOW_PRIVATE: Schema.optionalWith(Flag, { default: () => false }),
  // Fractions allowed: tests retry within moments.
  VOD_WEBHOOK_RETRY_BASE_SECONDS: Schema.optionalWith(
    Schema.NumberFromString.pipe(
      Schema.filter((n) => Number.isFinite(n) && n > 0 && n <= 86_400, {
        message: () => "must be a number of seconds above 0, at most 86400",
      }),
    ),
    { default: () => 30 },
  ),
  VOD_MAX_SOURCE_DURATION_SECONDS: Schema.optionalWith(PositiveInt, { default: () => 6 * 3600 }),
  // A multiple of the 6 s segment: every chunk then starts a segment of the packaged rendition.
  VOD_PROCESSING_CHUNK_SECONDS: Schema.optionalWith(
    PositiveInt.pipe(
      Schema.filter((n) => n % SEGMENT_SECONDS === 0, {
        message: () => `must be a multiple of ${SEGMENT_SECONDS} (the segment length)`,
      }),
    ),
    { default: () => 30 },
  ),
  VOD_PROCESSING_MIN_CHUNKS: Schema.optionalWith(PositiveInt, { default: () => 3 }),
  VOD_FFMPEG_PATH: opt(Schema.String.pipe(Schema.minLength(1))),
  VOD_FFPROBE_PATH: opt(Schema.String.pipe(Schema.minLength(1))),
  VOD_IMAGE_CONCURRENCY: Schema.optionalWith(PositiveInt, { default: () => 2 }),
  VOD_IMAGE_MAX_WAITING: Schema.optionalWith(
    Schema.NumberFromString.pipe(Schema.int(), Schema.nonNegative()),
    { default: () => 32 },
  ),
  VOD_DRM_MASTER_KEY: opt(
    Schema.String.pipe(
      Schema.pattern(/^(?:[0-9a-f]{64}|[A-Za-z0-9_-]{43})$/, {
        message: () => "must be 32 bytes as 64 hex characters or 43 base64url characters",
      }),
    ),
  ),
  VOD_DRM_WIDEVINE_LICENSE_URL: opt(Url),
  VOD_DRM_PLAYREADY_LICENSE_URL: opt(Url),
  VOD_DRM_FAIRPLAY_LICENSE_URL: opt(Url),
  VOD_DRM_FAIRPLAY_CERTIFICATE_URL: opt(Url),
  VOD_RATE_LIMIT_TELEMETRY_PER_MINUTE: Schema.optionalWith(PositiveInt, { default: () => 120 }),
  // 0 keeps raw events for ever; analytics read the views folded from them, which always stay.
  VOD_TELEMETRY_RETENTION_DAYS: Schema.optionalWith(
    Schema.NumberFromString.pipe(Schema.int(), Schema.between(0, 36_500)),
    { default: () => 30 },
  ),
  VOD_SIGNING_KEYS: opt(Schema.String.pipe(Schema.minLength(1))),
  VOD_CURSOR_SECRET: opt(
    Schema.String.pipe(Schema.minLength(32, { message: () => "must be at least 32 characters" })),
  ),
  VOD_TRUST_PROXY: Schema.optionalWith(TrustProxyVar, { default: (): TrustProxy => ({ hops: 0 }) }),
  VOD_CORS_ORIGINS: Schema.optionalWith(CorsOrigins, { default: () => [] }),
  VOD_METRICS_TOKEN: opt(
    Schema.String.pipe(Schema.minLength(16, { message: () => "must be at least 16 characters" })),
  ),
  VOD_LOG_LEVEL: Schema.optionalWith(
    Schema.Literal("fatal", "error", "warn", "info", "debug", "trace", "silent"),
    {
      default: () => "info" as const,
    },
  ),
  VOD_LOG_FORMAT: Schema.optional(Schema.Literal("json", "pretty")),
});

export interface HostConfig {
  readonly port: number;
  /** Where `vod worker` serves /healthz, /readyz and /metrics; none when absent. */
  readonly opsPort?: number | undefined;
  readonly host: string;
  readonly dataDir: string;
  readonly baseUrl: string;
  readonly mediaUrl: string;
  readonly drmUrl: string;
  /**
   * The core's settings, in the core's own shape and units (`VodSettings`): the web app of account
   * mail's links (`appUrl`, default the base URL), rate limits, third-party key systems,
   * processing, images and webhook retries. Composition adds the secrets and hands it over whole.
   */
  readonly core: VodSettings & {
    readonly appUrl: string;
    readonly rateLimits: VodConfig["rateLimits"];
    readonly processing: VodConfig["processing"];
    readonly images: VodConfig["images"];
    readonly webhooks: Pick<VodConfig["webhooks"], "retryBaseMs">;
    readonly telemetryRetentionMs: VodConfig["telemetryRetentionMs"];
  };
  /**
   * Account mail: over SMTP when `smtpUrl` is set; else the embedded default writes it to the log
   * at info (the link included), and a server deployment (`database.url`) sends none.
   */
  readonly mail: { readonly smtpUrl?: string | undefined; readonly from: string };
  readonly google: { readonly clientId?: string | undefined; readonly certsUrl?: string | undefined };
  readonly drm: {
    /** 32 bytes that wrap content keys at rest; when absent it lives in dataDir. */
    readonly masterKey?: string | undefined;
  };
  /**
   * Where state lives: "postgres" is the server at `database.url`, or PGlite under dataDir when
   * no URL is given; "memory" keeps nothing across restarts.
   */
  readonly storage: "postgres" | "memory";
  readonly database: {
    readonly url?: string | undefined;
    readonly poolSize: number;
    readonly schema?: string | undefined;
  };
  /**
   * Rate limits and revoked playback sessions shared by every node, when set; else each process
   * keeps its own (in memory) and revocations live in the database.
   */
  readonly redis: {
    readonly url?: string | undefined;
    readonly keyPrefix: string;
  };
  readonly objects: {
    readonly store: "filesystem" | "memory" | "gcs";
    /** Root of the filesystem store (default `<dataDir>/objects`). */
    readonly dir?: string | undefined;
    /**
     * The bucket of the gcs store (credentials: Application Default Credentials); `apiEndpoint`
     * points it at a test server; segments are proxied by the media app or redirected to it.
     */
    readonly gcs: {
      readonly bucket?: string | undefined;
      readonly prefix?: string | undefined;
      readonly apiEndpoint?: string | undefined;
      readonly delivery: "proxy" | "redirect";
      /** The service account's HMAC key: part and delivery URLs are signed with it. */
      readonly hmacKey?: { readonly accessId: string; readonly secret: string } | undefined;
    };
    /** Key of part upload URL signatures; when absent it lives in dataDir. */
    readonly uploadUrlSecret?: string | undefined;
  };
  readonly jobs: {
    /** Processing jobs this process runs at once; 0 runs none (an API-only node). */
    readonly workerConcurrency: number;
    readonly retryDelaySeconds: number;
    /** How long a job stays its worker's without a heartbeat (a dead worker's job runs again). */
    readonly leaseSeconds: number;
    readonly maintenanceSeconds: number;
  };
  readonly webhooks: {
    /** Allow http and private or loopback addresses as webhook URLs (tests, private networks). */
    readonly allowPrivate: boolean;
  };
  readonly media: {
    readonly ffmpegPath?: string | undefined;
    readonly ffprobePath?: string | undefined;
  };
  /** JSON signing keys from the environment; when absent they live in dataDir. */
  readonly signingKeys?: string | undefined;
  readonly cursorSecret?: string | undefined;
  /**
   * The proxies whose X-Forwarded-For entries are believed: the client's address is the first
   * from the right that is not one of theirs. `{ hops: 0 }` (the default): the socket's peer.
   */
  readonly trustProxy: TrustProxy;
  /** Origins the API answers CORS for (`["*"]`: any); none by default. */
  readonly corsOrigins: ReadonlyArray<string>;
  /** When set, `/metrics` needs `Authorization: Bearer <token>`. */
  readonly metricsToken?: string | undefined;
  /**
   * V8's heap growing factor as a percent over 1, which the `vod` CLI sets for its process
   * (`tuneHeapForStreaming`); 0 leaves V8's own. `startHost` alone never sets it.
   */
  readonly heapGrowingPercent: number;
  /**
   * On SIGTERM, how long in-flight requests and running jobs get to finish; jobs still running
   * then are released to another worker, requests cut off.
   */
  readonly shutdownGraceSeconds: number;
  /** The public URLs that were not set and so follow PORT (and the port actually bound, for 0). */
  readonly defaultedUrls: ReadonlyArray<"baseUrl" | "mediaUrl" | "drmUrl" | "appUrl">;
  readonly logLevel: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
  /** Unset: pretty on a terminal, JSON lines otherwise (`createLogger`). */
  readonly logFormat?: "json" | "pretty" | undefined;
}

export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

const trimSlash = (url: string) => url.replace(/\/+$/, "");

/** Decodes the environment; a bad value fails with a message naming each bad variable. */
export const loadConfig = (env: Record<string, string | undefined> = process.env): HostConfig => {
  // Empty variables count as unset, as shells and compose files often leave them.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const decoded = Schema.decodeUnknownEither(Env, { errors: "all" })(present);
  if (Either.isLeft(decoded)) {
    // One message per variable, the schema's own: an optional variable fails a second time as
    // "Expected undefined, actual <value>", and a value may hold a password (database, Redis, SMTP).
    const seen = new Set<string>();
    const problems = ParseResult.ArrayFormatter.formatErrorSync(decoded.left).flatMap((issue) => {
      const name = String(issue.path[0] ?? "environment");
      if (seen.has(name)) return [];
      seen.add(name);
      return [`${name}: ${issue.message}`];
    });
    throw new ConfigError(`invalid configuration: ${problems.join("; ")}`);
  }
  const e = decoded.right;
  if (!e.VOD_DRM_FAIRPLAY_LICENSE_URL !== !e.VOD_DRM_FAIRPLAY_CERTIFICATE_URL)
    throw new ConfigError(
      "invalid configuration: VOD_DRM_FAIRPLAY_LICENSE_URL, VOD_DRM_FAIRPLAY_CERTIFICATE_URL: set both or neither",
    );
  if (!e.VOD_GCS_HMAC_ACCESS_ID !== !e.VOD_GCS_HMAC_SECRET)
    throw new ConfigError(
      "invalid configuration: VOD_GCS_HMAC_ACCESS_ID, VOD_GCS_HMAC_SECRET: set both or neither",
    );
  if (e.VOD_OBJECT_STORE === "gcs" && !e.VOD_GCS_BUCKET)
    throw new ConfigError("invalid configuration: VOD_GCS_BUCKET: required with VOD_OBJECT_STORE=gcs");
  if (e.VOD_SMTP_URL && !e.VOD_MAIL_FROM)
    throw new ConfigError("invalid configuration: VOD_MAIL_FROM: required with VOD_SMTP_URL");
  const local = `http://localhost:${e.PORT}`;
  return {
    port: e.PORT,
    opsPort: e.VOD_OPS_PORT,
    host: e.VOD_HOST,
    dataDir: e.VOD_DATA_DIR,
    baseUrl: trimSlash(e.VOD_BASE_URL ?? local),
    mediaUrl: trimSlash(e.VOD_MEDIA_URL ?? local),
    drmUrl: trimSlash(e.VOD_DRM_URL ?? local),
    mail: { smtpUrl: e.VOD_SMTP_URL, from: e.VOD_MAIL_FROM ?? "no-reply@localhost" },
    google: { clientId: e.VOD_GOOGLE_CLIENT_ID, certsUrl: e.VOD_GOOGLE_CERTS_URL },
    core: {
      appUrl: trimSlash(e.VOD_APP_URL ?? e.VOD_BASE_URL ?? local),
      rateLimits: {
        authPerIpPerMinute: e.VOD_RATE_LIMIT_AUTH_PER_MINUTE,
        loginFailuresPerEmailAndIpPer15Minutes: e.VOD_RATE_LIMIT_LOGIN_PER_EMAIL_AND_IP,
        loginFailuresPerEmailPer15Minutes: e.VOD_RATE_LIMIT_LOGIN_PER_EMAIL,
        apiPerCredentialPerMinute: e.VOD_RATE_LIMIT_API_PER_MINUTE,
        telemetryPerSessionPerMinute: e.VOD_RATE_LIMIT_TELEMETRY_PER_MINUTE,
        accountMailPerHour: e.VOD_RATE_LIMIT_ACCOUNT_MAIL_PER_HOUR,
      },
      keySystems: {
        widevine: e.VOD_DRM_WIDEVINE_LICENSE_URL,
        playready: e.VOD_DRM_PLAYREADY_LICENSE_URL,
        fairplay:
          e.VOD_DRM_FAIRPLAY_LICENSE_URL && e.VOD_DRM_FAIRPLAY_CERTIFICATE_URL
            ? {
                licenseUrl: e.VOD_DRM_FAIRPLAY_LICENSE_URL,
                certificateUrl: e.VOD_DRM_FAIRPLAY_CERTIFICATE_URL,
              }
            : undefined,
      },
      processing: {
        maxSourceDurationMs: e.VOD_MAX_SOURCE_DURATION_SECONDS * 1000,
        maxAttempts: e.VOD_JOB_MAX_ATTEMPTS,
        maxRunMs: e.VOD_JOB_MAX_RUN_SECONDS * 1000,
        chunkSeconds: e.VOD_PROCESSING_CHUNK_SECONDS,
        minChunks: e.VOD_PROCESSING_MIN_CHUNKS,
      },
      images: { concurrency: e.VOD_IMAGE_CONCURRENCY, maxWaiting: e.VOD_IMAGE_MAX_WAITING },
      webhooks: { retryBaseMs: e.VOD_WEBHOOK_RETRY_BASE_SECONDS * 1000 },
      // Raw telemetry events kept this long (0 days: for ever); the worker's sweep deletes older ones.
      telemetryRetentionMs:
        e.VOD_TELEMETRY_RETENTION_DAYS === 0 ? null : e.VOD_TELEMETRY_RETENTION_DAYS * 86_400_000,
    },
    drm: { masterKey: e.VOD_DRM_MASTER_KEY },
    storage: e.VOD_STORAGE,
    database: { url: e.VOD_DATABASE_URL, poolSize: e.VOD_DATABASE_POOL_SIZE, schema: e.VOD_DATABASE_SCHEMA },
    redis: { url: e.VOD_REDIS_URL, keyPrefix: e.VOD_REDIS_KEY_PREFIX },
    objects: {
      store: e.VOD_OBJECT_STORE,
      dir: e.VOD_OBJECTS_DIR,
      uploadUrlSecret: e.VOD_UPLOAD_URL_SECRET,
      gcs: {
        bucket: e.VOD_GCS_BUCKET,
        prefix: e.VOD_GCS_PREFIX,
        apiEndpoint: e.VOD_GCS_API_ENDPOINT,
        delivery: e.VOD_GCS_DELIVERY,
        hmacKey:
          e.VOD_GCS_HMAC_ACCESS_ID && e.VOD_GCS_HMAC_SECRET
            ? { accessId: e.VOD_GCS_HMAC_ACCESS_ID, secret: e.VOD_GCS_HMAC_SECRET }
            : undefined,
      },
    },
    jobs: {
      workerConcurrency: e.VOD_WORKER_CONCURRENCY,
      retryDelaySeconds: e.VOD_JOB_RETRY_DELAY_SECONDS,
      leaseSeconds: e.VOD_JOB_LEASE_SECONDS,
      maintenanceSeconds: e.VOD_JOB_MAINTENANCE_SECONDS,
    },
    webhooks: {
      allowPrivate: e.VOD_WEBHOOKS_ALLOW_PRIVATE,
    },
    media: { ffmpegPath: e.VOD_FFMPEG_PATH, ffprobePath: e.VOD_FFPROBE_PATH },
    signingKeys: e.VOD_SIGNING_KEYS,
    cursorSecret: e.VOD_CURSOR_SECRET,
    trustProxy: e.VOD_TRUST_PROXY,
    corsOrigins: e.VOD_CORS_ORIGINS,
    metricsToken: e.VOD_METRICS_TOKEN,
    heapGrowingPercent: e.VOD_HEAP_GROWING_PERCENT,
    shutdownGraceSeconds: e.VOD_SHUTDOWN_GRACE_SECONDS,
    defaultedUrls: [
      ...(e.VOD_BASE_URL ? [] : (["baseUrl"] as const)),
      ...(e.VOD_MEDIA_URL ? [] : (["mediaUrl"] as const)),
      ...(e.VOD_DRM_URL ? [] : (["drmUrl"] as const)),
      ...(e.VOD_APP_URL || e.VOD_BASE_URL ? [] : (["appUrl"] as const)),
    ],
    logLevel: e.VOD_LOG_LEVEL,
    logFormat: e.VOD_LOG_FORMAT,
  };
};

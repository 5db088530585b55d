import { ConfigError, loadConfig, tuneHeapForStreaming } from "@vod/host-express";
import { describe, expect, it } from "vitest";

describe("loadConfig", () => {
  it("has the documented defaults", () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 8080,
      host: "0.0.0.0",
      dataDir: "./data",
      baseUrl: "http://localhost:8080",
      mediaUrl: "http://localhost:8080",
      drmUrl: "http://localhost:8080",
      storage: "postgres",
      database: { poolSize: 10 },
      core: {
        rateLimits: {
          authPerIpPerMinute: 20,
          loginFailuresPerEmailAndIpPer15Minutes: 10,
          loginFailuresPerEmailPer15Minutes: 100,
          apiPerCredentialPerMinute: 1200,
        },
      },
      trustProxy: { hops: 0 },
    });
    expect(config.database.url).toBeUndefined();
    expect(config.redis).toEqual({ url: undefined, keyPrefix: "vod:" });
    expect(config.heapGrowingPercent).toBe(200);
    expect(config.google.clientId).toBeUndefined();
    expect(config.core.telemetryRetentionMs).toBe(30 * 86_400_000);
  });

  it("reads the raw telemetry retention in days, 0 for ever, and refuses other values", () => {
    expect(loadConfig({ VOD_TELEMETRY_RETENTION_DAYS: "7" }).core.telemetryRetentionMs).toBe(7 * 86_400_000);
    expect(loadConfig({ VOD_TELEMETRY_RETENTION_DAYS: "0" }).core.telemetryRetentionMs).toBeNull();
    for (const bad of ["-1", "1.5", "a week"])
      expect(() => loadConfig({ VOD_TELEMETRY_RETENTION_DAYS: bad }), bad).toThrow(
        /VOD_TELEMETRY_RETENTION_DAYS/,
      );
  });

  it("reads every variable and treats empty ones as unset", () => {
    const config = loadConfig({
      PORT: "9000",
      VOD_BASE_URL: "https://api.example.com/",
      VOD_MEDIA_URL: "https://media.example.com",
      VOD_DRM_URL: "",
      VOD_DATABASE_URL: "postgresql://u@db:5432/vod",
      VOD_DATABASE_POOL_SIZE: "25",
      VOD_RATE_LIMIT_AUTH_PER_MINUTE: "5",
      VOD_TRUST_PROXY: "2",
      VOD_REDIS_URL: "rediss://default:secret@cache.internal:6378/2",
      VOD_REDIS_KEY_PREFIX: "vod-eu:",
      VOD_HEAP_GROWING_PERCENT: "0",
    });
    expect(config).toMatchObject({
      port: 9000,
      baseUrl: "https://api.example.com",
      mediaUrl: "https://media.example.com",
      drmUrl: "http://localhost:9000",
      database: { url: "postgresql://u@db:5432/vod", poolSize: 25 },
      redis: { url: "rediss://default:secret@cache.internal:6378/2", keyPrefix: "vod-eu:" },
      heapGrowingPercent: 0,
      core: { rateLimits: { authPerIpPerMinute: 5 } },
      trustProxy: { hops: 2 },
    });
  });

  it("names every bad variable in one error", () => {
    const attempt = () =>
      loadConfig({
        PORT: "70000",
        VOD_BASE_URL: "ftp://x",
        VOD_RATE_LIMIT_LOGIN_PER_EMAIL: "-1",
        VOD_STORAGE: "mongo",
        VOD_REDIS_URL: "http://cache:6379",
      });
    expect(attempt).toThrow(ConfigError);
    try {
      attempt();
    } catch (error) {
      const message = (error as Error).message;
      for (const name of ["PORT", "VOD_BASE_URL", "VOD_RATE_LIMIT_LOGIN_PER_EMAIL", "VOD_STORAGE"])
        expect(message).toContain(`${name}:`);
      expect(message).toContain("VOD_REDIS_URL: must be a redis:// or rediss:// URL");
    }
  });
});

describe("VOD_TRUST_PROXY", () => {
  it("takes a number of hops or a comma-separated list of CIDRs and addresses", () => {
    expect(loadConfig({ VOD_TRUST_PROXY: "1" }).trustProxy).toEqual({ hops: 1 });
    expect(loadConfig({ VOD_TRUST_PROXY: "0" }).trustProxy).toEqual({ hops: 0 });
    expect(loadConfig({ VOD_TRUST_PROXY: "false" }).trustProxy).toEqual({ hops: 0 });
    expect(loadConfig({ VOD_TRUST_PROXY: "10.0.0.0/8, 2001:db8::/32,192.0.2.7" }).trustProxy).toEqual({
      cidrs: ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7"],
    });
  });

  it("refuses true, which let the client choose its address, naming the new forms", () => {
    expect(() => loadConfig({ VOD_TRUST_PROXY: "true" })).toThrow(ConfigError);
    expect(() => loadConfig({ VOD_TRUST_PROXY: "true" })).toThrow(
      /VOD_TRUST_PROXY: true is no longer accepted.*number of trusted proxy hops.*comma-separated list of trusted CIDRs/,
    );
  });

  it("refuses what is neither a number of hops nor addresses", () => {
    for (const bad of ["yes", "10.0.0.0/33", "10.0.0.0/8,", "-1", "1.5", "example.com"])
      expect(() => loadConfig({ VOD_TRUST_PROXY: bad }), bad).toThrow(
        /VOD_TRUST_PROXY: must be the number of trusted proxy hops/,
      );
  });
});

describe("tuneHeapForStreaming", () => {
  it("refuses a percent that is not a whole number from 1 to 1000, before setting anything", () => {
    for (const bad of [0, -5, 1.5, 1001, Number.NaN])
      expect(() => tuneHeapForStreaming(bad)).toThrow(RangeError);
  });
});

describe("VOD_SHUTDOWN_GRACE_SECONDS", () => {
  it("defaults to 8 s, takes 0 (release at once), and refuses what is not a whole number of seconds", () => {
    expect(loadConfig({}).shutdownGraceSeconds).toBe(8);
    expect(loadConfig({ VOD_SHUTDOWN_GRACE_SECONDS: "0" }).shutdownGraceSeconds).toBe(0);
    expect(loadConfig({ VOD_SHUTDOWN_GRACE_SECONDS: "30" }).shutdownGraceSeconds).toBe(30);
    for (const bad of ["-1", "1.5", "soon"])
      expect(() => loadConfig({ VOD_SHUTDOWN_GRACE_SECONDS: bad })).toThrow(/VOD_SHUTDOWN_GRACE_SECONDS/);
  });
});

describe("VOD_PROCESSING_CHUNK_SECONDS and VOD_PROCESSING_MIN_CHUNKS", () => {
  it("default to chunks of 30 s from 3 on, and take only whole multiples of the 6 s segment", () => {
    expect(loadConfig({}).core.processing).toMatchObject({ chunkSeconds: 30, minChunks: 3 });
    expect(
      loadConfig({ VOD_PROCESSING_CHUNK_SECONDS: "12", VOD_PROCESSING_MIN_CHUNKS: "5" }).core.processing,
    ).toMatchObject({ chunkSeconds: 12, minChunks: 5 });
    for (const bad of ["10", "0", "-6", "6.5", "half"])
      expect(() => loadConfig({ VOD_PROCESSING_CHUNK_SECONDS: bad }), bad).toThrow(
        /VOD_PROCESSING_CHUNK_SECONDS/,
      );
    expect(() => loadConfig({ VOD_PROCESSING_MIN_CHUNKS: "0" })).toThrow(/VOD_PROCESSING_MIN_CHUNKS/);
  });
});

describe("loadConfig: objects in a GCS bucket", () => {
  it("reads the bucket, prefix, endpoint and delivery, proxy by default", () => {
    expect(loadConfig({ VOD_OBJECT_STORE: "gcs", VOD_GCS_BUCKET: "vod-media" }).objects).toMatchObject({
      store: "gcs",
      gcs: { bucket: "vod-media", prefix: undefined, apiEndpoint: undefined, delivery: "proxy" },
    });
    const config = loadConfig({
      VOD_OBJECT_STORE: "gcs",
      VOD_GCS_BUCKET: "vod-media",
      VOD_GCS_PREFIX: "prod/",
      VOD_GCS_API_ENDPOINT: "http://127.0.0.1:4443",
      VOD_GCS_DELIVERY: "redirect",
    });
    expect(config.objects.gcs).toEqual({
      bucket: "vod-media",
      prefix: "prod/",
      apiEndpoint: "http://127.0.0.1:4443",
      delivery: "redirect",
    });
  });

  it("refuses gcs without a bucket, and bad values naming each variable", () => {
    expect(() => loadConfig({ VOD_OBJECT_STORE: "gcs" })).toThrow(/VOD_GCS_BUCKET: required/);
    const attempt = () =>
      loadConfig({
        VOD_OBJECT_STORE: "gcs",
        VOD_GCS_BUCKET: "Not A Bucket",
        VOD_GCS_PREFIX: "/abs",
        VOD_GCS_API_ENDPOINT: "gs://x",
        VOD_GCS_DELIVERY: "cdn",
      });
    expect(attempt).toThrow(ConfigError);
    for (const name of ["VOD_GCS_BUCKET", "VOD_GCS_PREFIX", "VOD_GCS_API_ENDPOINT", "VOD_GCS_DELIVERY"])
      expect(attempt).toThrow(`${name}:`);
  });

  it("reads the HMAC key of the service account, both halves or neither", () => {
    const gcs = { VOD_OBJECT_STORE: "gcs", VOD_GCS_BUCKET: "vod-media" };
    expect(
      loadConfig({ ...gcs, VOD_GCS_HMAC_ACCESS_ID: "GOOG1EABC", VOD_GCS_HMAC_SECRET: "s3cret" }).objects.gcs
        .hmacKey,
    ).toEqual({ accessId: "GOOG1EABC", secret: "s3cret" });
    expect(loadConfig(gcs).objects.gcs.hmacKey).toBeUndefined();
    expect(() => loadConfig({ ...gcs, VOD_GCS_HMAC_ACCESS_ID: "GOOG1EABC" })).toThrow(
      /VOD_GCS_HMAC_ACCESS_ID, VOD_GCS_HMAC_SECRET: set both or neither/,
    );
    expect(() => loadConfig({ ...gcs, VOD_GCS_HMAC_SECRET: "s3cret" })).toThrow(/set both or neither/);
  });

  it("reads the two failed-login limits", () => {
    const config = loadConfig({
      VOD_RATE_LIMIT_LOGIN_PER_EMAIL: "50",
      VOD_RATE_LIMIT_LOGIN_PER_EMAIL_AND_IP: "5",
    });
    expect(config.core.rateLimits).toMatchObject({
      loginFailuresPerEmailPer15Minutes: 50,
      loginFailuresPerEmailAndIpPer15Minutes: 5,
    });
    expect(() => loadConfig({ VOD_RATE_LIMIT_LOGIN_PER_EMAIL_AND_IP: "0" })).toThrow(
      "VOD_RATE_LIMIT_LOGIN_PER_EMAIL_AND_IP:",
    );
  });
});

describe("VOD_DATABASE_URL", () => {
  it("takes the Unix-socket form Cloud SQL documents, an empty host with host= naming the socket directory", () => {
    const url = "postgres://vod:secret@/vod?host=/cloudsql/project:region:instance";
    expect(loadConfig({ VOD_DATABASE_URL: url }).database.url).toBe(url);
    expect(loadConfig({ VOD_DATABASE_URL: "postgresql://db.internal:5432/vod" }).database.url).toBeDefined();
  });

  it("refuses other schemes, and an empty host that names no socket directory", () => {
    for (const bad of [
      "mysql://u@db/vod",
      "postgres://u:p@/vod",
      "postgres://u:p@/vod?sslmode=require",
      "vod",
    ])
      expect(() => loadConfig({ VOD_DATABASE_URL: bad }), bad).toThrow(
        /VOD_DATABASE_URL: must be a postgres/,
      );
  });
});

describe("account mail: VOD_SMTP_URL, VOD_MAIL_FROM, VOD_APP_URL", () => {
  it("logs mail by default, and links to the base URL unless VOD_APP_URL names the app", () => {
    expect(loadConfig({})).toMatchObject({
      mail: { smtpUrl: undefined, from: "no-reply@localhost" },
      core: { appUrl: "http://localhost:8080", rateLimits: { accountMailPerHour: 5 } },
    });
    expect(loadConfig({}).defaultedUrls).toContain("appUrl");
    expect(loadConfig({ VOD_BASE_URL: "https://api.example.com" }).core.appUrl).toBe(
      "https://api.example.com",
    );
    const config = loadConfig({
      VOD_BASE_URL: "https://api.example.com",
      VOD_APP_URL: "https://app.example.com/",
      VOD_SMTP_URL: "smtps://mailer%40example.com:p%40ss@smtp.example.com:465",
      VOD_MAIL_FROM: "Example Films <no-reply@example.com>",
      VOD_RATE_LIMIT_ACCOUNT_MAIL_PER_HOUR: "3",
    });
    expect(config).toMatchObject({
      core: { appUrl: "https://app.example.com", rateLimits: { accountMailPerHour: 3 } },
      mail: {
        smtpUrl: "smtps://mailer%40example.com:p%40ss@smtp.example.com:465",
        from: "Example Films <no-reply@example.com>",
      },
    });
    expect(config.defaultedUrls).not.toContain("appUrl");
  });

  it("refuses another scheme, a From that is no address, and an SMTP URL without a From", () => {
    const message = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as Error).message;
      }
      throw new Error("the configuration was accepted");
    };
    const wrongScheme = message({
      VOD_SMTP_URL: "http://mailer:s3cret-pw@smtp.example.com",
      VOD_MAIL_FROM: "no-reply@example.com",
    });
    expect(wrongScheme).toContain("VOD_SMTP_URL: must be an smtp:// or smtps:// URL");
    // The URL carries a password: the message names the variable, never its value.
    expect(wrongScheme).not.toContain("s3cret-pw");
    expect(message({ VOD_DATABASE_URL: "mysql://u:s3cret-pw@db/vod" })).not.toContain("s3cret-pw");
    expect(message({ VOD_MAIL_FROM: "nobody" })).toContain("VOD_MAIL_FROM:");
    expect(message({ VOD_MAIL_FROM: "a@b.c\r\nBcc: x@y.z" })).toContain("VOD_MAIL_FROM:");
    expect(message({ VOD_SMTP_URL: "smtp://smtp.example.com:587" })).toContain(
      "VOD_MAIL_FROM: required with VOD_SMTP_URL",
    );
  });
});

// The operational endpoints as a load balancer, Prometheus and a browser page see them: `/readyz`
// following the database and Redis, `/metrics` parsed by a Prometheus text-format parser, and the
// API's CORS for the origins of VOD_CORS_ORIGINS.

import type { ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { connect, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { temporarySchemas } from "@vod/adapter-postgres/testing";
import { suiteName, testServices } from "@vod/contract-tests";
import { createLogger, loadConfig, type RunningHost, startHost } from "@vod/host-express";
import parsePrometheusTextFormat, { type Family } from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, freePort, kill, makeVideo, settledAsset, signUp, startRedis } from "./support.js";

const { databaseUrl } = testServices();
const quiet = () => createLogger("error", new Writable({ write: (_c, _e, done) => done() }));
const TOKEN = "metrics-token-of-the-test-0123456789";
const APP = "https://app.example.com";

/**
 * `/metrics` as Prometheus reads it: the families by name. The parser (the one maintained-looking
 * Prometheus text parser on npm) folds every series of a labelled histogram into one sample and
 * drops their labels (its PR #8, open since 2019); read a second time without the histograms'
 * TYPE lines, each histogram's `_bucket`, `_sum` and `_count` series come out as families of
 * their own, labels kept (one per run of lines: the runs of one name are joined here).
 */
const scrape = async (url: string, token?: string) => {
  const res = await fetch(`${url}/metrics`, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  const families = new Map<string, Family>();
  for (const each of parsePrometheusTextFormat(text.replace(/^# TYPE \S+ histogram$/gm, ""))) {
    const seen = families.get(each.name);
    families.set(each.name, seen ? { ...seen, metrics: [...seen.metrics, ...each.metrics] } : each);
  }
  for (const each of parsePrometheusTextFormat(text))
    if (each.type === "HISTOGRAM") families.set(each.name, each);
  return families;
};

const family = (families: Map<string, Family>, name: string) => {
  const found = families.get(name);
  if (!found) throw new Error(`no ${name} in /metrics`);
  return found;
};

/** The value of the one sample whose labels include `labels`. */
const sampleValue = (families: Map<string, Family>, name: string, labels: Record<string, string> = {}) => {
  const samples = family(families, name).metrics.filter((m) =>
    Object.entries(labels).every(([k, v]) => m.labels?.[k] === v),
  );
  expect(samples).toHaveLength(1);
  return Number(samples[0]?.value);
};

const readyz = async (url: string) => {
  const res = await call(url, "/readyz");
  return { status: res.status, body: res.body };
};

/** Asks `/readyz` until it answers `status` (a dependency reconnects in its own time). */
const readyzUntil = async (url: string, status: number) => {
  let last = await readyz(url);
  for (let i = 0; i < 150 && last.status !== status; i++) {
    await new Promise((r) => setTimeout(r, 100));
    last = await readyz(url);
  }
  return last;
};

describe("metrics, readiness and CORS on the embedded default (PGlite, filesystem, ffmpeg)", () => {
  let dir: string;
  let host: RunningHost;
  let assetId: string;
  let token: string;
  let missingStatus: number;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "vod-ops-"));
    host = await startHost(
      loadConfig({
        PORT: "0",
        VOD_HOST: "127.0.0.1",
        VOD_DATA_DIR: dir,
        VOD_METRICS_TOKEN: TOKEN,
        VOD_CORS_ORIGINS: `${APP}, https://admin.example.com`,
      }),
      { logger: quiet() },
    );
    const auth = await signUp(host.url, "ops");
    await makeVideo(join(dir, "clip.mp4"), { width: 320, height: 180, seconds: 2 });
    const bytes = await readFile(join(dir, "clip.mp4"));
    const created = await call(host.url, "/v1/assets", { body: { title: "metered" }, headers: auth });
    assetId = created.body.asset.id;
    const started = await call(host.url, "/v1/uploads", {
      body: { asset_id: assetId, size_bytes: bytes.length },
      headers: auth,
    });
    await fetch(started.body.upload.parts[0].url, { method: "PUT", body: bytes });
    await call(host.url, `/v1/uploads/${started.body.upload.id}/complete`, { body: {}, headers: auth });
    expect((await settledAsset(host.url, auth, assetId)).status).toBe("ready");
    expect((await call(host.url, `/v1/assets/${assetId}`, { headers: auth })).status).toBe(200);
    missingStatus = (await call(host.url, "/v1/assets/ast_doesnotexist", { headers: auth })).status;
    expect([400, 404]).toContain(missingStatus);
    expect((await call(host.url, `/no/such/route/${assetId}`)).status).toBe(404);
    const session = await call(host.url, "/v1/playback/sessions", {
      body: { asset_id: assetId },
      headers: auth,
    });
    token = session.body.token;
    expect((await fetch(session.body.urls.manifest)).status).toBe(200);
    const telemetry = await fetch(`${host.url}/v1/telemetry`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        token,
        events: [
          { event: "play", ts_ms: Date.now(), playhead_ms: 0 },
          { event: "heartbeat", ts_ms: Date.now(), playhead_ms: 1_000 },
        ],
      }),
    });
    expect(telemetry.status).toBe(204);
  }, 120_000);

  afterAll(async () => {
    await host?.close(1_000);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("/readyz answers 200 with the database's check, /healthz stays as it was", async () => {
    expect(await readyz(host.url)).toEqual({
      status: 200,
      body: { status: "ok", checks: { serving: "ok", database: "ok" } },
    });
    expect((await call(host.url, "/healthz")).body).toEqual({ status: "ok" });
  });

  it("/metrics wants the metrics token: 401 with the spec's error body without it or with another", async () => {
    const attempts: Array<Record<string, string>> = [
      {},
      { authorization: "Bearer not-the-token-at-all-no" },
      { authorization: TOKEN },
    ];
    for (const headers of attempts) {
      const res = await call(host.url, "/metrics", { headers });
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ error: "unauthorized", code: "unauthorized" });
      expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
    }
  });

  it("/metrics has the request histogram by route template, processing, telemetry, webhooks, fallbacks and the process", async () => {
    const families = await scrape(host.url, TOKEN);
    expect(family(families, "vod_http_request_duration_seconds").type).toBe("HISTOGRAM");
    const requests = family(families, "vod_http_request_duration_seconds_count");
    const labelled = (labels: Record<string, string>) =>
      requests.metrics.filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
    expect(labelled({ route: "/v1/assets/:id", method: "GET", status: "200" }).length).toBe(1);
    expect(
      Number(labelled({ route: "/v1/assets/:id", method: "GET", status: String(missingStatus) })[0]?.value),
    ).toBe(1);
    expect(labelled({ route: "/v1/assets", method: "POST", status: "201" }).length).toBe(1);
    expect(labelled({ route: "/v1/play/:token/*path", method: "GET", status: "200" }).length).toBe(1);
    expect(labelled({ route: "/v1/telemetry", method: "POST", status: "204" }).length).toBe(1);
    expect(labelled({ route: "unmatched", method: "GET", status: "404" }).length).toBeGreaterThanOrEqual(1);
    // Never a raw path: no label holds an id or a playback token.
    for (const sample of requests.metrics) {
      expect(sample.labels?.route).not.toContain(assetId);
      expect(sample.labels?.route).not.toContain(token);
      expect(sample.labels?.route).not.toContain("ast_doesnotexist");
    }

    expect(family(families, "vod_processing_jobs_total").type).toBe("COUNTER");
    expect(sampleValue(families, "vod_processing_jobs_total", { state: "started" })).toBe(1);
    expect(sampleValue(families, "vod_processing_jobs_total", { state: "ready" })).toBe(1);
    expect(sampleValue(families, "vod_processing_jobs_total", { state: "failed" })).toBe(0);
    expect(sampleValue(families, "vod_processing_jobs_running")).toBe(0);
    expect(sampleValue(families, "vod_processing_job_duration_seconds_count", { state: "ready" })).toBe(1);
    expect(sampleValue(families, "vod_telemetry_events_stored_total")).toBe(2);
    for (const result of ["succeeded", "retrying", "failed"])
      expect(sampleValue(families, "vod_webhook_deliveries_total", { result })).toBe(0);
    for (const result of ["sent", "skipped", "retrying", "failed"])
      expect(sampleValue(families, "vod_account_mails_total", { result })).toBe(0);
    expect(sampleValue(families, "vod_rate_limit_fallback_hits_total")).toBe(0);
    // No Redis configured: no Redis series.
    expect(families.has("vod_redis_up")).toBe(false);
    // The process's default metrics.
    for (const name of [
      "process_cpu_user_seconds_total",
      "process_resident_memory_bytes",
      "nodejs_heap_size_used_bytes",
    ])
      expect(families.has(name)).toBe(true);
  });

  it("CORS: a listed origin's preflight and request get the headers, exposed ones included", async () => {
    const preflight = await fetch(`${host.url}/v1/assets`, {
      method: "OPTIONS",
      headers: {
        origin: APP,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type, idempotency-key",
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-origin")).toBe(APP);
    expect(preflight.headers.get("access-control-allow-methods")).toContain("POST");
    const allowedHeaders = preflight.headers.get("access-control-allow-headers")?.split(/,\s*/);
    for (const header of ["authorization", "content-type", "x-api-key", "idempotency-key", "x-request-id"])
      expect(allowedHeaders).toContain(header);
    expect(preflight.headers.get("vary")).toMatch(/origin/i);

    const actual = await call(host.url, "/v1/assets", { headers: { origin: "https://admin.example.com" } });
    expect(actual.status).toBe(401);
    expect(actual.headers.get("access-control-allow-origin")).toBe("https://admin.example.com");
    expect(actual.headers.get("access-control-expose-headers")?.split(/,\s*/)).toEqual([
      "Retry-After",
      "Idempotent-Replayed",
      "x-request-id",
    ]);
    expect(actual.headers.get("vary")).toMatch(/origin/i);
  });

  it("CORS: an origin not listed gets no CORS header; the media routes keep their own", async () => {
    const other = "https://evil.example.net";
    const preflight = await fetch(`${host.url}/v1/assets`, {
      method: "OPTIONS",
      headers: { origin: other, "access-control-request-method": "POST" },
    });
    expect(preflight.status).not.toBe(204);
    const actual = await fetch(`${host.url}/v1/assets`, { headers: { origin: other } });
    for (const res of [preflight, actual])
      expect([...res.headers.keys()].filter((name) => name.startsWith("access-control-"))).toEqual([]);
    // A player on any page still reads media and posts telemetry.
    const media = await fetch(`${host.url}/v1/play/${token}/master.m3u8`, {
      method: "OPTIONS",
      headers: { origin: other, "access-control-request-method": "GET" },
    });
    expect(media.status).toBe(204);
    expect(media.headers.get("access-control-allow-origin")).toBe(other);
  });
});

describe("CORS for any origin, and none by default (memory storage)", () => {
  const memoryHost = (env: Record<string, string>) =>
    startHost(
      loadConfig({
        PORT: "0",
        VOD_HOST: "127.0.0.1",
        VOD_STORAGE: "memory",
        VOD_OBJECT_STORE: "memory",
        VOD_WORKER_CONCURRENCY: "0",
        ...env,
      }),
      { logger: quiet() },
    );
  let dir: string;
  let any: RunningHost;
  let none: RunningHost;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "vod-ops-cors-"));
    any = await memoryHost({ VOD_DATA_DIR: join(dir, "any"), VOD_CORS_ORIGINS: "*" });
    none = await memoryHost({ VOD_DATA_DIR: join(dir, "none") });
  });
  afterAll(async () => {
    await Promise.all([any?.close(1_000), none?.close(1_000)]);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("`*` answers every origin with `*`, preflights included", async () => {
    const preflight = await fetch(`${any.url}/v1/auth/login`, {
      method: "OPTIONS",
      headers: { origin: "https://anywhere.example.org", "access-control-request-method": "POST" },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-origin")).toBe("*");
    const actual = await fetch(`${any.url}/v1/assets`, {
      headers: { origin: "https://anywhere.example.org" },
    });
    expect(actual.headers.get("access-control-allow-origin")).toBe("*");
    expect(actual.headers.get("access-control-expose-headers")).toContain("Idempotent-Replayed");
  });

  it("without VOD_CORS_ORIGINS the API answers no CORS; /metrics is open without a token, /readyz has no dependency to ask", async () => {
    const actual = await fetch(`${none.url}/v1/assets`, { headers: { origin: APP } });
    expect(actual.headers.get("access-control-allow-origin")).toBeNull();
    const preflight = await fetch(`${none.url}/v1/assets`, {
      method: "OPTIONS",
      headers: { origin: APP, "access-control-request-method": "GET" },
    });
    expect(preflight.status).toBe(404);
    expect(preflight.headers.get("access-control-allow-origin")).toBeNull();
    expect(family(await scrape(none.url), "vod_http_request_duration_seconds").type).toBe("HISTOGRAM");
    expect(await readyz(none.url)).toEqual({
      status: 200,
      body: { status: "ok", checks: { serving: "ok" } },
    });
  });
});

/** A TCP relay to the database server that the test can take away (and bring back) like a network. */
const databaseRelay = async (target: URL) => {
  const sockets = new Set<Socket>();
  const port = await freePort();
  let server: Server | undefined;
  const open = () =>
    new Promise<void>((resolve) => {
      if (server?.listening) return resolve();
      server = createServer((client) => {
        const upstream = connect(Number(target.port || 5432), target.hostname);
        for (const socket of [client, upstream]) {
          sockets.add(socket);
          socket.on("close", () => sockets.delete(socket));
          socket.on("error", () => undefined);
        }
        client.pipe(upstream).pipe(client);
      }).listen(port, "127.0.0.1", () => resolve());
    });
  const cut = () =>
    new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      server?.close(() => resolve());
    });
  await open();
  const url = new URL(target);
  url.hostname = "127.0.0.1";
  url.port = String(port);
  return { url: url.toString(), open, cut };
};

describe.skipIf(databaseUrl === null)(
  suiteName(
    "/readyz follows the database and Redis (postgres server, redis-server of the test's own)",
    databaseUrl !== null,
    "VOD_TEST_DATABASE_URL",
  ),
  () => {
    const schemas = temporarySchemas(databaseUrl ?? "", "vod_ops_ready");
    let dir: string;
    let host: RunningHost;
    let redis: ChildProcess | undefined;
    let redisPort: number;
    let relay: Awaited<ReturnType<typeof databaseRelay>>;

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), "vod-ops-ready-"));
      redisPort = await freePort();
      redis = await startRedis(redisPort);
      relay = await databaseRelay(new URL(databaseUrl ?? ""));
      host = await startHost(
        loadConfig({
          PORT: "0",
          VOD_HOST: "127.0.0.1",
          VOD_DATA_DIR: dir,
          VOD_DATABASE_URL: relay.url,
          VOD_DATABASE_SCHEMA: schemas.fresh(),
          VOD_REDIS_URL: `redis://127.0.0.1:${redisPort}`,
          VOD_WORKER_CONCURRENCY: "0",
        }),
        { logger: quiet() },
      );
    }, 60_000);

    afterAll(async () => {
      await relay?.open();
      await host?.close(1_000);
      if (redis) await kill(redis);
      await relay?.cut();
      await schemas.dropAll();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it("200 while both answer; 503 storage_error naming Redis while it is down, and back to 200 when it returns", async () => {
      expect(await readyz(host.url)).toEqual({
        status: 200,
        body: { status: "ok", checks: { serving: "ok", database: "ok", redis: "ok" } },
      });
      expect(sampleValue(await scrape(host.url), "vod_redis_up")).toBe(1);

      await kill(redis as ChildProcess);
      const down = await readyzUntil(host.url, 503);
      expect(down).toEqual({
        status: 503,
        body: {
          error: "storage_error",
          code: "storage_error",
          message: "not ready: redis",
          details: { checks: { serving: "ok", database: "ok", redis: "failed" } },
        },
      });
      // The API keeps serving meanwhile, counting rate limits on its own: a fallback hit.
      expect(
        (await call(host.url, "/v1/auth/login", { body: { email: "x@example.com", password: "nope nope" } }))
          .status,
      ).toBe(401);
      const families = await scrape(host.url);
      expect(sampleValue(families, "vod_redis_up")).toBe(0);
      expect(sampleValue(families, "vod_rate_limit_fallback_hits_total")).toBeGreaterThanOrEqual(1);
      expect(sampleValue(families, "vod_redis_outages_total")).toBe(1);

      redis = await startRedis(redisPort);
      expect((await readyzUntil(host.url, 200)).status).toBe(200);
    });

    it("503 storage_error naming the database while it cannot be reached, and back to 200 when it can", async () => {
      await relay.cut();
      const down = await readyzUntil(host.url, 503);
      expect(down.status).toBe(503);
      expect(down.body).toMatchObject({
        code: "storage_error",
        message: "not ready: database",
        details: { checks: { database: "failed", redis: "ok" } },
      });
      await relay.open();
      expect((await readyzUntil(host.url, 200)).body).toEqual({
        status: "ok",
        checks: { serving: "ok", database: "ok", redis: "ok" },
      });
    });
  },
);

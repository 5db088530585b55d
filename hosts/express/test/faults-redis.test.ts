import type { ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { manualClock } from "@vod/adapter-memory";
import { temporarySchemas } from "@vod/adapter-postgres/testing";
import { createLogger, loadConfig, type RunningHost, startHost } from "@vod/host-express";
import { afterAll, beforeAll, expect, it } from "vitest";
import { describeWith } from "./suites.js";
import { call, freePort, kill, makeVideo, settledAsset, signUp, startRedis, uploadAsset } from "./support.js";

/** A host's log lines, parsed, for the assertions on what it said about Redis. */
const capturedLogger = () => {
  const stream = new PassThrough();
  const lines: Array<{ level: number; msg: string }> = [];
  let buffered = "";
  stream.on("data", (chunk) => {
    buffered += chunk;
    const parts = buffered.split("\n");
    buffered = parts.pop() ?? "";
    for (const line of parts) if (line) lines.push(JSON.parse(line));
  });
  return { logger: createLogger("info", stream), lines };
};

describeWith(
  ["database", "redis"],
  "Redis killed and restarted empty under two hosts (postgres server, redis-server)",
  ({ databaseUrl }) => {
    const schemas = temporarySchemas(databaseUrl, "vod_fault_redis");
    const clock = manualClock(Date.now());
    const hosts: RunningHost[] = [];
    const logs: Array<ReturnType<typeof capturedLogger>> = [];
    let redis: ChildProcess | undefined;
    let redisPort: number;
    let dir: string;
    let a: RunningHost;
    let b: RunningHost;
    let auth: Record<string, string>;
    // What was revoked on host A before Redis went away, and a session that was not.
    let revoked: { token: string; manifest: string; entitlement: string };
    let live: { token: string; manifest: string; entitlement: string };
    let revokedKey: string;
    let loggedOutRefresh: string;

    const on = (host: RunningHost, url: string) => new URL(new URL(url).pathname, host.url).toString();
    /** What a player sees on `host`: manifest, entitlement and telemetry statuses. */
    const playback = async (host: RunningHost, session: typeof revoked) => {
      const manifest = (await fetch(on(host, session.manifest))).status;
      const entitlement = (
        await fetch(on(host, session.entitlement), {
          method: "POST",
          headers: { authorization: `Bearer ${session.token}` },
        })
      ).status;
      const telemetry = (
        await fetch(new URL("/v1/telemetry", host.url), {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            token: session.token,
            events: [{ event: "heartbeat", ts_ms: clock.now(), playhead_ms: 1_000 }],
          }),
        })
      ).status;
      return { manifest, entitlement, telemetry };
    };
    const refused = { manifest: 401, entitlement: 401, telemetry: 401 };
    const served = { manifest: 200, entitlement: 200, telemetry: 204 };
    /** The other credentials revoked on A: the API key and the refresh token of a logout. */
    const otherRevocations = async (host: RunningHost) => ({
      apiKey: (await call(host.url, "/v1/assets", { headers: { "x-api-key": revokedKey } })).status,
      refresh: (await call(host.url, "/v1/auth/refresh", { body: { refresh_token: loggedOutRefresh } }))
        .status,
    });
    const login = (host: RunningHost, email: string) =>
      call(host.url, "/v1/auth/login", { body: { email, password: "not the password" } });

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), "vod-fault-redis-"));
      redisPort = await freePort();
      redis = await startRedis(redisPort);
      const config = loadConfig({
        PORT: "0",
        VOD_HOST: "127.0.0.1",
        VOD_DATA_DIR: dir,
        VOD_BASE_URL: "https://api.vod.test",
        VOD_DATABASE_URL: databaseUrl,
        VOD_DATABASE_SCHEMA: schemas.fresh(),
        VOD_REDIS_URL: `redis://127.0.0.1:${redisPort}`,
        VOD_RATE_LIMIT_LOGIN_PER_EMAIL: "3",
        VOD_DRM_WIDEVINE_LICENSE_URL: "https://widevine.example/license",
      });
      for (const runsJobs of [true, false]) {
        const log = capturedLogger();
        logs.push(log);
        hosts.push(
          await startHost(
            { ...config, jobs: { ...config.jobs, workerConcurrency: runsJobs ? 1 : 0 } },
            { clock, logger: log.logger },
          ),
        );
      }
      [a, b] = hosts as [RunningHost, RunningHost];

      auth = await signUp(a.url, "redis-fault");
      await makeVideo(join(dir, "clip.mp4"), { width: 320, height: 180, seconds: 2 });
      const bytes = await readFile(join(dir, "clip.mp4"));
      const { assetId } = await uploadAsset(a.url, auth, bytes, "protected", { drm: true });
      expect((await settledAsset(a.url, auth, assetId)).status).toBe("ready");
      const session = async () => {
        const res = await call(a.url, "/v1/playback/sessions", {
          body: { asset_id: assetId },
          headers: auth,
        });
        return {
          id: res.body.session.id as string,
          token: res.body.token as string,
          manifest: res.body.urls.manifest as string,
          entitlement: res.body.urls.entitlement as string,
        };
      };
      const toRevoke = await session();
      live = await session();
      revoked = toRevoke;
      // Both hosts have seen (and cached) the session as live before it is revoked.
      expect(await playback(a, revoked)).toEqual(served);
      expect(await playback(b, revoked)).toEqual(served);
      expect(
        (await call(a.url, `/v1/playback/sessions/${toRevoke.id}`, { method: "DELETE", headers: auth }))
          .status,
      ).toBe(204);

      const key = await call(a.url, "/v1/api-keys", {
        body: { name: "ci", scopes: ["read"] },
        headers: auth,
      });
      expect(key.status).toBe(201);
      revokedKey = key.body.key;
      expect((await call(a.url, "/v1/assets", { headers: { "x-api-key": revokedKey } })).status).toBe(200);
      expect(
        (await call(a.url, `/v1/api-keys/${key.body.id}`, { method: "DELETE", headers: auth })).status,
      ).toBe(204);
      const email = `logout-${Date.now()}@example.com`;
      const signedUp = await call(a.url, "/v1/auth/signup", {
        body: { email, password: "correct horse battery" },
      });
      loggedOutRefresh = signedUp.body.refresh_token;
      expect(
        (
          await call(a.url, "/v1/auth/logout", {
            body: { refresh_token: loggedOutRefresh },
            headers: { authorization: `Bearer ${signedUp.body.access_token}` },
          })
        ).status,
      ).toBe(204);
      // Past every node's cache: what follows is what the shared stores say, not what a node remembers.
      clock.advance(61_000);
      for (const host of [a, b]) {
        expect(await playback(host, revoked)).toEqual(refused);
        expect(await otherRevocations(host)).toEqual({ apiKey: 401, refresh: 401 });
      }
    }, 120_000);

    afterAll(async () => {
      await Promise.all(hosts.map((h) => h.close(1_000)));
      if (redis) await kill(redis);
      await schemas.dropAll();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it("while Redis is down: the API keeps serving, revocations hold, rate limits count per node", async () => {
      await kill(redis as ChildProcess);
      for (const host of [a, b]) {
        // Plain authenticated calls: no 503.
        const listed = await call(host.url, "/v1/assets", { headers: auth });
        expect(listed.status).toBe(200);
        expect((await call(host.url, "/v1/auth/me", { headers: auth })).status).toBe(200);
        expect(await playback(host, revoked)).toEqual(refused);
        expect(await playback(host, live)).toEqual(served);
        expect(await otherRevocations(host)).toEqual({ apiKey: 401, refresh: 401 });
      }
      // Each node counts on its own: three failures on A, the fourth there is over the limit,
      // while B has counted none of them.
      const email = `per-node-${Date.now()}@example.com`;
      for (let i = 0; i < 3; i++) expect((await login(a, email)).status).toBe(401);
      expect((await login(a, email)).status).toBe(429);
      expect((await login(b, email)).status).toBe(401);
      // The caches age past their 60 s: the answers now come from the database.
      clock.advance(61_000);
      for (const host of [a, b]) expect(await playback(host, revoked)).toEqual(refused);

      // Said once per outage, at warn, on each host.
      for (const { lines } of logs) {
        const said = lines.filter((l) => l.msg === "Redis unreachable, rate limits per node");
        expect(said.map((l) => l.level)).toEqual([40]);
      }
    }, 60_000);

    it("after Redis restarts empty: the revoked session, key and refresh token stay refused on both hosts", async () => {
      redis = await startRedis(redisPort);
      for (const { lines } of logs) {
        const until = Date.now() + 20_000;
        while (!lines.some((l) => l.msg === "Redis back" && l.level === 30)) {
          if (Date.now() > until) throw new Error("a host never said Redis was back");
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      for (const host of [a, b]) {
        expect(await playback(host, revoked)).toEqual(refused);
        expect(await otherRevocations(host)).toEqual({ apiKey: 401, refresh: 401 });
      }
      // Past every cache's age, on an empty Redis.
      clock.advance(61_000);
      for (const host of [a, b]) {
        expect(await playback(host, revoked)).toEqual(refused);
        expect(await playback(host, live)).toEqual(served);
        expect(await otherRevocations(host)).toEqual({ apiKey: 401, refresh: 401 });
      }
    }, 60_000);

    it("after Redis is back: rate limits are shared again, 429 on either host once the shared count is spent", async () => {
      const email = `shared-again-${Date.now()}@example.com`;
      expect((await login(a, email)).status).toBe(401);
      expect((await login(b, email)).status).toBe(401);
      expect((await login(a, email)).status).toBe(401);
      expect((await login(b, email)).status).toBe(429);
      expect((await login(a, email)).status).toBe(429);
    }, 30_000);
  },
);

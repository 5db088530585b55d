import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { type ManualClock, manualClock, memoryStorage } from "@vod/adapter-memory";
import { temporarySchemas } from "@vod/adapter-postgres/testing";
import { redisBackdoor } from "@vod/adapter-redis/testing";
import { fakeMediaProcessor } from "@vod/contract-tests";
import { CREDENTIAL_CACHE_MS, type Revocation, TenantId } from "@vod/core";
import { Effect, Option } from "effect";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig, type RunningHost, startHost } from "../src/index.js";
import { describeWith } from "./suites.js";
import { call, cli, type Reply } from "./support.js";

// Each node caches what a credential resolves to (authenticate.ts). These tests warm that cache
// and then revoke a key, log a session out and suspend a tenant: the next request is refused on
// the host that did it and, through Redis, on every other; a node that missed the message is
// refused once the cache's bounded life has passed (the clock is driven, nothing sleeps).

const baseEnv = (dataDir: string): Record<string, string> => ({
  PORT: "0",
  VOD_HOST: "127.0.0.1",
  VOD_DATA_DIR: dataDir,
  VOD_LOG_LEVEL: "silent",
  VOD_WORKER_CONCURRENCY: "0",
  // Access tokens name the API as issuer and audience: one for every node.
  VOD_BASE_URL: "http://api.vod.test",
});

interface Account {
  readonly tenantId: string;
  readonly bearer: Record<string, string>;
  readonly refreshToken: string;
  readonly key: Record<string, string>;
  readonly keyId: string;
}

const openAccount = async (url: string): Promise<Account> => {
  const signup = await call(url, "/v1/auth/signup", {
    body: { email: `cache-${randomBytes(5).toString("hex")}@example.com`, password: "correct horse battery" },
  });
  expect(signup.status).toBe(201);
  const bearer = { authorization: `Bearer ${signup.body.access_token}` };
  const key = await call(url, "/v1/api-keys", {
    headers: bearer,
    body: { name: "cache", scopes: ["write"] },
  });
  expect(key.status).toBe(201);
  const me = await call(url, "/v1/auth/me", { headers: bearer });
  return {
    tenantId: me.body.tenant.id,
    bearer,
    refreshToken: signup.body.refresh_token,
    key: { "x-api-key": key.body.key },
    keyId: key.body.id,
  };
};

/** A request to an absolute URL: its status, and its body when it is JSON. */
const send = async (url: string, init: RequestInit = {}) => {
  const res = await fetch(url, init);
  const text = await res.text();
  const json = /^application\/json\b/.test(res.headers.get("content-type") ?? "")
    ? JSON.parse(text)
    : undefined;
  return { status: res.status, json };
};

const status = async (url: string, headers: Record<string, string>) =>
  (await call(url, "/v1/auth/me", { headers })).status;

describe("credential cache, one host without Redis", () => {
  const closing: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const close of closing) await close();
  });

  const start = async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "vod-cred-"));
    const host = await startHost(loadConfig({ ...baseEnv(dataDir), VOD_STORAGE: "memory" }), {
      storage: memoryStorage(),
    });
    closing.push(async () => {
      await host.close(1_000);
      await rm(dataDir, { recursive: true, force: true });
    });
    return host;
  };

  it("refuses a revoked key, a logged-out session and a suspended tenant on the next request", async () => {
    const host = await start();
    const one = await openAccount(host.url);
    const two = await openAccount(host.url);
    expect(await status(host.url, one.key)).toBe(200);
    expect(await status(host.url, one.bearer)).toBe(200);

    expect(
      (await call(host.url, `/v1/api-keys/${one.keyId}`, { method: "DELETE", headers: one.bearer })).status,
    ).toBe(204);
    const revoked = await call(host.url, "/v1/auth/me", { headers: one.key });
    expect(revoked.status).toBe(401);
    expect(revoked.body.code).toBe("unauthorized");

    expect((await call(host.url, "/v1/auth/logout", { headers: one.bearer, body: {} })).status).toBe(204);
    expect(await status(host.url, one.bearer)).toBe(401);

    expect(await status(host.url, two.key)).toBe(200);
    expect(await status(host.url, two.bearer)).toBe(200);
    await Effect.runPromise(host.vod.tenants.suspend(TenantId(two.tenantId)));
    const suspended = await call(host.url, "/v1/assets", { headers: two.key });
    expect(suspended.status).toBe(403);
    expect(suspended.body.code).toBe("forbidden");
    expect(await status(host.url, two.bearer)).toBe(403);
    await Effect.runPromise(host.vod.tenants.activate(TenantId(two.tenantId)));
    expect(await status(host.url, two.key)).toBe(200);
  }, 30_000);
});

describeWith(
  ["database", "redis"],
  "credential cache, hosts sharing Postgres and Redis",
  ({ databaseUrl: url, redisUrl }) => {
    const schemas = temporarySchemas(url, "vod_cred");
    const prefix = `vod-cred-test:${randomBytes(6).toString("hex")}:`;
    const closing: Array<() => Promise<void>> = [];
    afterAll(async () => {
      for (const close of closing.reverse()) await close();
      const backdoor = redisBackdoor({ url: redisUrl, keyPrefix: prefix });
      await backdoor.clear();
      await backdoor.close();
      await schemas.dropAll();
    });

    /**
     * Three hosts on one database (one data directory: the same signing keys and objects): a and
     * b with Redis, c without; with `worker`, a processes uploads with the fake media processor.
     */
    const cluster = async ({ worker = false } = {}) => {
      const dataDir = await mkdtemp(join(tmpdir(), "vod-cred-pg-"));
      const schema = schemas.fresh();
      const env = {
        ...baseEnv(dataDir),
        VOD_DATABASE_URL: url,
        VOD_DATABASE_SCHEMA: schema,
        VOD_DATABASE_POOL_SIZE: "2",
      };
      const withRedis = { ...env, VOD_REDIS_URL: redisUrl, VOD_REDIS_KEY_PREFIX: prefix };
      const hosts: Array<{ host: RunningHost; clock: ManualClock }> = [];
      for (const config of [
        worker ? { ...withRedis, VOD_WORKER_CONCURRENCY: "1" } : withRedis,
        withRedis,
        env,
      ]) {
        const clock = manualClock(Date.now());
        hosts.push({
          host: await startHost(loadConfig(config), {
            clock,
            ...(worker ? { mediaProcessor: fakeMediaProcessor() } : {}),
          }),
          clock,
        });
      }
      closing.push(async () => {
        for (const { host } of hosts) await host.close(1_000);
        await rm(dataDir, { recursive: true, force: true });
      });
      const [a, b, c] = hosts as [(typeof hosts)[0], (typeof hosts)[0], (typeof hosts)[0]];
      return { a, b, c, env: withRedis };
    };

    /** Resolves once `host` has heard, on the feed, a revocation that `match` accepts. */
    const heard = (host: RunningHost, match: (r: Revocation) => boolean) =>
      new Promise<void>((resolve) => host.vod.ports.revocationFeed?.watch((r) => match(r) && resolve()));

    /** Waits until b hears what a publishes: Redis subscriptions are made in the background. */
    const subscribed = async (a: RunningHost, b: RunningHost) => {
      const probe = `probe_${randomBytes(4).toString("hex")}`;
      let done = false;
      const hearing = heard(b, (r) => r.id === probe).then(() => {
        done = true;
      });
      for (let i = 0; i < 200 && !done; i++) {
        await Effect.runPromise(
          a.vod.ports.revocationFeed?.publish({ kind: "api_key", id: probe }) ?? Effect.void,
        );
        await new Promise((r) => setTimeout(r, 25));
      }
      await hearing;
    };

    /** The cluster, b subscribed, and an account whose key and session every node has cached. */
    const warmCluster = async () => {
      const nodes = await cluster();
      await subscribed(nodes.a.host, nodes.b.host);
      const account = await openAccount(nodes.a.host.url);
      for (const { host } of [nodes.a, nodes.b, nodes.c]) {
        expect(await status(host.url, account.key)).toBe(200);
        expect(await status(host.url, account.bearer)).toBe(200);
      }
      return { ...nodes, account };
    };

    /**
     * Revokes `credential` on a: refused at once on a and on b, which Redis tells; c has no Redis,
     * so the message never reaches it and its cached answer stands until the cache's life is over.
     */
    const refusedOnceTold = async (
      { a, b, c }: Pick<Awaited<ReturnType<typeof cluster>>, "a" | "b" | "c">,
      credential: Record<string, string>,
      revocation: (r: Revocation) => boolean,
      revoke: () => Promise<Reply>,
    ) => {
      const told = heard(b.host, revocation);
      expect((await revoke()).status).toBe(204);
      await told;
      expect(await status(a.host.url, credential)).toBe(401);
      expect(await status(b.host.url, credential)).toBe(401);
      expect(await status(c.host.url, credential)).toBe(200);
      c.clock.advance(CREDENTIAL_CACHE_MS);
      expect(await status(c.host.url, credential)).toBe(401);
    };

    it("a revoked key and a logged-out session: refused at once on every node told, after the cache's life on one that was not", async () => {
      const { a, b, c, account } = await warmCluster();

      const nodes = { a, b, c };
      await refusedOnceTold(
        nodes,
        account.key,
        (r) => r.kind === "api_key" && r.id === account.keyId,
        () =>
          call(a.host.url, `/v1/api-keys/${account.keyId}`, { method: "DELETE", headers: account.bearer }),
      );
      // c's clock has moved on: its cached session expired with the key's; cache it again.
      expect(await status(c.host.url, account.bearer)).toBe(200);
      await refusedOnceTold(
        nodes,
        account.bearer,
        (r) => r.kind === "refresh_session",
        () =>
          call(a.host.url, "/v1/auth/logout", {
            headers: account.bearer,
            body: { refresh_token: account.refreshToken },
          }),
      );
    }, 60_000);

    it("a suspended tenant's playback, licence, telemetry and part PUTs: refused at once on every node told, after the cache's life on one that was not", async () => {
      const nodes = await cluster({ worker: true });
      const { a, b, c } = nodes;
      await subscribed(a.host, b.host);
      const account = await openAccount(a.host.url);
      const headers = account.key;
      /** The same path and query on another node. */
      const on = (host: RunningHost, url: string) => {
        const { pathname, search } = new URL(url);
        return `${host.url}${pathname}${search}`;
      };
      const bytes = new Uint8Array(2_000).fill(5);
      const upload = async (drm: boolean) => {
        const asset = await call(a.host.url, "/v1/assets", { headers, body: { title: "suspend", drm } });
        expect(asset.status).toBe(201);
        const started = await call(a.host.url, "/v1/uploads", {
          headers,
          body: { asset_id: asset.body.asset.id, size_bytes: bytes.byteLength },
        });
        expect(started.status).toBe(201);
        return { assetId: asset.body.asset.id as string, upload: started.body.upload };
      };
      const put = async (url: string) => (await send(url, { method: "PUT", body: bytes })).status;

      const protectedAsset = await upload(true);
      expect(await put(on(a.host, protectedAsset.upload.parts[0].url))).toBe(200);
      const completed = await call(a.host.url, `/v1/uploads/${protectedAsset.upload.id}/complete`, {
        headers,
        body: {},
      });
      expect(completed.status).toBe(200);
      for (let i = 0; ; i++) {
        const asset = await call(a.host.url, `/v1/assets/${protectedAsset.assetId}`, { headers });
        if (asset.body.asset.status === "ready") break;
        if (asset.body.asset.status === "failed" || i > 600) throw new Error("the asset never became ready");
        await new Promise((r) => setTimeout(r, 50));
      }
      const played = await call(a.host.url, "/v1/playback/sessions", {
        headers,
        body: { asset_id: protectedAsset.assetId },
      });
      expect(played.status).toBe(201);
      const { token, urls } = played.body;
      const master = await (await fetch(on(a.host, urls.manifest))).text();
      const mediaUrl = new URL(
        master.split("\n").find((l) => l !== "" && !l.startsWith("#")) ?? "",
        on(a.host, urls.manifest),
      );
      const media = await (await fetch(mediaUrl)).text();
      const segment = new URL(media.split("\n").find((l) => l.endsWith(".m4s")) ?? "", mediaUrl).toString();
      const kid = Buffer.from(
        /URI="data:text\/plain;base64,([^"]+)"/.exec(media)?.[1] ?? "",
        "base64",
      ).toString("base64url");
      const pending = await upload(false);
      const partUrl = pending.upload.parts[0].url as string;

      const entitle = (host: RunningHost) =>
        send(`${host.url}/v1/drm/entitlement`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}` },
        });
      // A licence token issued while the tenant was active, as a player holds one.
      const licenceHeaders: Record<string, string> = (await entitle(a.host)).json?.license_headers;

      /** Every playback request and a part PUT on `host`, each one's status. */
      const statuses = async (host: RunningHost) => ({
        manifest: (await send(on(host, urls.manifest))).status,
        playlist: (await send(on(host, mediaUrl.toString()))).status,
        segment: (await send(on(host, segment))).status,
        entitlement: (await entitle(host)).status,
        licence: (
          await send(`${host.url}/v1/drm/clearkey/license`, {
            method: "POST",
            headers: { "content-type": "application/json", ...licenceHeaders },
            body: JSON.stringify({ kids: [kid] }),
          })
        ).status,
        telemetry: (
          await send(`${host.url}/v1/telemetry`, {
            method: "POST",
            headers: { "content-type": "text/plain" },
            body: JSON.stringify({ token, events: [{ event: "heartbeat", ts_ms: 1, playhead_ms: 0 }] }),
          })
        ).status,
        part: await put(on(host, partUrl)),
      });
      const served = {
        manifest: 200,
        playlist: 200,
        segment: 200,
        entitlement: 200,
        licence: 200,
        telemetry: 204,
        part: 200,
      };
      const refused = {
        manifest: 403,
        playlist: 403,
        segment: 403,
        entitlement: 403,
        licence: 403,
        telemetry: 401,
        part: 403,
      };
      for (const { host } of [a, b, c]) expect(await statuses(host)).toEqual(served);

      const toldB = heard(b.host, (r) => r.kind === "tenant" && r.id === account.tenantId);
      await Effect.runPromise(a.host.vod.tenants.suspend(TenantId(account.tenantId)));
      await toldB;
      for (const { host } of [a, b]) expect(await statuses(host)).toEqual(refused);
      // c hears nothing (no Redis): it serves from what it cached until the cache's life is over.
      expect((await send(on(c.host, urls.manifest))).status).toBe(200);
      c.clock.advance(CREDENTIAL_CACHE_MS);
      expect(await statuses(c.host)).toEqual(refused);

      const activated = heard(b.host, (r) => r.kind === "tenant" && r.id === account.tenantId);
      await Effect.runPromise(a.host.vod.tenants.activate(TenantId(account.tenantId)));
      await activated;
      for (const { host } of [a, b]) expect(await statuses(host)).toEqual(served);
    }, 90_000);

    it("a tenant suspended with `vod tenant suspend`: 403 at once on every node told, after the cache's life on one that was not", async () => {
      const { a, b, c, env, account } = await warmCluster();

      // The operator's command is another process: it reaches a and b through Redis only.
      const toldA = heard(a.host, (r) => r.kind === "tenant" && r.id === account.tenantId);
      const toldB = heard(b.host, (r) => r.kind === "tenant" && r.id === account.tenantId);
      const run = (action: string) =>
        promisify(execFile)(process.execPath, [cli, "tenant", action, account.tenantId], {
          env: { ...process.env, ...env },
        });
      const suspended = await run("suspend");
      expect(suspended.stdout).toContain(`${account.tenantId} is suspended`);
      await Promise.all([toldA, toldB]);
      for (const { host } of [a, b]) {
        const refused = await call(host.url, "/v1/assets", { headers: account.key });
        expect(refused.status).toBe(403);
        expect(refused.body.code).toBe("forbidden");
        expect(await status(host.url, account.bearer)).toBe(403);
      }
      expect(await status(c.host.url, account.key)).toBe(200);
      c.clock.advance(CREDENTIAL_CACHE_MS);
      expect(await status(c.host.url, account.key)).toBe(403);
      expect(await status(c.host.url, account.bearer)).toBe(403);

      const reactivated = heard(b.host, (r) => r.kind === "tenant" && r.id === account.tenantId);
      await run("activate");
      await reactivated;
      expect(await status(b.host.url, account.key)).toBe(200);
      // An unknown tenant is an error of the operator's, said on stderr with a non-zero exit.
      await expect(
        promisify(execFile)(process.execPath, [cli, "tenant", "suspend", "tenant_unknown"], {
          env: { ...process.env, ...env },
        }),
      ).rejects.toMatchObject({ code: 1, stderr: expect.stringContaining("tenant not found") });
    }, 90_000);

    it("a tenant deleted with `vod tenant delete`: 401 at once on every node told, after the cache's life on one that was not; a's worker then removes its rows", async () => {
      const nodes = await cluster({ worker: true });
      const { a, b, c, env } = nodes;
      await subscribed(a.host, b.host);
      const account = await openAccount(a.host.url);
      for (const { host } of [a, b, c]) {
        expect(await status(host.url, account.key)).toBe(200);
        expect(await status(host.url, account.bearer)).toBe(200);
      }
      const toldA = heard(a.host, (r) => r.kind === "tenant" && r.id === account.tenantId);
      const toldB = heard(b.host, (r) => r.kind === "tenant" && r.id === account.tenantId);
      const deleted = await promisify(execFile)(
        process.execPath,
        [cli, "tenant", "delete", account.tenantId],
        {
          env: { ...process.env, ...env },
        },
      );
      expect(deleted.stdout).toContain(`${account.tenantId} is deleted`);
      await Promise.all([toldA, toldB]);
      for (const { host } of [a, b]) {
        const refused = await call(host.url, "/v1/assets", { headers: account.key });
        expect(refused.status).toBe(401);
        expect(refused.body.code).toBe("unauthorized");
        expect(await status(host.url, account.bearer)).toBe(401);
      }
      expect(await status(c.host.url, account.key)).toBe(200);
      c.clock.advance(CREDENTIAL_CACHE_MS);
      expect(await status(c.host.url, account.key)).toBe(401);
      expect(await status(c.host.url, account.bearer)).toBe(401);
      // The job, enqueued by the command, runs on a's worker: the tenant's row goes last.
      const storage = a.host.vod.ports.storage;
      for (let i = 0; i < 600; i++) {
        if (Option.isNone(await Effect.runPromise(storage.tenants.get(TenantId(account.tenantId))))) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(Option.isNone(await Effect.runPromise(storage.tenants.get(TenantId(account.tenantId))))).toBe(
        true,
      );
      expect(await status(b.host.url, account.key)).toBe(401);
      // A second delete of a tenant that is gone is an error of the operator's.
      await expect(
        promisify(execFile)(process.execPath, [cli, "tenant", "delete", account.tenantId], {
          env: { ...process.env, ...env },
        }),
      ).rejects.toMatchObject({ code: 1, stderr: expect.stringContaining("tenant not found") });
    }, 90_000);
  },
);

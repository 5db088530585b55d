import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, freePort, spawnCli, startServe, stop } from "./support.js";

describe("vod serve on the embedded default (PGlite under VOD_DATA_DIR)", () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "vod-life-"));
  });
  afterAll(async () => rm(dataDir, { recursive: true, force: true }));

  it("keeps accounts, keys, assets and tokens across a SIGTERM and a restart", async () => {
    const env = { VOD_DATA_DIR: dataDir, VOD_LOG_LEVEL: "info" };
    const email = `restart-${randomUUID()}@example.com`;
    const password = "correct horse battery";
    // Same port both times, as a restarted service keeps it (the default base URL, and so the
    // tokens' issuer, is derived from it).
    const port = await freePort();

    const first = await startServe(env, port);
    const signup = await call(first.url, "/v1/auth/signup", { body: { email, password } });
    expect(signup.status).toBe(201);
    const bearer = { authorization: `Bearer ${signup.body.access_token}` };
    const key = await call(first.url, "/v1/api-keys", {
      body: { name: "ci", scopes: ["admin"] },
      headers: bearer,
    });
    expect(key.status).toBe(201);
    const asset = await call(first.url, "/v1/assets", { body: { title: "kept" }, headers: bearer });
    expect(asset.status).toBe(201);
    expect(await stop(first)).toBe(0);
    expect(first.output()).toContain('"msg":"draining"');
    expect(first.output()).toContain('"storage":"pglite');

    const second = await startServe(env, port);
    try {
      // The access token from before the restart still verifies (keys and session were kept).
      const me = await call(second.url, "/v1/auth/me", { headers: bearer });
      expect(me.status).toBe(200);
      expect(me.body.user.email).toBe(email);
      const login = await call(second.url, "/v1/auth/login", { body: { email, password } });
      expect(login.status).toBe(200);
      const keys = await call(second.url, "/v1/api-keys", { headers: { "x-api-key": key.body.key } });
      expect(keys.status).toBe(200);
      expect(keys.body.data.map((k: { id: string }) => k.id)).toEqual([key.body.id]);
      const assets = await call(second.url, "/v1/assets", { headers: bearer });
      expect(assets.body.data).toEqual([asset.body.asset]);
      const refreshed = await call(second.url, "/v1/auth/refresh", {
        body: { refresh_token: signup.body.refresh_token },
      });
      expect(refreshed.status).toBe(200);
    } finally {
      expect(await stop(second)).toBe(0);
    }
  }, 90_000);

  it("refuses to start on a bad variable, naming it", async () => {
    const spawned = spawnCli("serve", {
      PORT: "eighty",
      VOD_DATABASE_URL: "mysql://x",
      VOD_DATA_DIR: dataDir,
    });
    const code = await new Promise((resolve) => spawned.child.once("exit", resolve));
    expect(code).toBe(78);
    expect(spawned.output()).toContain("PORT:");
    expect(spawned.output()).toContain("VOD_DATABASE_URL: must be a postgres:// URL");
  });

  it("refuses to run `vod worker` without a database server, saying why", async () => {
    const spawned = spawnCli("worker", { VOD_DATA_DIR: dataDir, VOD_DATABASE_URL: "" });
    const code = await new Promise((resolve) => spawned.child.once("exit", resolve));
    expect(code).toBe(78);
    expect(spawned.output()).toContain("set VOD_DATABASE_URL");
  });
});

import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, freePort, spawnCli, startServe, stop } from "./support.js";

/** Process ids whose parent is `pid`, from /proc (Linux). */
const childrenOf = (pid: number) =>
  readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .filter((name) => {
      try {
        // The parent pid is the 4th field of stat, after the command in parentheses.
        return readFileSync(`/proc/${name}/stat`, "utf8").split(") ")[1]?.split(" ")[1] === String(pid);
      } catch {
        return false; // exited while listing
      }
    })
    .map(Number);
const commandOf = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const waitUntil = async (condition: () => boolean, timeoutMs = 10_000) => {
  const until = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > until) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 50));
  }
};

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

  it("runs the embedded database in a process of its own, which lives and dies with the host", async () => {
    const dir = await mkdtemp(join(tmpdir(), "vod-dbproc-"));
    try {
      const env = { VOD_DATA_DIR: dir, VOD_LOG_LEVEL: "info" };
      const port = await freePort();
      const first = await startServe(env, port);
      const signup = await call(first.url, "/v1/auth/signup", {
        body: { email: `proc-${randomUUID()}@example.com`, password: "correct horse battery" },
      });
      expect(signup.status).toBe(201);
      const database = childrenOf(first.child.pid!);
      expect(database).toHaveLength(1);
      expect(commandOf(database[0]!)).toContain("pglite-child.js");

      // The host killed outright: its database goes too, leaving nobody on the data directory.
      first.child.kill("SIGKILL");
      await waitUntil(() => !alive(database[0]!));

      // The database killed under a running host: the host stops (exit 1) rather than fail
      // every request, and a new start finds what was stored.
      const second = await startServe(env, port);
      const [db] = childrenOf(second.child.pid!);
      process.kill(db!, "SIGKILL");
      const code = await new Promise((r) => second.child.once("exit", r));
      expect(code).toBe(1);
      expect(second.output()).toContain("the embedded database process exited");

      const third = await startServe(env, port);
      try {
        const me = await call(third.url, "/v1/auth/me", {
          headers: { authorization: `Bearer ${signup.body.access_token}` },
        });
        expect(me.status).toBe(200);
      } finally {
        expect(await stop(third)).toBe(0);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);

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

  it("refuses a heap growing percent that is not a whole number from 0 to 1000", async () => {
    const spawned = spawnCli("serve", { VOD_HEAP_GROWING_PERCENT: "1.5", VOD_DATA_DIR: dataDir });
    const code = await new Promise((resolve) => spawned.child.once("exit", resolve));
    expect(code).toBe(78);
    expect(spawned.output()).toContain("VOD_HEAP_GROWING_PERCENT: must be an integer from 0 to 1000");
  });

  it("refuses to run `vod worker` without a database server, saying why", async () => {
    const spawned = spawnCli("worker", { VOD_DATA_DIR: dataDir, VOD_DATABASE_URL: "" });
    const code = await new Promise((resolve) => spawned.child.once("exit", resolve));
    expect(code).toBe(78);
    expect(spawned.output()).toContain("set VOD_DATABASE_URL");
  });
});

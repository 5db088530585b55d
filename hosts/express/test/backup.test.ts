import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { copyFile, cp, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { appRoleName, connectPostgres } from "@vod/adapter-postgres";
import { describe, expect, it } from "vitest";
import { describeWith, suiteScratch } from "./suites.js";
import { call, cli, deploymentSecrets, makeVideo, type Reply, settledAsset, uploadAsset } from "./support.js";

const run = promisify(execFile);

/** `vod ARGS` as an operator runs it: its exit code and what it printed. */
const vod = async (args: ReadonlyArray<string>, env: Record<string, string>) => {
  try {
    const { stdout, stderr } = await run(process.execPath, [cli, ...args], {
      env: { ...process.env, VOD_LOG_LEVEL: "silent", ...env },
    });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? -1, output: `${failed.stdout ?? ""}${failed.stderr ?? ""}` };
  }
};

const password = "correct horse battery";

/** A tenant with an owner who signs in with a password, and an admin API key. */
const tenant = async (url: string) => {
  const email = `backup-${randomBytes(6).toString("hex")}@example.com`;
  const signup = await call(url, "/v1/auth/signup", { body: { email, password } });
  expect(signup.status).toBe(201);
  const key = await call(url, "/v1/api-keys", {
    body: { name: "ops", scopes: ["admin"] },
    headers: { authorization: `Bearer ${signup.body.access_token}` },
  });
  expect(key.status).toBe(201);
  return {
    email,
    key: key.body.key as string,
    keyId: key.body.id as string,
    refreshToken: signup.body.refresh_token as string,
  };
};

/**
 * Creates assets one after another until stopped, keeping the id of each the host acknowledged
 * (201), in order.
 */
const writer = (url: string, key: string) => {
  const acknowledged: string[] = [];
  let stopped = false;
  const done = (async () => {
    for (let i = 0; !stopped; i++) {
      const res = await call(url, "/v1/assets", { body: { title: `w${i}` }, headers: { "x-api-key": key } });
      if (res.status !== 201) throw new Error(`writer: ${res.status} ${JSON.stringify(res.body)}`);
      acknowledged.push(res.body.asset.id);
    }
  })();
  return {
    acknowledged,
    atLeast: async (n: number) => {
      while (acknowledged.length < n) await new Promise((r) => setTimeout(r, 20));
    },
    stop: async () => {
      stopped = true;
      await done;
    },
  };
};

/** Every asset id the key's tenant has, page by page. */
const allAssetIds = async (url: string, key: string) => {
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const page: Reply = await call(url, `/v1/assets?limit=100${cursor ? `&cursor=${cursor}` : ""}`, {
      headers: { "x-api-key": key },
    });
    expect(page.status).toBe(200);
    ids.push(...page.body.data.map((a: { id: string }) => a.id));
    cursor = page.body.next_cursor;
  } while (cursor);
  return ids;
};

const sha256 = async (file: string) =>
  createHash("sha256")
    .update(await readFile(file))
    .digest("hex");

interface Manifest {
  readonly engine: string;
  readonly dump: { readonly sha256: string; readonly bytes: number };
  readonly tables: Record<string, number>;
}

describe("vod backup / vod restore of the embedded default", () => {
  const scratch = suiteScratch("vod-backup-");

  it("a backup taken while a writer creates assets restores into an empty data dir: every acknowledged asset, the key, sign-in, and a ready asset that plays", async () => {
    const source = await scratch.dir();
    const host = await scratch.serve({ VOD_DATA_DIR: source });
    const owner = await tenant(host.url);
    const auth = { "x-api-key": owner.key };
    await makeVideo(join(source, "src.mp4"), { width: 320, height: 240, seconds: 2 });
    const played = (await uploadAsset(host.url, auth, await readFile(join(source, "src.mp4")), "played"))
      .assetId;
    expect((await settledAsset(host.url, auth, played)).status).toBe("ready");

    const writing = writer(host.url, owner.key);
    await writing.atLeast(5);
    const before = [...writing.acknowledged];
    const file = join(await scratch.dir(), "embedded.tar.gz");
    const backup = await vod(["backup", file], { VOD_DATA_DIR: source });
    await writing.stop();
    expect(backup.code).toBe(0);
    expect(backup.output).toContain(`vod backup: wrote ${file} (pglite,`);
    expect(backup.output).toContain(`vod backup: NOT in the backup: objects under ${source}/objects`);

    const manifest = JSON.parse(await readFile(`${file}.manifest.json`, "utf8")) as Manifest;
    expect(manifest.engine).toBe("pglite");
    expect(manifest.dump.sha256).toBe(await sha256(file));
    // Some of the writes made while it ran may be in it too, none after it ended.
    expect(manifest.tables["public.assets"]).toBeGreaterThanOrEqual(before.length + 1);
    expect(manifest.tables["public.assets"]).toBeLessThanOrEqual(writing.acknowledged.length + 1);
    expect(manifest.tables["public.api_keys"]).toBe(1);

    const target = await scratch.dir();
    const restored = await vod(["restore", file], { VOD_DATA_DIR: target });
    expect(restored.code).toBe(0);
    expect(restored.output).toContain("as the manifest says");
    const again = await vod(["restore", file], { VOD_DATA_DIR: target });
    expect(again.code).toBe(1);
    expect(again.output).toContain(`${target}/pglite holds a database already`);

    // What the backup says it leaves out, carried over as the docs say: objects and secrets.
    await cp(join(source, "objects"), join(target, "objects"), { recursive: true });
    for (const secret of ["signing-keys.json", "drm-master-key", "cursor-secret", "upload-url-secret"])
      await copyFile(join(source, secret), join(target, secret));
    const restoredHost = await scratch.serve({ VOD_DATA_DIR: target });
    const login = await call(restoredHost.url, "/v1/auth/login", { body: { email: owner.email, password } });
    expect(login.status).toBe(200);
    // The session of the signup, from before the backup, goes on.
    const refreshed = await call(restoredHost.url, "/v1/auth/refresh", {
      body: { refresh_token: owner.refreshToken },
    });
    expect(refreshed.status).toBe(200);
    const ids = await allAssetIds(restoredHost.url, owner.key);
    expect(ids).toEqual(expect.arrayContaining([...before, played]));
    expect(ids.length).toBe(manifest.tables["public.assets"]);

    const session = await call(restoredHost.url, "/v1/playback/sessions", {
      body: { asset_id: played },
      headers: auth,
    });
    expect(session.status).toBe(201);
    const { stdout } = await run("ffprobe", [
      "-v",
      "error",
      "-print_format",
      "json",
      "-show_streams",
      session.body.urls.manifest,
    ]);
    const streams = JSON.parse(stdout).streams as Array<{ codec_type: string; height?: number }>;
    expect(streams.some((s) => s.codec_type === "video" && s.height === 240)).toBe(true);

    // Replacing a served data directory is refused, naming the host.
    const forced = await vod(["restore", "--force", file], { VOD_DATA_DIR: target });
    expect(forced.code).toBe(1);
    expect(forced.output).toContain(`is in use by process ${restoredHost.child.pid}`);

    // A damaged backup is not restored.
    const damaged = join(await scratch.dir(), "damaged.tar.gz");
    const bytes = await readFile(file);
    bytes[bytes.length >> 1] = (bytes[bytes.length >> 1] ?? 0) ^ 0xff;
    await writeFile(damaged, bytes);
    await copyFile(`${file}.manifest.json`, `${damaged}.manifest.json`);
    const refused = await vod(["restore", damaged], { VOD_DATA_DIR: await scratch.dir() });
    expect(refused.code).toBe(1);
    expect(refused.output).toContain("does not match its manifest");
  }, 300_000);
});

describeWith(["database"], "vod backup / vod restore of a Postgres server", ({ databaseUrl }) => {
  const scratch = suiteScratch("vod-backup-pg-");

  it("a pg_dump taken while a writer creates assets restores into an empty database: every acknowledged asset, the key and sign-in", async () => {
    const schema = scratch.schemas(databaseUrl, "vod_bk").fresh();
    const secrets = await deploymentSecrets();
    const sourceEnv = { ...secrets, VOD_DATABASE_URL: databaseUrl, VOD_DATABASE_SCHEMA: schema };
    const host = await scratch.serve({ ...sourceEnv, VOD_DATA_DIR: await scratch.dir() });
    const owner = await tenant(host.url);

    const writing = writer(host.url, owner.key);
    await writing.atLeast(5);
    const before = [...writing.acknowledged];
    const file = join(await scratch.dir(), "server.dump");
    const backup = await vod(["backup", file], { ...sourceEnv, VOD_DATA_DIR: await scratch.dir() });
    await writing.stop();
    expect(backup.code).toBe(0);
    expect(backup.output).toContain(`vod backup: wrote ${file} (postgres,`);
    const manifest = JSON.parse(await readFile(`${file}.manifest.json`, "utf8")) as Manifest;
    expect(manifest.dump.sha256).toBe(await sha256(file));
    expect(manifest.tables[`${schema}.assets`]).toBeGreaterThanOrEqual(before.length);
    expect(manifest.tables[`${schema}.assets`]).toBeLessThanOrEqual(writing.acknowledged.length);
    expect(Object.keys(manifest.tables)).toContain(`${schema}_jobs.job`);

    // An empty database of the test's own on the shared server, dropped after.
    const database = `vod_restore_${randomBytes(5).toString("hex")}`;
    const admin = connectPostgres({ connectionString: databaseUrl, poolSize: 1 });
    await admin.exec(`CREATE DATABASE ${database}`);
    scratch.afterwards(async () => {
      await admin.exec(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await admin.exec(`DROP ROLE IF EXISTS "${appRoleName(database, schema)}"`);
      await admin.close();
    });
    const targetUrl = new URL(databaseUrl);
    targetUrl.pathname = `/${database}`;
    const targetEnv = { ...secrets, VOD_DATABASE_URL: targetUrl.href, VOD_DATABASE_SCHEMA: schema };

    const restored = await vod(["restore", file], { ...targetEnv, VOD_DATA_DIR: await scratch.dir() });
    expect(restored.output).toContain("as the manifest says");
    expect(restored.code).toBe(0);
    const again = await vod(["restore", file], { ...targetEnv, VOD_DATA_DIR: await scratch.dir() });
    expect(again.code).toBe(1);
    expect(again.output).toContain(`${database} holds`);

    const restoredHost = await scratch.serve({ ...targetEnv, VOD_DATA_DIR: await scratch.dir() });
    const login = await call(restoredHost.url, "/v1/auth/login", { body: { email: owner.email, password } });
    expect(login.status).toBe(200);
    // Tenant reads run as this database's app role, under row-level security: its rights came over.
    const ids = await allAssetIds(restoredHost.url, owner.key);
    expect(ids).toEqual(expect.arrayContaining(before));
    expect(ids.length).toBe(manifest.tables[`${schema}.assets`]);
    const created = await call(restoredHost.url, "/v1/assets", {
      body: { title: "after restore" },
      headers: { "x-api-key": owner.key },
    });
    expect(created.status).toBe(201);
  }, 300_000);
});

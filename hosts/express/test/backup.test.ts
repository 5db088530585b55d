import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { copyFile, cp, readdir, readFile, writeFile } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { promisify } from "node:util";
import { appRoleName, connectPostgres } from "@vod/adapter-postgres";
import { describe, expect, it } from "vitest";
import { describeWith, suiteScratch } from "./suites.js";
import {
  call,
  cli,
  deploymentSecrets,
  freePort,
  makeVideo,
  type Reply,
  settledAsset,
  stop,
  uploadAsset,
} from "./support.js";

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
 * (201), in order; with `parts`, every other asset gets an upload and its one part sent, and
 * the upload whose part PUT the host acknowledged (200) is kept too.
 */
const writer = (url: string, key: string, options: { readonly parts?: boolean } = {}) => {
  const acknowledged: string[] = [];
  const uploaded: Array<{ readonly uploadId: string; readonly bytes: number }> = [];
  let stopped = false;
  const headers = { "x-api-key": key };
  const done = (async () => {
    for (let i = 0; !stopped; i++) {
      const res = await call(url, "/v1/assets", { body: { title: `w${i}` }, headers });
      if (res.status !== 201) throw new Error(`writer: ${res.status} ${JSON.stringify(res.body)}`);
      acknowledged.push(res.body.asset.id);
      if (!options.parts || i % 2 === 1) continue;
      const bytes = randomBytes(1_000 + i);
      const started = await call(url, "/v1/uploads", {
        body: { asset_id: res.body.asset.id, size_bytes: bytes.length },
        headers,
      });
      if (started.status !== 201) throw new Error(`writer: start ${started.status}`);
      const put = await fetch(started.body.upload.parts[0].url, { method: "PUT", body: bytes });
      if (put.status !== 200) throw new Error(`writer: part ${put.status}`);
      uploaded.push({ uploadId: started.body.upload.id, bytes: bytes.length });
    }
  })();
  return {
    acknowledged,
    uploaded,
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
  readonly format: string;
  readonly engine: string;
  readonly database: { readonly file: string; readonly sha256: string; readonly bytes: number };
  readonly tables: Record<string, number>;
  readonly objects: { readonly count: number; readonly bytes: number; readonly sha256: string } | null;
}

/** Every file under `dir`, as `/`-separated paths relative to it, sorted. */
const filesUnder = async (dir: string) =>
  (await readdir(dir, { recursive: true, withFileTypes: true }))
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)).split(sep).join("/"))
    .sort();

describe("vod backup / vod restore of the embedded default", () => {
  const scratch = suiteScratch("vod-backup-");

  it("a backup taken while a writer creates assets and uploads parts restores into an empty data dir: every acknowledged asset, part, key and session, sign-in, and a ready asset that plays; the manifest's counts and checksums hold", async () => {
    const source = await scratch.dir();
    // The restored host serves on the same port: tokens name the host's URL as issuer and audience.
    const port = await freePort();
    const host = await scratch.serve({ VOD_DATA_DIR: source }, port);
    const owner = await tenant(host.url);
    const auth = { "x-api-key": owner.key };
    await makeVideo(join(source, "src.mp4"), { width: 320, height: 240, seconds: 2 });
    const played = (await uploadAsset(host.url, auth, await readFile(join(source, "src.mp4")), "played"))
      .assetId;
    expect((await settledAsset(host.url, auth, played)).status).toBe("ready");
    const session = await call(host.url, "/v1/playback/sessions", {
      body: { asset_id: played },
      headers: auth,
    });
    expect(session.status).toBe(201);

    const writing = writer(host.url, owner.key, { parts: true });
    await writing.atLeast(6);
    const before = [...writing.acknowledged];
    const partsBefore = [...writing.uploaded];
    const dir = join(await scratch.dir(), "embedded-backup");
    const backup = await vod(["backup", dir], { VOD_DATA_DIR: source });
    await writing.stop();
    expect(backup.code).toBe(0);
    expect(backup.output).toContain(`vod backup: wrote ${dir}: the database (pglite,`);
    expect(backup.output).not.toContain("NOT in the backup: objects");

    const manifest = JSON.parse(await readFile(join(dir, "manifest.json"), "utf8")) as Manifest;
    expect(manifest.format).toBe("vod-backup/2");
    expect(manifest.engine).toBe("pglite");
    expect(manifest.database.sha256).toBe(await sha256(join(dir, manifest.database.file)));
    expect(manifest.database.bytes).toBe((await readFile(join(dir, manifest.database.file))).length);
    // Some of the writes made while it ran may be in it too, none after it ended.
    expect(manifest.tables["public.assets"]).toBeGreaterThanOrEqual(before.length + 1);
    expect(manifest.tables["public.assets"]).toBeLessThanOrEqual(writing.acknowledged.length + 1);
    expect(manifest.tables["public.api_keys"]).toBe(1);
    // The objects' list: one line per file copied, each file's sha256 as it is in the backup.
    const list = await readFile(join(dir, "objects.sha256"), "utf8");
    expect(createHash("sha256").update(list).digest("hex")).toBe(manifest.objects?.sha256);
    const lines = list.trimEnd().split("\n");
    expect(lines.length).toBe(manifest.objects?.count);
    expect(await filesUnder(join(dir, "objects"))).toEqual(
      lines.map((l) => l.slice(66 + "objects/".length)).sort(),
    );
    let bytes = 0;
    for (const line of lines) {
      const [hash, path] = line.split("  ");
      const file = join(dir, path ?? "");
      expect(await sha256(file)).toBe(hash);
      bytes += (await readFile(file)).length;
    }
    expect(bytes).toBe(manifest.objects?.bytes);
    expect(lines.some((l) => l.endsWith(`/${played}/master.m3u8`))).toBe(true);

    const target = await scratch.dir();
    const restored = await vod(["restore", dir], { VOD_DATA_DIR: target });
    expect(restored.code).toBe(0);
    expect(restored.output).toContain(
      `${manifest.objects?.count} object files into ${target}/objects, as the manifest says`,
    );
    const again = await vod(["restore", dir], { VOD_DATA_DIR: target });
    expect(again.code).toBe(1);
    expect(again.output).toContain(`${target}/objects holds objects already`);

    // The keys and secrets the backup leaves out, carried over as the docs say.
    for (const secret of ["signing-keys.json", "drm-master-key", "cursor-secret", "upload-url-secret"])
      await copyFile(join(source, secret), join(target, secret));
    expect(await stop(host)).toBe(0);
    const restoredHost = await scratch.serve({ VOD_DATA_DIR: target }, port);
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
    // Every part acknowledged before the backup is there, with its size.
    expect(partsBefore.length).toBeGreaterThanOrEqual(3);
    for (const { uploadId, bytes: size } of partsBefore) {
      const resumed = await call(restoredHost.url, `/v1/uploads/${uploadId}`, { headers: auth });
      expect(resumed.status).toBe(200);
      expect(resumed.body.upload.uploaded_parts).toEqual([expect.objectContaining({ number: 1, size })]);
    }

    // The playback session minted before the backup plays from the restored data dir.
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
    const forced = await vod(["restore", "--force", dir], { VOD_DATA_DIR: target });
    expect(forced.code).toBe(1);
    expect(forced.output).toContain(`is in use by process ${restoredHost.child.pid}`);

    // A damaged backup restores nothing: a changed object, or a changed database file.
    const damaged = join(await scratch.dir(), "damaged");
    await cp(dir, damaged, { recursive: true });
    const [, firstPath] = (lines[0] ?? "").split("  ");
    const objectBytes = await readFile(join(damaged, firstPath ?? ""));
    objectBytes[0] = (objectBytes[0] ?? 0) ^ 0xff;
    await writeFile(join(damaged, firstPath ?? ""), objectBytes);
    const empty = await scratch.dir();
    const refusedObject = await vod(["restore", damaged], { VOD_DATA_DIR: empty });
    expect(refusedObject.code).toBe(1);
    expect(refusedObject.output).toContain(`${firstPath} does not match objects.sha256`);
    expect(await readdir(empty)).toEqual([]);
    const database = await readFile(join(damaged, manifest.database.file));
    database[database.length >> 1] = (database[database.length >> 1] ?? 0) ^ 0xff;
    await writeFile(join(damaged, manifest.database.file), database);
    const refusedDatabase = await vod(["restore", damaged], { VOD_DATA_DIR: empty });
    expect(refusedDatabase.code).toBe(1);
    expect(refusedDatabase.output).toContain("does not match the manifest");
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
    const file = join(await scratch.dir(), "server-backup");
    const backup = await vod(["backup", file], { ...sourceEnv, VOD_DATA_DIR: await scratch.dir() });
    await writing.stop();
    expect(backup.code).toBe(0);
    expect(backup.output).toContain(`vod backup: wrote ${file}: the database (postgres,`);
    const manifest = JSON.parse(await readFile(join(file, "manifest.json"), "utf8")) as Manifest;
    expect(manifest.database.sha256).toBe(await sha256(join(file, "database.dump")));
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

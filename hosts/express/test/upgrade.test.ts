import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { migrations, openPglite } from "@vod/adapter-postgres";
import { describe, expect, it } from "vitest";
import { suiteScratch } from "./suites.js";
import { call, stop } from "./support.js";

const fixtures = fileURLToPath(new URL("./fixtures/", import.meta.url));

describe("upgrade: a data directory written by the previous version", () => {
  const scratch = suiteScratch("vod-upgrade-");

  it("opens with this version, which migrates it forward and serves its accounts, key and assets", async () => {
    const made = JSON.parse(await readFile(join(fixtures, "upgrade-9ba0b2c.json"), "utf8")) as {
      email: string;
      password: string;
      api_key: string;
      api_key_id: string;
      tenant_id: string;
      assets: string[];
    };
    const dataDir = await scratch.dir();
    // The fixture is a dump of that version's database: loaded into a new cluster, it is the
    // database that version left, rows, sequences, job queue and migrations table included.
    const loading = await openPglite(join(dataDir, "pglite"));
    try {
      await loading.exec("CREATE ROLE vod_app_postgres_public NOLOGIN NOINHERIT");
      await loading.exec(await readFile(join(fixtures, "upgrade-9ba0b2c.sql"), "utf8"));
      const { rows } = await loading.query<{ version: number }>(
        "SELECT version FROM public.vod_migrations ORDER BY version",
      );
      expect(rows.map((r) => r.version)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    } finally {
      await loading.close();
    }

    const host = await scratch.serve({ VOD_DATA_DIR: dataDir });
    const login = await call(host.url, "/v1/auth/login", {
      body: { email: made.email, password: made.password },
    });
    expect(login.status).toBe(200);
    expect(login.body.user.tenant_id).toBe(made.tenant_id);
    const auth = { "x-api-key": made.api_key };
    const keys = await call(host.url, "/v1/api-keys", { headers: auth });
    expect(keys.status).toBe(200);
    expect(keys.body.data.map((k: { id: string }) => k.id)).toEqual([made.api_key_id]);
    const assets = await call(host.url, "/v1/assets", { headers: auth });
    expect(assets.status).toBe(200);
    expect(assets.body.data.map((a: { id: string; title: string }) => [a.id, a.title])).toEqual([
      [made.assets[2], "Third"],
      [made.assets[1], "Second, renamed"],
      [made.assets[0], "First"],
    ]);
    const created = await call(host.url, "/v1/assets", {
      body: { title: "after the upgrade" },
      headers: auth,
    });
    expect(created.status).toBe(201);
    expect(await stop(host)).toBe(0);

    // Every migration of this version applied, once.
    const after = await openPglite(join(dataDir, "pglite"));
    try {
      const { rows } = await after.query<{ version: number }>(
        "SELECT version FROM vod_migrations ORDER BY version",
      );
      expect(rows.map((r) => r.version)).toEqual(migrations.map((m) => m.version));
    } finally {
      await after.close();
    }
  }, 180_000);
});

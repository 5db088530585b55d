import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { suiteScratch } from "./suites.js";
import { call, cli, exited, freePort, spawnCli, stop } from "./support.js";

/** `vod ARGS` as an operator runs it beside the host: its exit code and what it printed. */
const vod = async (args: ReadonlyArray<string>, env: Record<string, string>) => {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [cli, ...args], {
      env: { ...process.env, VOD_LOG_LEVEL: "silent", ...env },
    });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? -1, output: `${failed.stdout ?? ""}${failed.stderr ?? ""}` };
  }
};

describe("one process per data directory on the embedded default", () => {
  const scratch = suiteScratch("vod-one-writer-");

  it("vod tenant suspend and delete beside vod serve: the host refuses the tenant at its next request, and after a restart; the host's worker removes a deleted tenant", async () => {
    const dataDir = await scratch.dir();
    const env = { VOD_DATA_DIR: dataDir };
    // The same port across the restart: the tokens' issuer is derived from it.
    const port = await freePort();
    const host = await scratch.serve(env, port);
    const email = `writer-${Date.now()}@example.com`;
    const signup = await call(host.url, "/v1/auth/signup", {
      body: { email, password: "correct horse battery" },
    });
    expect(signup.status).toBe(201);
    const tenantId: string = signup.body.tenant.id;
    const key = await call(host.url, "/v1/api-keys", {
      body: { name: "ci", scopes: ["admin"] },
      headers: { authorization: `Bearer ${signup.body.access_token}` },
    });
    expect(key.status).toBe(201);
    const auth = { "x-api-key": key.body.key as string };
    expect((await call(host.url, "/v1/assets", { body: { title: "before" }, headers: auth })).status).toBe(
      201,
    );

    const suspended = await vod(["tenant", "suspend", tenantId], env);
    expect(suspended).toEqual({ code: 0, output: `vod tenant suspend: ${tenantId} is suspended\n` });
    // The very next request, with the key the host has cached as good.
    const refused = await call(host.url, "/v1/assets", { body: { title: "after" }, headers: auth });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ code: "forbidden", message: "tenant is suspended" });
    expect(exited(host)).toBe(false);

    expect(await stop(host)).toBe(0);
    const restarted = await scratch.serve(env, port);
    const still = await call(restarted.url, "/v1/assets", { headers: auth });
    expect(still.status).toBe(403);
    expect(still.body.message).toBe("tenant is suspended");

    const activated = await vod(["tenant", "activate", tenantId], env);
    expect(activated).toEqual({ code: 0, output: `vod tenant activate: ${tenantId} is active\n` });
    const listed = await call(restarted.url, "/v1/assets", { headers: auth });
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((a: { title: string }) => a.title)).toEqual(["before"]);

    const deleted = await vod(["tenant", "delete", tenantId], env);
    expect(deleted.code).toBe(0);
    expect(deleted.output).toContain(`vod tenant delete: ${tenantId} is deleted\n`);
    const gone = await call(restarted.url, "/v1/assets", { headers: auth });
    expect(gone.status).toBe(401);
    // The host's own worker runs the job the command enqueued: once the rows are gone, the email
    // signs up again (409 while its user row is there).
    let again: Awaited<ReturnType<typeof call>> | undefined;
    for (let i = 0; i < 15 && again?.status !== 201; i++) {
      await new Promise((r) => setTimeout(r, 500));
      again = await call(restarted.url, "/v1/auth/signup", {
        body: { email, password: "correct horse battery" },
      });
    }
    expect(again?.status).toBe(201);
    expect(again?.body.tenant.id).not.toBe(tenantId);
    expect(exited(restarted)).toBe(false);
  }, 180_000);

  it("a second vod serve on a served data directory is refused, naming the host's pid; vod migrate goes through; the host serves on", async () => {
    const dataDir = await scratch.dir();
    const env = { VOD_DATA_DIR: dataDir };
    const host = await scratch.serve(env);
    const pid = host.child.pid;

    const second = spawnCli("serve", { ...env, PORT: String(await freePort()), VOD_HOST: "127.0.0.1" });
    const code = await new Promise((resolve) => second.child.once("exit", resolve));
    expect(code).toBe(1);
    expect(second.output()).toContain(
      `vod serve: the data directory ${dataDir}/pglite is in use by process ${pid}`,
    );

    const migrated = await vod(["migrate"], env);
    expect(migrated).toEqual({ code: 0, output: "vod migrate: up to date\n" });
    expect((await fetch(`${host.url}/healthz`)).status).toBe(200);
    expect(exited(host)).toBe(false);
  }, 120_000);
});

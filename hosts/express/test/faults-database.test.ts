import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { connectPostgres } from "@vod/adapter-postgres";
import { expect, it } from "vitest";
import { describeWith, suiteScratch } from "./suites.js";
import { call, makeVideo, type Reply, settledAsset, signUp, uploadAsset } from "./support.js";

/** The connection string with an application_name of its own: the one way to tell this host's connections apart. */
const withApplicationName = (url: string, name: string) =>
  `${url}${url.includes("?") ? "&" : "?"}application_name=${name}`;

describeWith(["database"], "database connections cut under load (postgres server)", ({ databaseUrl }) => {
  const scratch = suiteScratch("vod-fault-db-");
  const schemas = scratch.schemas(databaseUrl, "vod_fault");
  const admin = connectPostgres({
    connectionString: databaseUrl,
    poolSize: 1,
    applicationName: "vod-fault-admin",
  });
  scratch.afterwards(() => admin.close());

  it("keeps the process up, answers 503 storage_error at most, recovers, leaves no partial row, and the job still finishes", async () => {
    const dataDir = await scratch.dir();
    const appName = `vod_fault_${randomBytes(6).toString("hex")}`;
    const schema = schemas.fresh();
    const host = await scratch.serve({
      VOD_DATA_DIR: dataDir,
      VOD_DATABASE_URL: withApplicationName(databaseUrl, appName),
      VOD_DATABASE_SCHEMA: schema,
      VOD_DATABASE_POOL_SIZE: "6",
      VOD_LOG_LEVEL: "info",
      VOD_WORKER_CONCURRENCY: "1",
      // A job whose outcome was lost with its connection comes back after its lease: short here.
      VOD_JOB_LEASE_SECONDS: "10",
      VOD_JOB_MAINTENANCE_SECONDS: "1",
      VOD_JOB_RETRY_DELAY_SECONDS: "1",
      VOD_RATE_LIMIT_AUTH_PER_MINUTE: "100000",
    });
    const alive = () => host.child.exitCode === null && host.child.signalCode === null;

    const auth = await signUp(host.url, "fault");
    const source = join(dataDir, "clip.mp4");
    await makeVideo(source, { width: 640, height: 360, seconds: 6 });
    const { assetId } = await uploadAsset(host.url, auth, await readFile(source), "under fire");

    // The faults: every connection of this host (and only of this host) terminated, several times.
    const terminate = async () =>
      (
        await admin.query<{ killed: boolean }>(
          `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
             WHERE application_name = $1 AND pid <> pg_backend_pid()`,
          [appName],
        )
      ).rows.length;
    let load = true;
    let killed = 0;
    const faults = (async () => {
      // Wait for the job to be running, so that its connection is among those terminated.
      const until = Date.now() + 60_000;
      while (
        (await call(host.url, `/v1/assets/${assetId}`, { headers: auth })).body.asset.status === "uploaded"
      ) {
        if (Date.now() > until) throw new Error("the job never started");
        await new Promise((r) => setTimeout(r, 50));
      }
      for (let round = 0; round < 6; round++) {
        killed += await terminate();
        await new Promise((r) => setTimeout(r, 250));
      }
      load = false;
    })();

    // The load: signups (each a transaction of several rows) and asset creates, concurrently.
    const replies: Array<{ what: string; reply: Reply }> = [];
    const attempt = async (what: string, request: () => Promise<Reply>) => {
      // No answer at all (the process died, or hung up): recorded as status 0, and the load stops.
      const reply = await request().catch(
        (error: Error): Reply => ({ status: 0, body: { message: error.message }, headers: new Headers() }),
      );
      replies.push({ what, reply });
      if (reply.status === 0) load = false;
    };
    const signups = async (lane: number) => {
      for (let i = 0; load; i++)
        await attempt("signup", () =>
          call(host.url, "/v1/auth/signup", {
            body: {
              email: `fault-${lane}-${i}-${randomBytes(3).toString("hex")}@example.com`,
              password: "correct horse battery",
            },
          }),
        );
    };
    const creates = async (lane: number) => {
      for (let i = 0; load; i++)
        await attempt("create asset", () =>
          call(host.url, "/v1/assets", { body: { title: `load ${lane}-${i}` }, headers: auth }),
        );
    };
    await Promise.all([faults, signups(1), signups(2), signups(3), creates(1), creates(2)]);

    expect(alive(), host.output().slice(-2_000)).toBe(true);
    expect(killed).toBeGreaterThan(0);
    // Every reply is the spec's: a success, a client error, or 503 storage_error; never a 500.
    const unexpected = replies.filter(
      ({ reply }) =>
        !(
          (reply.status >= 200 && reply.status < 500) ||
          (reply.status === 503 && reply.body?.code === "storage_error")
        ),
    );
    expect(
      unexpected.map(({ what, reply }) => `${what}: ${reply.status} ${JSON.stringify(reply.body)}`),
    ).toEqual([]);
    expect(replies.filter(({ reply }) => reply.status < 300).length).toBeGreaterThan(0);

    // After the faults, requests succeed again.
    const after = await signUp(host.url, "after");
    const created = await call(host.url, "/v1/assets", { body: { title: "after" }, headers: after });
    expect(created.status).toBe(201);
    expect((await call(host.url, "/v1/assets", { headers: auth })).status).toBe(200);

    // The job was retried or survived: the asset reaches ready.
    const asset = await settledAsset(host.url, auth, assetId, 150_000);
    expect(asset).toMatchObject({ status: "ready", source_width: 640, source_height: 360 });

    // No partial rows: every tenant has its owner, every refresh session its token, every
    // successful signup its user.
    const orphans = await admin.query<{ what: string; n: number }>(
      `SELECT 'tenant without owner' AS what, count(*)::int AS n FROM ${schema}.tenants t
           WHERE NOT EXISTS (SELECT 1 FROM ${schema}.users u WHERE u.tenant_id = t.id AND u.role = 'owner')
         UNION ALL
         SELECT 'refresh session without token', count(*)::int FROM ${schema}.refresh_sessions s
           WHERE NOT EXISTS (SELECT 1 FROM ${schema}.refresh_tokens r WHERE r.session_id = s.id)`,
    );
    expect(orphans.rows).toEqual([
      { what: "tenant without owner", n: 0 },
      { what: "refresh session without token", n: 0 },
    ]);
    const signedUp = replies
      .filter(({ what, reply }) => what === "signup" && reply.status === 201)
      .map(({ reply }) => reply.body.user.email as string);
    const users = await admin.query<{ email: string }>(`SELECT email FROM ${schema}.users`);
    const stored = new Set(users.rows.map((u) => u.email));
    expect(signedUp.filter((email) => !stored.has(email))).toEqual([]);

    // A dropped connection is an expected refusal: no crash report, no error line per request,
    // a warning once per outage (at most one per round of terminations).
    expect(host.output()).not.toMatch(/Unhandled|uncaught/i);
    const lines = host
      .output()
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as { level: number; msg: string });
    expect(lines.filter((l) => l.level >= 50)).toEqual([]);
    const warned = lines.filter((l) => l.msg === "database connection lost");
    expect(warned.length).toBeGreaterThanOrEqual(1);
    expect(warned.length).toBeLessThanOrEqual(6);
    expect(warned.every((l) => l.level === 40)).toBe(true);
    expect(alive()).toBe(true);
  }, 240_000);
});

import { execFile } from "node:child_process";
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { connectPostgres, migrations } from "@vod/adapter-postgres";
import { jobNames } from "@vod/core";
import { beforeAll, expect, it } from "vitest";
import { describeWith, suiteScratch } from "./suites.js";
import {
  cli,
  deploymentSecrets,
  eventually,
  exited,
  freePort,
  healthy,
  makeVideo,
  settledAsset,
  signUp,
  stop,
  uploadAsset,
} from "./support.js";

/** Cold starts in this file: each on a new schema, each four processes at once. */
const coldStarts = 3;

describeWith(
  ["database"],
  "two hosts and two workers started together on a new database (postgres server)",
  ({ databaseUrl }) => {
    const scratch = suiteScratch("vod-cold-");
    const schemas = scratch.schemas(databaseUrl, "vod_cold");
    let root: string;
    let video: Uint8Array;
    // The secrets every process of one deployment shares, given rather than made per data directory.
    let secrets: Record<string, string>;

    beforeAll(async () => {
      root = await scratch.dir();
      await makeVideo(join(root, "clip.mp4"), { width: 160, height: 120, seconds: 1, fps: 10 });
      video = await readFile(join(root, "clip.mp4"));
      secrets = await deploymentSecrets();
    });

    it("vod migrate, run twice at once as a deploy step, sets up the tables and the job queue", async () => {
      const schema = schemas.fresh();
      const env = {
        ...process.env,
        VOD_DATA_DIR: root,
        VOD_DATABASE_URL: databaseUrl,
        VOD_DATABASE_SCHEMA: schema,
        VOD_JOB_MAX_ATTEMPTS: "5",
      };
      const run = () => promisify(execFile)(process.execPath, [cli, "migrate"], { env });
      const outputs = (await Promise.all([run(), run()])).map((r) => r.stdout.trim()).sort();
      const all = migrations.map((m) => m.version);
      // One applied everything, the other waited for the lock and found it done.
      expect(outputs).toEqual([
        `vod migrate: applied ${all.join(", ")} (postgres)`,
        "vod migrate: up to date",
      ]);
      const db = connectPostgres({ connectionString: databaseUrl, poolSize: 1 });
      try {
        const queues = await db.query(`SELECT name, retry_limit FROM ${schema}_jobs.queue ORDER BY name`);
        expect(queues.rows).toEqual([...jobNames].sort().map((name) => ({ name, retry_limit: 4 })));
        const versions = await db.query(`SELECT version FROM ${schema}.vod_migrations ORDER BY version`);
        expect(versions.rows).toEqual(all.map((version) => ({ version })));
      } finally {
        await db.close();
      }
    }, 60_000);

    for (let round = 1; round <= coldStarts; round++) {
      it(`cold start ${round} of ${coldStarts}: all four come up and stay up, and one upload is processed exactly once`, async () => {
        const schema = schemas.fresh();
        const dir = join(root, `start-${round}`);
        const objects = join(dir, "objects");
        await mkdir(objects, { recursive: true });
        const [portA, portB] = [await freePort(), await freePort()];
        // One public address for the deployment, as behind a load balancer: a token issued by
        // one host is good at the other, and upload URLs point at host A.
        const publicUrl = `http://localhost:${portA}`;
        const common = {
          ...secrets,
          VOD_DATABASE_URL: databaseUrl,
          VOD_DATABASE_SCHEMA: schema,
          VOD_OBJECTS_DIR: objects,
          VOD_BASE_URL: publicUrl,
          VOD_MEDIA_URL: publicUrl,
          VOD_DRM_URL: publicUrl,
          VOD_LOG_LEVEL: "info",
          VOD_HOST: "127.0.0.1",
        };
        const envOf = async (name: string, extra: Record<string, string>) => {
          await mkdir(join(dir, name));
          return { ...common, VOD_DATA_DIR: join(dir, name), ...extra };
        };
        // API hosts run no jobs, as in the server set; the workers are processes of their own.
        const envs = {
          hostA: await envOf("host-a", { PORT: String(portA), VOD_WORKER_CONCURRENCY: "0" }),
          hostB: await envOf("host-b", { PORT: String(portB), VOD_WORKER_CONCURRENCY: "0" }),
          workerA: await envOf("worker-a", {}),
          workerB: await envOf("worker-b", {}),
        };

        // All four in the same tick: the moment after a deploy, when every instance starts.
        const hostA = scratch.spawn("serve", envs.hostA);
        const hostB = scratch.spawn("serve", envs.hostB);
        const workerA = scratch.spawn("worker", envs.workerA);
        const workerB = scratch.spawn("worker", envs.workerB);
        const four = [hostA, hostB, workerA, workerB];

        const outcomes = await Promise.allSettled([
          healthy(hostA, `http://127.0.0.1:${portA}`),
          healthy(hostB, `http://127.0.0.1:${portB}`),
          workerA.waitFor('"msg":"worker started"'),
          workerB.waitFor('"msg":"worker started"'),
        ]);
        const failures = outcomes.flatMap((o) => (o.status === "rejected" ? [String(o.reason)] : []));
        expect(failures, `${failures.length} of 4 processes did not come up`).toEqual([]);

        const auth = await signUp(`http://127.0.0.1:${portA}`, `cold${round}`);
        const { assetId } = await uploadAsset(`http://127.0.0.1:${portB}`, auth, video, "cold");
        const asset = await settledAsset(`http://127.0.0.1:${portB}`, auth, assetId, 90_000);
        expect(asset).toMatchObject({ status: "ready", source_width: 160, source_height: 120 });
        const logged = (msg: string) =>
          [workerA, workerB].flatMap((w) =>
            w
              .output()
              .split("\n")
              .filter((line) => line.includes(`"msg":"${msg}"`) && line.includes(assetId)),
          );
        // The asset turns ready a moment before its worker logs the end.
        await eventually("a worker logging the end of the job", () => logged("processing done").length > 0);

        // None of the four left while the job ran.
        expect(four.filter(exited).map((s) => s.output())).toEqual([]);

        // One job for the asset, completed on its first run, started by exactly one worker.
        const db = connectPostgres({ connectionString: databaseUrl, poolSize: 1 });
        try {
          const { rows } = await db.query<{ state: string; retry_count: number }>(
            `SELECT state, retry_count FROM ${schema}_jobs.job
             WHERE name = 'process-asset' AND data->>'asset_id' = $1`,
            [assetId],
          );
          expect(rows).toEqual([{ state: "completed", retry_count: 0 }]);
        } finally {
          await db.close();
        }
        expect(logged("processing started")).toHaveLength(1);

        // And each stops cleanly when told to.
        expect(await Promise.all(four.map((s) => stop(s)))).toEqual([0, 0, 0, 0]);
      }, 120_000);
    }
  },
);

import { randomBytes } from "node:crypto";
import { mkdir, readFile } from "node:fs/promises";
import { connect } from "node:net";
import { join } from "node:path";
import { connectPostgres } from "@vod/adapter-postgres";
import { redisBackdoor } from "@vod/adapter-redis/testing";
import { createGcsTestServer, type GcsTestServer } from "@vod/test-services";
import { beforeAll, expect, it } from "vitest";
import { describeWith, suiteScratch } from "./suites.js";
import {
  assetReads,
  call,
  deploymentSecrets,
  eventually,
  exited,
  freePort,
  makeVideo,
  type Spawned,
  settledAsset,
  signUp,
} from "./support.js";

type Host = Spawned & { readonly url: string };

const OPS_TOKEN = "ops-token-of-the-many-machines-test";
type Auth = Record<string, string>;

// A deployment as the gcp set runs it: API/media hosts and workers on separate machines, sharing
// nothing but the database, Redis and the bucket (each process has a data directory of its own).
// Both hosts answer on one public address, as behind a load balancer; the test talks to each.
describeWith(
  ["database", "redis"],
  "two hosts and two workers on one Postgres, one Redis and one bucket (postgres server, redis, GCS test server)",
  ({ databaseUrl, redisUrl }) => {
    const scratch = suiteScratch("vod-many-");
    const schemas = scratch.schemas(databaseUrl, "vod_many");
    const schema = schemas.fresh();
    const prefix = `vod-many-test:${randomBytes(6).toString("hex")}:`;
    let bucket: GcsTestServer;
    let root: string;
    let db: ReturnType<typeof connectPostgres>;
    let clip: Uint8Array;
    let longer: Uint8Array;
    let longest: Uint8Array;
    let a: Host;
    let b: Host;
    let workers: Spawned[];
    let opsPorts: number[];
    let auth: Auth;

    scratch.afterwards(async () => {
      await db?.close();
      const backdoor = redisBackdoor({ url: redisUrl, keyPrefix: prefix });
      await backdoor.clear();
      await backdoor.close();
      await bucket?.close();
    });

    beforeAll(async () => {
      bucket = await createGcsTestServer();
      root = await scratch.dir();
      db = connectPostgres({ connectionString: databaseUrl, poolSize: 1 });
      await Promise.all([
        makeVideo(join(root, "clip.mp4"), { width: 160, height: 120, seconds: 1, fps: 10 }),
        // Seconds of work for the ladder (360p, 240p): still running when its worker is killed.
        makeVideo(join(root, "longer.mp4"), { width: 640, height: 360, seconds: 10, fps: 24 }),
        // Longer still to process (720p and its ladder) than a drain's grace.
        makeVideo(join(root, "longest.mp4"), { width: 1280, height: 720, seconds: 20, fps: 24 }),
      ]);
      clip = await readFile(join(root, "clip.mp4"));
      longer = await readFile(join(root, "longer.mp4"));
      longest = await readFile(join(root, "longest.mp4"));

      const [portA, portB] = [await freePort(), await freePort()];
      opsPorts = [await freePort(), await freePort()];
      const publicUrl = `http://localhost:${portA}`;
      // What every process of the deployment shares: secrets given, not made per data directory.
      const common = {
        ...(await deploymentSecrets()),
        VOD_DATABASE_URL: databaseUrl,
        VOD_DATABASE_SCHEMA: schema,
        VOD_REDIS_URL: redisUrl,
        VOD_REDIS_KEY_PREFIX: prefix,
        VOD_OBJECT_STORE: "gcs",
        VOD_GCS_BUCKET: bucket.bucket,
        VOD_GCS_API_ENDPOINT: bucket.endpoint,
        GOOGLE_APPLICATION_CREDENTIALS: bucket.credentialsPath,
        VOD_BASE_URL: publicUrl,
        VOD_MEDIA_URL: publicUrl,
        VOD_DRM_URL: publicUrl,
        VOD_LOG_LEVEL: "info",
        // A lost job comes back after its lease and the next maintenance pass: short, to wait less.
        // The lease is renewed every quarter of it, so 5 s leaves a busy worker 3 beats to spare.
        VOD_JOB_LEASE_SECONDS: "5",
        VOD_JOB_MAINTENANCE_SECONDS: "1",
        VOD_JOB_RETRY_DELAY_SECONDS: "1",
      };
      const dataDir = async (name: string) => {
        const dir = join(root, name);
        await mkdir(dir);
        return dir;
      };
      const env = async (name: string, extra: Record<string, string> = {}) => ({
        ...common,
        VOD_DATA_DIR: await dataDir(name),
        ...extra,
      });
      // Each worker's own /healthz, /readyz and /metrics, behind the metrics token; a grace short
      // enough that a job is still running when a drain ends.
      const workerOps = (i: number) => ({
        VOD_OPS_PORT: String(opsPorts[i]),
        VOD_METRICS_TOKEN: OPS_TOKEN,
        VOD_SHUTDOWN_GRACE_SECONDS: "2",
      });
      const envs = {
        a: await env("host-a", { VOD_WORKER_CONCURRENCY: "0" }),
        b: await env("host-b", { VOD_WORKER_CONCURRENCY: "0" }),
        w1: await env("worker-1", workerOps(0)),
        w2: await env("worker-2", workerOps(1)),
      };
      workers = [scratch.spawn("worker", envs.w1), scratch.spawn("worker", envs.w2)];
      [a, b] = await Promise.all([scratch.serve(envs.a, portA), scratch.serve(envs.b, portB)]);
      await Promise.all(workers.map((w) => w.waitFor('"msg":"worker started"')));
      auth = await signUp(a.url, "many");
    }, 90_000);

    /** Creates an asset and starts its upload on `host`: the part URLs, each on the bucket. */
    const begin = async (host: Host, bytes: Uint8Array, title: string) => {
      const created = await call(host.url, "/v1/assets", { body: { title }, headers: auth });
      expect(created.status).toBe(201);
      const started = await call(host.url, "/v1/uploads", {
        body: { asset_id: created.body.asset.id, size_bytes: bytes.length },
        headers: auth,
      });
      expect(started.status).toBe(201);
      const upload = started.body.upload as {
        id: string;
        part_size: number;
        parts: Array<{ number: number; url: string }>;
      };
      // Bytes go to the bucket, not through any vod host.
      for (const part of upload.parts) expect(new URL(part.url).origin).toBe(bucket.endpoint);
      return { assetId: created.body.asset.id as string, ...upload };
    };

    const putParts = (upload: Awaited<ReturnType<typeof begin>>, bytes: Uint8Array) =>
      Promise.all(
        upload.parts.map(async (part) => {
          const body = bytes.subarray((part.number - 1) * upload.part_size, part.number * upload.part_size);
          const put = await fetch(part.url, { method: "PUT", body });
          expect(put.status).toBe(200);
          expect(put.headers.get("etag")).toMatch(/^"[0-9a-f]{32}"$/);
        }),
      );

    const complete = async (host: Host, uploadId: string) => {
      const completed = await call(host.url, `/v1/uploads/${uploadId}/complete`, { body: {}, headers: auth });
      expect(completed.status).toBe(200);
      expect(completed.body.asset.status).toBe("uploaded");
    };

    /** An upload started on `start`, its parts sent to the bucket, completed on `finish`. */
    const sendAcross = async (start: Host, finish: Host, bytes: Uint8Array, title: string) => {
      const upload = await begin(start, bytes, title);
      await putParts(upload, bytes);
      await complete(finish, upload.id);
      return upload;
    };

    /** The asset's jobs as the queue holds them. */
    const jobsOf = async (assetId: string) =>
      (
        await db.query<{ state: string; retry_count: number }>(
          `SELECT state, retry_count FROM ${schema}_jobs.job
           WHERE name = 'process-asset' AND data->>'asset_id' = $1`,
          [assetId],
        )
      ).rows;
    const completed = (jobs: ReadonlyArray<{ state: string }>) => jobs.every((j) => j.state === "completed");

    /** The lines of `worker`'s log with message `msg` about the asset. */
    const logged = (worker: Spawned, msg: string, assetId: string) =>
      worker
        .output()
        .split("\n")
        .filter((line) => line.includes(`"msg":"${msg}"`) && line.includes(assetId));

    /** One job, completed on its first run, started once across both workers. */
    const processedOnce = async (assetId: string) => {
      // The asset turns ready a moment before its job is marked completed.
      await eventually(`the job of ${assetId} completing`, async () => completed(await jobsOf(assetId)));
      expect(await jobsOf(assetId)).toEqual([{ state: "completed", retry_count: 0 }]);
      expect(workers.flatMap((w) => logged(w, "processing started", assetId))).toHaveLength(1);
    };

    /** The manifest URL as served by `host`: same path, that host's address. */
    const on = (host: Host, url: string) => new URL(new URL(url).pathname, host.url).toString();

    /** A playlist's URI lines (not its tags). */
    const uris = (playlist: string) => playlist.split("\n").filter((l) => l !== "" && !l.startsWith("#"));

    /** Plays the session through `host`: master, a media playlist and its first segment. */
    const play = async (host: Host, manifest: string) => {
      const master = await fetch(on(host, manifest));
      expect(master.status).toBe(200);
      const masterText = await master.text();
      expect(masterText).toContain("#EXT-X-STREAM-INF");
      const playlistUrl = new URL(uris(masterText).find((l) => l.endsWith(".m3u8"))!, master.url);
      const playlist = await fetch(playlistUrl);
      expect(playlist.status).toBe(200);
      const segmentLine = uris(await playlist.text()).find((l) => l.endsWith(".m4s"))!;
      const segment = await fetch(new URL(segmentLine, playlistUrl));
      expect(segment.status).toBe(200);
      expect((await segment.arrayBuffer()).byteLength).toBeGreaterThan(0);
    };

    /** The manifest's answer once it is no longer 200, or its 200 a second later. */
    const refusedWithinASecond = async (url: string) => {
      const until = Date.now() + 1_000;
      let reply = await fetch(url);
      while (reply.status === 200 && Date.now() < until) {
        await reply.arrayBuffer();
        await new Promise((r) => setTimeout(r, 20));
        reply = await fetch(url);
      }
      return reply;
    };

    const session = async (host: Host, assetId: string) => {
      const res = await call(host.url, "/v1/playback/sessions", {
        body: { asset_id: assetId },
        headers: auth,
      });
      expect(res.status).toBe(201);
      return { id: res.body.session.id as string, manifest: res.body.urls.manifest as string };
    };

    it("processes an upload started on A, sent to the bucket and completed on B exactly once; it plays from either host", async () => {
      const upload = await sendAcross(a, b, clip, "across");
      const asset = await settledAsset(b.url, auth, upload.assetId, 90_000);
      expect(asset).toMatchObject({ status: "ready", source_width: 160, source_height: 120 });
      await processedOnce(upload.assetId);
      // Nothing of the upload is left open in the bucket.
      expect(bucket.backdoor.uploads()).toEqual([]);

      const { manifest } = await session(a, upload.assetId);
      await play(a, manifest);
      await play(b, manifest);
    }, 120_000);

    it("processes ten uploads completed at once, spread over both hosts, each exactly once", async () => {
      const hosts = [a, b];
      const uploads = await Promise.all(
        Array.from({ length: 10 }, (_, i) => begin(hosts[i % 2] as Host, clip, `batch ${i}`)),
      );
      await Promise.all(uploads.map((u) => putParts(u, clip)));
      // Each completed on the other host than the one that started it, all in the same moment.
      await Promise.all(uploads.map((u, i) => complete(hosts[(i + 1) % 2] as Host, u.id)));
      const assets = await Promise.all(uploads.map((u) => settledAsset(a.url, auth, u.assetId, 110_000)));
      expect(assets.map((asset) => asset.status)).toEqual(Array(10).fill("ready"));
      for (const u of uploads) await processedOnce(u.assetId);
      // Both workers had a share of the queue.
      for (const worker of workers)
        expect(uploads.some((u) => logged(worker, "processing started", u.assetId).length > 0)).toBe(true);
    }, 150_000);

    it("each worker serves /healthz, /readyz and /metrics on VOD_OPS_PORT: their processing counts add up to the assets made ready", async () => {
      const urls = opsPorts.map((port) => `http://127.0.0.1:${port}`);
      const ready = (await call(a.url, "/v1/assets?limit=100", { headers: auth })).body.data.filter(
        (asset: { status: string }) => asset.status === "ready",
      ).length;
      expect(ready).toBeGreaterThanOrEqual(11);
      let total = 0;
      for (const url of urls) {
        expect(await call(url, "/healthz")).toMatchObject({ status: 200, body: { status: "ok" } });
        expect(await call(url, "/readyz")).toMatchObject({
          status: 200,
          body: { status: "ok", checks: { working: "ok", database: "ok", redis: "ok" } },
        });
        const refused = await call(url, "/metrics");
        expect(refused.status).toBe(401);
        expect(refused.body).toMatchObject({ error: "unauthorized", code: "unauthorized" });
        // What node's parser refuses gets the spec's error too, as on the API's port.
        const garbled = await new Promise<string>((resolve, reject) => {
          const socket = connect(Number(new URL(url).port), "127.0.0.1", () =>
            socket.end("NOT HTTP\r\n\r\n"),
          );
          let text = "";
          socket.on("data", (d) => {
            text += d;
          });
          socket.on("end", () => resolve(text));
          socket.on("error", reject);
        });
        expect(garbled).toMatch(/^HTTP\/1\.1 400 /);
        expect(JSON.parse(garbled.slice(garbled.indexOf("\r\n\r\n") + 4))).toMatchObject({
          code: "invalid_request",
        });
        const missing = await call(url, "/v1/assets");
        expect(missing.status).toBe(404);
        expect(missing.body).toMatchObject({ error: "not_found", code: "not_found" });
        const metrics = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${OPS_TOKEN}` } });
        expect(metrics.status).toBe(200);
        const text = await metrics.text();
        const count = (line: RegExp) => Number(line.exec(text)?.[1] ?? Number.NaN);
        const done = count(/^vod_processing_jobs_total\{state="ready"\} (\d+)$/m);
        expect(done).toBeGreaterThan(0);
        total += done;
        expect(count(/^vod_processing_jobs_total\{state="failed"\} (\d+)$/m)).toBe(0);
        // Only the ops routes are served: no API request was counted here.
        expect(text).not.toContain('route="/v1/assets"');
      }
      expect(total).toBe(ready);
    });

    it("refuses on B, within a second, a playback session revoked on A after B had served it", async () => {
      const upload = await sendAcross(b, a, clip, "revoked");
      expect((await settledAsset(a.url, auth, upload.assetId, 90_000)).status).toBe("ready");
      const { id, manifest } = await session(a, upload.assetId);
      // B has checked the session and holds it as live in its cache (kept up to 60 s).
      expect((await fetch(on(b, manifest))).status).toBe(200);
      expect((await fetch(on(a, manifest))).status).toBe(200);

      const revoked = await call(a.url, `/v1/playback/sessions/${id}`, { method: "DELETE", headers: auth });
      expect(revoked.status).toBe(204);
      // The revocation reaches B through Redis at once; without it B's cache would serve for a minute.
      const refused = await refusedWithinASecond(on(b, manifest));
      expect(refused.status).toBe(401);
      expect(await refused.json()).toMatchObject({ error: "unauthorized", code: "unauthorized" });
      expect((await fetch(on(a, manifest))).status).toBe(401);
    }, 120_000);

    it("replays on B a create sent to A with an Idempotency-Key; ten at once across both hosts make one asset", async () => {
      const key = `many-${randomBytes(6).toString("hex")}`;
      const send = (host: Host, title: string, idempotencyKey: string) =>
        call(host.url, "/v1/assets", {
          body: { title },
          headers: { ...auth, "idempotency-key": idempotencyKey },
        });
      const first = await send(a, "idempotent", key);
      expect(first.status).toBe(201);
      expect(first.headers.get("idempotent-replayed")).toBeNull();
      const replay = await send(b, "idempotent", key);
      expect(replay.status).toBe(201);
      expect(replay.body).toStrictEqual(first.body);
      expect(replay.headers.get("idempotent-replayed")).toBe("true");

      const raceKey = `race-${randomBytes(6).toString("hex")}`;
      const replies = await Promise.all(
        Array.from({ length: 10 }, (_, i) => send(i % 2 === 0 ? a : b, raceKey, raceKey)),
      );
      for (const reply of replies) expect([201, 409]).toContain(reply.status);
      const created = new Set(replies.filter((r) => r.status === 201).map((r) => r.body.asset.id));
      expect(created.size).toBe(1);
      const stored = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${schema}.assets WHERE title = $1`,
        [raceKey],
      );
      expect(stored.rows[0]?.n).toBe(1);
    }, 60_000);

    it("deletes on A an asset B is playing: B refuses its manifest at once, and a worker removes its objects from the bucket", async () => {
      const upload = await sendAcross(a, b, clip, "deleted");
      expect((await settledAsset(a.url, auth, upload.assetId, 90_000)).status).toBe("ready");
      const objectsOf = async () =>
        (await bucket.backdoor.objects()).filter((o) => o.name.includes(upload.assetId)).map((o) => o.name);
      expect(await objectsOf()).toEqual(expect.arrayContaining([expect.stringMatching(/^origins\//)]));
      const { manifest } = await session(b, upload.assetId);
      expect((await fetch(on(b, manifest))).status).toBe(200);

      const deleted = await call(a.url, `/v1/assets/${upload.assetId}`, { method: "DELETE", headers: auth });
      expect(deleted.status).toBe(204);
      expect((await call(b.url, `/v1/assets/${upload.assetId}`, { headers: auth })).status).toBe(404);
      // The revocation reaches B through Redis; without it B's cache would serve for a minute.
      expect((await refusedWithinASecond(on(b, manifest))).status).toBe(401);
      const gone = Date.now() + 30_000;
      while ((await objectsOf()).length > 0 && Date.now() < gone)
        await new Promise((r) => setTimeout(r, 100));
      expect(await objectsOf()).toEqual([]);
    }, 120_000);

    it("leaves the job of a worker killed mid-job to the other worker, and the asset reaches ready", async () => {
      const upload = await sendAcross(a, b, longer, "killed");
      // Whichever worker took the job, once it has begun.
      const starter = () =>
        workers.findIndex((w) => logged(w, "processing started", upload.assetId).length > 0);
      await eventually("a worker starting the job", () => starter() >= 0, 60_000, 20);
      const index = starter();
      const [victim, survivor] = [workers[index], workers[1 - index]] as [Spawned, Spawned];
      // The start is logged before the move to processing commits: kill only once the asset reads
      // processing, so that the kill lands in the job, not before it.
      await assetReads(a.url, auth, upload.assetId, "processing", 60_000);
      victim.child.kill("SIGKILL");
      await new Promise((r) => victim.child.once("exit", r));
      expect(logged(victim, "processing done", upload.assetId)).toEqual([]);
      expect((await call(b.url, `/v1/assets/${upload.assetId}`, { headers: auth })).body.asset.status).toBe(
        "processing",
      );

      const asset = await settledAsset(b.url, auth, upload.assetId, 120_000);
      expect(asset).toMatchObject({ status: "ready", source_width: 640, source_height: 360 });
      // The survivor ran a later attempt to its end; the killed one never finished its own.
      const done = () => logged(survivor, "processing done", upload.assetId);
      await eventually("the surviving worker logging the end of the job", () => done().length > 0);
      expect(done().every((line) => /"attempt":[2-9]/.test(line))).toBe(true);
      // One job, completed, on a later run than the first.
      await eventually("the job completing", async () => completed(await jobsOf(upload.assetId)));
      const jobs = await jobsOf(upload.assetId);
      expect(jobs).toHaveLength(1);
      expect(jobs[0]?.retry_count).toBeGreaterThanOrEqual(1);
      await play(b, (await session(b, upload.assetId)).manifest);
    }, 180_000);

    it("a worker told to stop mid-job answers 503 on /readyz while it drains, then releases the job and exits 0", async () => {
      // The one worker left after the kill above.
      const index = workers.findIndex((w) => !exited(w));
      const worker = workers[index] as Spawned;
      const ops = `http://127.0.0.1:${opsPorts[index]}`;
      const upload = await sendAcross(a, b, longest, "drained");
      await assetReads(a.url, auth, upload.assetId, "processing", 60_000);
      expect((await call(ops, "/readyz")).status).toBe(200);
      const code = new Promise((resolve) => worker.child.once("exit", resolve));
      worker.child.kill("SIGTERM");
      let drained: Awaited<ReturnType<typeof call>> | undefined;
      await eventually("/readyz refusing while the worker drains", async () => {
        drained = await call(ops, "/readyz").catch(() => undefined);
        return drained?.status === 503;
      });
      expect(drained?.body).toMatchObject({
        code: "storage_error",
        details: { checks: { working: "failed", database: "ok", redis: "ok" } },
      });
      expect(await code).toBe(0);
      expect(logged(worker, "processing released", upload.assetId)).toHaveLength(1);
    }, 120_000);
  },
);

import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeWith, suiteScratch } from "./suites.js";
import {
  assetReads,
  call,
  eventually,
  freePort,
  makeVideo,
  settledAsset,
  signUp,
  startServe,
  stop,
  uploadAsset,
} from "./support.js";

const ffprobeJson = async (target: string) =>
  JSON.parse(
    (
      await promisify(execFile)("ffprobe", [
        "-v",
        "error",
        "-print_format",
        "json",
        "-show_streams",
        "-protocol_whitelist",
        "file,http,https,tcp,tls",
        target,
      ])
    ).stdout,
  ) as { streams: Array<{ codec_type: string; width?: number; height?: number; codec_name: string }> };

describe("processing on the embedded default: upload, ffmpeg, HLS", () => {
  let dataDir: string;
  let host: Awaited<ReturnType<typeof startServe>>;
  let auth: Record<string, string>;
  let tenantId: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "vod-proc-"));
    host = await startServe({ VOD_DATA_DIR: dataDir, VOD_LOG_LEVEL: "info" }, await freePort());
    auth = await signUp(host.url, "proc");
    tenantId = (await call(host.url, "/v1/auth/me", { headers: auth })).body.tenant.id;
  }, 60_000);
  afterAll(async () => {
    if (host) expect(await stop(host)).toBe(0);
    await rm(dataDir, { recursive: true, force: true });
  });

  it("takes a real video to ready with its source facts, an HLS ladder without upscaling, and a poster", async () => {
    const source = join(dataDir, "source.mp4");
    await makeVideo(source, { width: 1280, height: 720, seconds: 6, fps: 30 });
    const bytes = await readFile(source);
    const { assetId } = await uploadAsset(host.url, auth, bytes, "real video");
    const asset = await settledAsset(host.url, auth, assetId);
    expect(asset).toMatchObject({
      status: "ready",
      failure_code: null,
      source_width: 1280,
      source_height: 720,
      source_fps: 30,
      source_codec: "h264",
      origin_size_bytes: bytes.length,
    });
    expect(asset.source_duration_ms).toBeGreaterThanOrEqual(5_900);
    expect(asset.source_duration_ms).toBeLessThanOrEqual(6_200);
    expect(asset.source_bitrate_kbps).toBeGreaterThan(50);

    const out = join(dataDir, "objects", "renditions", tenantId, assetId);
    const master = await readFile(join(out, "master.m3u8"), "utf8");
    for (const height of [720, 480, 360, 240])
      expect(master).toMatch(new RegExp(`RESOLUTION=\\d+x${height}\\b`));
    expect(master).not.toMatch(/x1080\b/);
    const entries = await readdir(out, { recursive: true });
    expect(entries.filter((e) => String(e).endsWith(".m4s")).length).toBeGreaterThanOrEqual(4 * 1 + 1);
    expect(entries).toContain("poster.jpg");
    // An independent client reads the ladder through the master playlist.
    const probed = await ffprobeJson(join(out, "master.m3u8"));
    const video = probed.streams.filter((s) => s.codec_type === "video");
    expect(video.map((s) => s.height).sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual([240, 360, 480, 720]);
    expect(probed.streams.some((s) => s.codec_type === "audio" && s.codec_name === "aac")).toBe(true);
    expect(host.output()).toContain('"msg":"processing done"');
  }, 120_000);

  it("fails random bytes with invalid_media", async () => {
    const { assetId } = await uploadAsset(host.url, auth, randomBytes(300_000), "noise");
    const asset = await settledAsset(host.url, auth, assetId);
    expect(asset).toMatchObject({ status: "failed", failure_code: "invalid_media", source_width: null });
  }, 60_000);
});

describe("processing past its time limit", () => {
  let dataDir: string;
  let host: Awaited<ReturnType<typeof startServe>>;
  afterAll(async () => {
    if (host) expect(await stop(host)).toBe(0);
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("stops each run at VOD_JOB_MAX_RUN_SECONDS, ffmpeg included, and fails the asset after the last", async () => {
    dataDir = await mkdtemp(join(tmpdir(), "vod-overrun-"));
    host = await startServe(
      {
        VOD_DATA_DIR: dataDir,
        VOD_STORAGE: "memory",
        VOD_LOG_LEVEL: "info",
        VOD_JOB_MAX_RUN_SECONDS: "1",
        VOD_JOB_MAX_ATTEMPTS: "2",
        VOD_JOB_RETRY_DELAY_SECONDS: "1",
      },
      await freePort(),
    );
    const auth = await signUp(host.url, "overrun");
    const source = join(dataDir, "long.mp4");
    // Far more than a second of work for the ladder on any machine.
    await makeVideo(source, { width: 1280, height: 720, seconds: 20, fps: 30 });
    const { assetId } = await uploadAsset(host.url, auth, await readFile(source), "overrun");
    const asset = await settledAsset(host.url, auth, assetId, 60_000);
    expect(asset).toMatchObject({ status: "failed", failure_code: "processing_error" });
    // Both attempts started and neither left its tools running.
    expect(host.output().split('"msg":"processing started"').length - 1).toBe(2);
    const { stdout } = await promisify(execFile)("ps", [
      "-o",
      "args=",
      "--ppid",
      String(host.child.pid),
    ]).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? "" }));
    expect(stdout).not.toMatch(/ffmpeg|packager/);
  }, 120_000);
});

describeWith(["database"], "a worker killed in the middle of a job (postgres server)", ({ databaseUrl }) => {
  const suite = suiteScratch("vod-kill-");
  const schemas = suite.schemas(databaseUrl, "vod_worker");

  it("runs the job again on another worker, the asset still reaches ready, and the killed worker's scratch is removed", async () => {
    const dataDir = await suite.dir();
    const env = {
      VOD_DATA_DIR: dataDir,
      VOD_DATABASE_URL: databaseUrl,
      VOD_DATABASE_SCHEMA: schemas.fresh(),
      VOD_LOG_LEVEL: "info",
      // A lost job comes back after its lease and the next maintenance pass: short here, to wait less.
      VOD_JOB_LEASE_SECONDS: "10",
      VOD_JOB_MAINTENANCE_SECONDS: "1",
      VOD_JOB_RETRY_DELAY_SECONDS: "1",
    };
    // The API host runs no jobs; workers are processes of their own, as in the server set.
    const api = await suite.serve({ ...env, VOD_WORKER_CONCURRENCY: "0" });
    // The workers' scratch space, to see what a killed one leaves behind.
    const scratch = join(dataDir, "tmp");
    await mkdir(scratch);
    const workerEnv = { ...env, TMPDIR: scratch };
    const first = suite.spawn("worker", workerEnv);
    await first.waitFor('"msg":"worker started"');

    const auth = await signUp(api.url, "kill");
    const source = join(dataDir, "long.mp4");
    await makeVideo(source, { width: 1280, height: 720, seconds: 20, fps: 30 });
    const { assetId } = await uploadAsset(api.url, auth, await readFile(source), "long");
    await first.waitFor('"msg":"processing started"');
    // The worker logs the start before it commits the move to processing: kill it only once
    // the asset reads processing, so the kill lands mid-job, not before the job began.
    await assetReads(api.url, auth, assetId, "processing");
    const leftBy = (pid: number | undefined) => async () =>
      (await readdir(scratch)).filter((name) => name.startsWith(`vod-ffmpeg-p${pid}-`));
    const firstScratch = leftBy(first.child.pid);
    await eventually(
      "the first worker making its scratch directory",
      async () => (await firstScratch()).length > 0,
      30_000,
      50,
    );
    first.child.kill("SIGKILL");
    await new Promise((r) => first.child.once("exit", r));
    const during = await call(api.url, `/v1/assets/${assetId}`, { headers: auth });
    expect(during.body.asset.status).toBe("processing");

    expect(await firstScratch()).toHaveLength(1);

    const second = suite.spawn("worker", workerEnv);
    const asset = await settledAsset(api.url, auth, assetId, 150_000);
    expect(asset).toMatchObject({
      status: "ready",
      source_width: 1280,
      source_height: 720,
      source_codec: "h264",
    });
    // The asset turns ready a moment before the worker logs it; a busy machine may even have
    // run a third attempt beside the second (the lease is short here): either way a later
    // attempt than the killed one finished the job.
    await second.waitFor('"msg":"processing done"', 60_000);
    const done = second
      .output()
      .split("\n")
      .filter((line) => line.includes('"msg":"processing done"') && line.includes(assetId));
    expect(done.length).toBeGreaterThan(0);
    expect(done.every((line) => /"attempt":[2-9]/.test(line))).toBe(true);
    // The killed worker could not clean up after itself; the next one did.
    expect(await firstScratch()).toEqual([]);
  }, 240_000);
});

import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { ffmpegMediaProcessor } from "@vod/adapter-ffmpeg";
import { memoryObjectStore, memoryRevocationStore, memoryStorage } from "@vod/adapter-memory";
import { memoryBackdoor, memoryObjectStoreBackdoor } from "@vod/adapter-memory/testing";
import { connectPostgres } from "@vod/adapter-postgres";
import { chunkKey, type MediaProcessor, MediaRejected } from "@vod/core";
import { Effect } from "effect";
import { beforeAll, describe, expect, it } from "vitest";
import { describeWith, suiteScratch } from "./suites.js";
import {
  assetReads,
  call,
  deploymentSecrets,
  eventually,
  makeVideo,
  type Spawned,
  settledAsset,
  signUp,
  uploadAsset,
} from "./support.js";

const run = promisify(execFile);

interface Rendition {
  name: string;
  height: number;
  status: string;
}

/** Video packets of a variant playlist (counted, not decoded: an encrypted one reads too). */
const videoPackets = async (url: string) => {
  const { stdout } = await run("ffprobe", [
    ...["-v", "error", "-select_streams", "v:0", "-count_packets"],
    ...["-show_entries", "stream=nb_read_packets,height", "-of", "json", url],
  ]);
  const [stream] = (JSON.parse(stdout) as { streams: Array<{ nb_read_packets: string; height: number }> })
    .streams;
  return { packets: Number(stream?.nb_read_packets), height: stream?.height };
};

/** The media playlists a master lists, as absolute URLs, and its audio rendition's. */
const variants = (master: string, base: string) =>
  master
    .split("\n")
    .flatMap((line) =>
      line.startsWith("#") ? [...line.matchAll(/URI="([^"]+\.m3u8)"/g)].map((m) => m[1]!) : [line],
    )
    .filter((line) => line.endsWith(".m3u8"))
    .map((uri) => new URL(uri, base).toString());

const FPS = 25;
const SECONDS = 18;

describe("chunked encoding on the memory set: a long source cut into chunk jobs, joined and packaged", () => {
  const scratch = suiteScratch("vod-chunks-");
  const storage = memoryStorage();
  const objectStore = memoryObjectStore();
  let url: string;
  let auth: Record<string, string>;
  let source: Uint8Array;

  beforeAll(async () => {
    const dir = await scratch.dir();
    const host = await scratch.memoryHost(
      { VOD_DATA_DIR: dir, VOD_LOG_LEVEL: "silent", VOD_PROCESSING_CHUNK_SECONDS: "6" },
      {
        storage,
        objectStore,
        revocationStore: memoryRevocationStore(),
        mediaProcessor: ffmpegMediaProcessor({ x264Preset: "ultrafast" }),
      },
      { retryDelayMs: 200 },
    );
    url = host.url;
    auth = await signUp(url, "chunks");
    await makeVideo(join(dir, "src.mp4"), { width: 640, height: 360, seconds: SECONDS, fps: FPS });
    source = await readFile(join(dir, "src.mp4"));
  }, 60_000);

  const playable = async (assetId: string) => {
    const play = await call(url, "/v1/playback/sessions", { body: { asset_id: assetId }, headers: auth });
    expect(play.status).toBe(201);
    const manifest = play.body.urls.manifest as string;
    const master = await fetch(manifest);
    expect(master.status).toBe(200);
    return { manifest, master: await master.text() };
  };

  for (const drm of [false, true])
    it(`${drm ? "a DRM asset" : "an asset"} of 3 chunks per unit reaches ready with every rendition; each plays the whole source`, async () => {
      const { assetId, tenantId } = await uploadAsset(url, auth, source, "chunked", { drm });
      const asset = await settledAsset(url, auth, assetId, 150_000);
      expect(asset).toMatchObject({ status: "ready", source_width: 640, source_height: 360 });
      expect(asset.renditions.map((r: Rendition) => [r.name, r.status])).toEqual([
        ["360p", "ready"],
        ["240p", "ready"],
      ]);

      // One chunk job per chunk of each unit (360p first, then 240p), one packaging per unit.
      const jobs = (await memoryBackdoor(storage).jobs()).filter(
        (j) => (j.data as { asset_id?: string }).asset_id === assetId,
      );
      const chunkJobs = jobs.filter((j) => j.name === "encode-chunk").map((j) => j.data);
      expect(chunkJobs).toEqual(
        ["360p", "240p"].flatMap((unit) =>
          [0, 1, 2].map((index) =>
            expect.objectContaining({
              unit: [unit],
              index,
              count: 3,
              start_ms: index * 6000,
              end_ms: index === 2 ? null : (index + 1) * 6000,
            }),
          ),
        ),
      );
      expect(jobs.filter((j) => j.name === "package-chunks").map((j) => j.state)).toContain("completed");
      // The probe's has_audio rides along, so packaging does not read the source a second time.
      for (const job of jobs.filter((j) => j.name === "package-chunks"))
        expect(job.data).toMatchObject({ has_audio: true });
      // Chunks are removed once their rendition is listed (right after, by the same job).
      const objects = memoryObjectStoreBackdoor(objectStore);
      const keys = ["360p", "240p"].flatMap((name) =>
        [0, 1, 2].map((i) => chunkKey(tenantId!, assetId, name, i)),
      );
      await eventually(
        "no chunk of the asset left",
        async () => (await Promise.all(keys.map((key) => objects.exists(key)))).every((there) => !there),
        10_000,
      );

      const { manifest, master } = await playable(assetId);
      const playlists = variants(master, manifest);
      expect(playlists.map((p) => new URL(p).pathname.split("/").slice(-2).join("/")).sort()).toEqual([
        "240p/playlist.m3u8",
        "360p/playlist.m3u8",
        "audio/playlist.m3u8",
      ]);
      for (const playlist of playlists.filter((p) => !p.includes("/audio/"))) {
        const text = await (await fetch(playlist)).text();
        if (drm) expect(text).toContain('KEYFORMAT="org.w3.clearkey"');
        else expect(text).not.toContain("#EXT-X-KEY");
        // Every frame of the source, through both joins.
        const { packets, height } = await videoPackets(playlist);
        expect([360, 240]).toContain(height);
        expect(Math.abs(packets - SECONDS * FPS)).toBeLessThanOrEqual(2);
      }
    }, 180_000);

  it("a source with no audio, chunked: packaged from the planned facts with no audio rendition", async () => {
    const dir = await scratch.dir();
    await makeVideo(join(dir, "silent.mp4"), {
      width: 426,
      height: 240,
      seconds: SECONDS,
      fps: FPS,
      audio: false,
    });
    const { assetId } = await uploadAsset(url, auth, await readFile(join(dir, "silent.mp4")), "silent");
    const asset = await settledAsset(url, auth, assetId, 150_000);
    expect(asset).toMatchObject({ status: "ready", source_height: 240 });
    const jobs = (await memoryBackdoor(storage).jobs()).filter(
      (j) => (j.data as { asset_id?: string }).asset_id === assetId && j.name === "package-chunks",
    );
    expect(jobs.map((j) => j.data)).toEqual([expect.objectContaining({ has_audio: false, count: 3 })]);
    const { manifest, master } = await playable(assetId);
    const playlists = variants(master, manifest);
    expect(playlists.map((p) => new URL(p).pathname.split("/").slice(-2).join("/"))).toEqual([
      "240p/playlist.m3u8",
    ]);
    const { packets } = await videoPackets(playlists[0]!);
    expect(Math.abs(packets - SECONDS * FPS)).toBeLessThanOrEqual(2);
  }, 180_000);

  it("a source shorter than 3 chunks is made in one job, as before", async () => {
    const dir = await scratch.dir();
    await makeVideo(join(dir, "short.mp4"), { width: 320, height: 240, seconds: 11, fps: FPS });
    const { assetId } = await uploadAsset(url, auth, await readFile(join(dir, "short.mp4")), "short");
    const asset = await settledAsset(url, auth, assetId, 120_000);
    expect(asset.status).toBe("ready");
    const jobs = (await memoryBackdoor(storage).jobs()).filter(
      (j) => (j.data as { asset_id?: string }).asset_id === assetId,
    );
    expect(jobs.map((j) => j.name)).toEqual(["process-asset"]);
  }, 150_000);
});

describe("chunked encoding on the memory set when a chunk cannot be made", () => {
  const scratch = suiteScratch("vod-chunks-fail-");

  /** ffmpeg, but `encodeChunk` rejects the medium for the chunks of `unit` (final: no retry). */
  const rejecting = (unit: string): MediaProcessor => {
    const inner = ffmpegMediaProcessor({ x264Preset: "ultrafast" });
    return {
      ...inner,
      encodeChunk: (input, source, renditions, range, emit) =>
        renditions.some((r) => r.name === unit) && range.startMs === 6000
          ? Effect.fail(new MediaRejected({ code: "unsupported_codec", message: "made to fail" }))
          : inner.encodeChunk!(input, source, renditions, range, emit),
    };
  };

  const processWith = async (processor: MediaProcessor) => {
    const dir = await scratch.dir();
    const objectStore = memoryObjectStore();
    const host = await scratch.memoryHost(
      { VOD_DATA_DIR: dir, VOD_LOG_LEVEL: "silent", VOD_PROCESSING_CHUNK_SECONDS: "6" },
      { objectStore, revocationStore: memoryRevocationStore(), mediaProcessor: processor },
      { retryDelayMs: 100 },
    );
    const auth = await signUp(host.url, "chunks-fail");
    await makeVideo(join(dir, "src.mp4"), { width: 640, height: 360, seconds: SECONDS, fps: FPS });
    const { assetId, tenantId } = await uploadAsset(host.url, auth, await readFile(join(dir, "src.mp4")));
    const asset = await settledAsset(host.url, auth, assetId, 150_000);
    // The job that settled the asset removes the chunks right after its last save.
    await eventually(
      "no chunk of the asset left",
      async () => {
        for (const name of ["360p", "240p"])
          for (const index of [0, 1, 2])
            if (
              await memoryObjectStoreBackdoor(objectStore).exists(chunkKey(tenantId!, assetId, name, index))
            )
              return false;
        return true;
      },
      10_000,
    );
    return { host, auth, asset };
  };

  // Each case also waits for every chunk to be removed (processWith).
  it("a later unit's chunk rejected: its rendition is failed, the asset ready with the first", async () => {
    const { host, auth, asset } = await processWith(rejecting("240p"));
    expect(asset).toMatchObject({ status: "ready", failure_code: null });
    expect(asset.renditions.map((r: Rendition) => [r.name, r.status])).toEqual([
      ["360p", "ready"],
      ["240p", "failed"],
    ]);
    const play = await call(host.url, "/v1/playback/sessions", {
      body: { asset_id: asset.id },
      headers: auth,
    });
    const master = await (await fetch(play.body.urls.manifest)).text();
    expect([...master.matchAll(/RESOLUTION=\d+x(\d+)/g)].map((m) => m[1])).toEqual(["360"]);
  }, 180_000);

  it("the first unit's chunk rejected: the asset fails with the medium's code and its chunks are removed", async () => {
    const { asset } = await processWith(rejecting("360p"));
    expect(asset).toMatchObject({ status: "failed", failure_code: "unsupported_codec" });
    expect(asset.renditions.map((r: Rendition) => r.status)).toEqual(["failed", "failed"]);
  }, 180_000);
});

describeWith(["database"], "chunk jobs across worker processes (postgres server)", ({ databaseUrl }) => {
  const suite = suiteScratch("vod-chunks-kill-");
  const schemas = suite.schemas(databaseUrl, "vod_chunks");

  it("a worker SIGKILLed mid-chunk: the asset still reaches ready, and only that chunk ran twice", async () => {
    const dataDir = await suite.dir();
    const schema = schemas.fresh();
    const env = {
      ...(await deploymentSecrets()),
      VOD_DATA_DIR: dataDir,
      VOD_DATABASE_URL: databaseUrl,
      VOD_DATABASE_SCHEMA: schema,
      VOD_LOG_LEVEL: "info",
      VOD_PROCESSING_CHUNK_SECONDS: "6",
      // A lost job comes back after its lease and the next maintenance pass: short, to wait less.
      VOD_JOB_LEASE_SECONDS: "10",
      VOD_JOB_MAINTENANCE_SECONDS: "1",
      VOD_JOB_RETRY_DELAY_SECONDS: "1",
    };
    const api = await suite.serve({ ...env, VOD_WORKER_CONCURRENCY: "0" });
    const workers: Spawned[] = [suite.spawn("worker", env), suite.spawn("worker", env)];
    await Promise.all(workers.map((w) => w.waitFor('"msg":"worker started"')));
    const [doomed, survivor] = workers as [Spawned, Spawned];

    const auth = await signUp(api.url, "chunks-kill");
    const file = join(dataDir, "long.mp4");
    await makeVideo(file, { width: 1280, height: 720, seconds: 20, fps: FPS });
    const { assetId } = await uploadAsset(api.url, auth, await readFile(file), "long");
    await assetReads(api.url, auth, assetId, "processing");

    const db = connectPostgres({ connectionString: databaseUrl, poolSize: 1 });
    suite.afterwards(() => db.close());
    const chunkJobs = async () =>
      (
        await db.query<{ id: string; state: string; retry_count: number }>(
          `SELECT id, state, retry_count FROM ${schema}_jobs.job
           WHERE name = 'encode-chunk' AND data->>'asset_id' = $1`,
          [assetId],
        )
      ).rows;
    const started = (worker: Spawned) =>
      worker
        .output()
        .split("\n")
        .filter((line) => line.includes('"msg":"chunk started"') && line.includes(assetId))
        .map((line) => /"job_id":"([^"]+)"/.exec(line)?.[1] ?? "");
    // The doomed worker's chunk, once the queue holds it active: it is killed in the middle of it.
    let killed = "";
    await eventually(
      "the doomed worker running a chunk",
      async () => {
        const active = new Set((await chunkJobs()).filter((j) => j.state === "active").map((j) => j.id));
        killed = started(doomed).find((id) => active.has(id)) ?? "";
        return killed !== "";
      },
      90_000,
      20,
    );
    doomed.child.kill("SIGKILL");
    await new Promise((r) => doomed.child.once("exit", r));

    const asset = await settledAsset(api.url, auth, assetId, 180_000);
    expect(asset.status).toBe("ready");
    expect(asset.renditions.map((r: Rendition) => r.status)).toEqual(["ready", "ready", "ready", "ready"]);
    await eventually(
      "every chunk job completing",
      async () => (await chunkJobs()).every((j) => j.state === "completed"),
      30_000,
    );
    const rows = await chunkJobs();
    // 3 chunks (the last one open-ended, 8 s) of each unit: 360p, then 720p, 480p and 240p.
    expect(rows).toHaveLength(6);
    expect(Object.fromEntries(rows.map((j) => [j.id, j.retry_count]))).toEqual(
      Object.fromEntries(rows.map((j) => [j.id, j.id === killed ? 1 : 0])),
    );
    // Started twice, by each worker once; every other chunk started once in all.
    const all = [...started(doomed), ...started(survivor)];
    expect(all.filter((id) => id === killed)).toHaveLength(2);
    expect(new Set(all).size).toBe(all.length - 1);
  }, 300_000);
});

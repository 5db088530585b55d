import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { ffmpegMediaProcessor } from "@vod/adapter-ffmpeg";
import {
  manualClock,
  memoryJobQueue,
  memoryObjectStore,
  memoryRevocationStore,
  memoryStorage,
  memoryTelemetrySink,
} from "@vod/adapter-memory";
import { loadConfig, type RunningHost, startHost } from "@vod/host-express";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { suiteScratch } from "./suites.js";
import { call, makeVideo, settledAsset, signUp, uploadAsset } from "./support.js";

const run = promisify(execFile);

/** Frame checksums of the video in `file`, decrypted with `key` when given. */
const frameMd5 = async (file: string, key?: string) => {
  const args = [
    ...(key ? ["-decryption_key", key] : []),
    "-v",
    "error",
    "-i",
    file,
    "-map",
    "0:v:0",
    "-f",
    "framemd5",
    "-",
  ];
  const { stdout } = await run("ffmpeg", args).catch((e: { stdout?: string }) => ({
    stdout: e.stdout ?? "",
  }));
  return stdout
    .split("\n")
    .filter((l) => l && !l.startsWith("#"))
    .map((l) => l.split(",").pop()?.trim());
};

// Sessions, delivery, entitlements, the licence and telemetry as HTTP are the contract suite's
// (contract-tests/src/http/playback.ts, on every adapter set, with a fake media processor). Here:
// what ffmpeg and Shaka Packager really produce, as independent clients read it.
describe("playback of real media: an independent client, and decryption with the licence key", () => {
  const scratch = suiteScratch("vod-play-");
  let dir: string;
  let host: RunningHost;
  let auth: Record<string, string>;
  let clearAsset: string;
  let drmAsset: string;
  let source: Buffer;

  beforeAll(async () => {
    dir = await scratch.dir();
    host = await scratch.memoryHost(
      { VOD_DATA_DIR: dir, VOD_LOG_LEVEL: "silent" },
      {
        objectStore: memoryObjectStore(),
        revocationStore: memoryRevocationStore(),
        // One x264 thread: the clear and the protected asset then encode to the same frames.
        mediaProcessor: ffmpegMediaProcessor({ x264Threads: 1 }),
      },
      { retryDelayMs: 200 },
    );
    auth = await signUp(host.url, "play");
    await makeVideo(join(dir, "src.mp4"), { width: 640, height: 360, seconds: 4 });
    source = await readFile(join(dir, "src.mp4"));
    clearAsset = (await uploadAsset(host.url, auth, source, "clear")).assetId;
    drmAsset = (await uploadAsset(host.url, auth, source, "protected", { drm: true })).assetId;
    expect((await settledAsset(host.url, auth, clearAsset)).status).toBe("ready");
    expect((await settledAsset(host.url, auth, drmAsset)).status).toBe("ready");
  }, 120_000);

  const session = (assetId: string) =>
    call(host.url, "/v1/playback/sessions", { body: { asset_id: assetId }, headers: auth });

  it("serves the manifest to ffprobe, an independent client, which finds the video stream", async () => {
    const { urls } = (await session(clearAsset)).body;
    const { stdout } = await run("ffprobe", [
      "-v",
      "error",
      "-print_format",
      "json",
      "-show_streams",
      urls.manifest,
    ]);
    const streams = JSON.parse(stdout).streams as Array<{ codec_type: string; height?: number }>;
    expect(streams.some((s) => s.codec_type === "video" && s.height === 360)).toBe(true);
  });

  it("packages a DRM asset that only its licence key decrypts, declared for ClearKey players", async () => {
    // The HTTP contract of sessions, entitlements and the licence is the contract suite's
    // (contract-tests/src/http/playback.ts); here the media Shaka Packager really wrote.
    const res = await session(drmAsset);
    const { token, urls } = res.body;
    const entitled = await fetch(urls.entitlement, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
    });
    expect(entitled.status).toBe(200);
    const ent = (await entitled.json()) as {
      license_headers: Record<string, string>;
      key_systems: Record<string, { license_url: string }>;
    };
    const clearkey = ent.key_systems["org.w3.clearkey"] as { license_url: string };

    // The media playlist names the key (KID) for ClearKey; the licence endpoint gives the key.
    const base = urls.manifest.replace(/master\.m3u8$/, "");
    const master = await (await fetch(urls.manifest)).text();
    const media = master
      .split("\n")
      .find((l: string) => l.endsWith(".m3u8") && !l.includes("audio")) as string;
    const playlist = await (await fetch(base + media)).text();
    expect(playlist).toMatch(/#EXT-X-KEY:METHOD=SAMPLE-AES-CTR/);
    expect(playlist).toContain('KEYFORMAT="org.w3.clearkey"');
    const dir2 = join(dir, "drm");
    const init = new URL(
      /URI="([^"]+)"/.exec(playlist.split("\n").find((l: string) => l.startsWith("#EXT-X-MAP")) ?? "")?.[1] ??
        "",
      base + media,
    );
    const first = new URL(
      playlist.split("\n").find((l: string) => l.endsWith(".m4s")) as string,
      base + media,
    );
    const joined = Buffer.concat([
      Buffer.from(await (await fetch(init)).arrayBuffer()),
      Buffer.from(await (await fetch(first)).arrayBuffer()),
    ]);
    await writeFile(`${dir2}.mp4`, joined);
    const kidMatch = /base64,([A-Za-z0-9+/=_-]+)/.exec(playlist);
    expect(kidMatch).not.toBeNull();
    const kidB64 = Buffer.from(kidMatch?.[1] ?? "", "base64").toString("base64url");
    const licensed = await fetch(clearkey.license_url, {
      method: "POST",
      headers: ent.license_headers,
      body: JSON.stringify({ kids: [kidB64], type: "temporary" }),
    });
    expect(licensed.status).toBe(200);
    const { keys } = (await licensed.json()) as { keys: Array<{ kty: string; kid: string; k: string }> };
    expect(keys.map((k) => k.kid)).toEqual([kidB64]);
    const hexKey = Buffer.from(keys[0]?.k ?? "", "base64url").toString("hex");
    // The packaged init segment names the same KID as the playlist (its tenc box), and neither
    // it, the segment nor the playlists carry the key itself.
    expect(joined.includes(Buffer.from(kidB64, "base64url"))).toBe(true);
    const rawKey = Buffer.from(hexKey, "hex");
    expect(joined.includes(rawKey)).toBe(false);
    for (const form of [hexKey, rawKey.toString("base64"), rawKey.toString("base64url")])
      expect(master + playlist).not.toContain(form);

    // Decrypted with the key, the frames are the clear asset's; without it they are not.
    const clearBase = (await session(clearAsset)).body.urls.manifest.replace(/master\.m3u8$/, "");
    const clearPlaylist = await (await fetch(clearBase + media)).text();
    const clearInit = new URL(
      /URI="([^"]+)"/.exec(
        clearPlaylist.split("\n").find((l: string) => l.startsWith("#EXT-X-MAP")) ?? "",
      )?.[1] ?? "",
      clearBase + media,
    );
    const clearFirst = new URL(
      clearPlaylist.split("\n").find((l: string) => l.endsWith(".m4s")) as string,
      clearBase + media,
    );
    await writeFile(
      `${dir2}-clear.mp4`,
      Buffer.concat([
        Buffer.from(await (await fetch(clearInit)).arrayBuffer()),
        Buffer.from(await (await fetch(clearFirst)).arrayBuffer()),
      ]),
    );
    const reference = await frameMd5(`${dir2}-clear.mp4`);
    expect(reference.length).toBeGreaterThan(10);
    expect(await frameMd5(`${dir2}.mp4`, hexKey)).toEqual(reference);
    expect(await frameMd5(`${dir2}.mp4`)).not.toEqual(reference);
  }, 60_000);
});

describe("revocation across nodes", () => {
  let dir: string;
  const hosts: RunningHost[] = [];
  afterAll(async () => {
    await Promise.all(hosts.map((h) => h.close(1_000)));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("reaches a second node within the cache's 60 s, well inside the 120 s DECISIONS allow", async () => {
    dir = await mkdtemp(join(tmpdir(), "vod-nodes-"));
    const storage = memoryStorage();
    const shared = {
      storage,
      objectStore: memoryObjectStore(),
      telemetrySink: memoryTelemetrySink(),
      revocationStore: memoryRevocationStore(),
    };
    const clock = manualClock(Date.now());
    // Nodes of one deployment share their public API URL: the tokens' issuer and audience.
    const config = loadConfig({
      PORT: "0",
      VOD_HOST: "127.0.0.1",
      VOD_DATA_DIR: dir,
      VOD_LOG_LEVEL: "silent",
      VOD_BASE_URL: "https://api.vod.test",
    });
    // Two nodes on one data directory (same keys), one store of record, caches of their own.
    const a = await startHost(config, { ...shared, clock, jobQueue: memoryJobQueue(storage) });
    const b = await startHost(
      { ...config, jobs: { ...config.jobs, workerConcurrency: 0 } },
      { ...shared, clock },
    );
    hosts.push(a, b);
    const auth = await signUp(a.url, "nodes");
    await makeVideo(join(dir, "n.mp4"), { width: 320, height: 180, seconds: 2 });
    const { assetId } = await uploadAsset(a.url, auth, await readFile(join(dir, "n.mp4")));
    expect((await settledAsset(a.url, auth, assetId)).status).toBe("ready");
    const created = await call(a.url, "/v1/playback/sessions", {
      body: { asset_id: assetId },
      headers: auth,
    });
    const manifestOn = (host: RunningHost) =>
      new URL(new URL(created.body.urls.manifest).pathname, host.url).toString();

    expect((await fetch(manifestOn(b))).status).toBe(200);
    expect(
      (
        await call(a.url, `/v1/playback/sessions/${created.body.session.id}`, {
          method: "DELETE",
          headers: auth,
        })
      ).status,
    ).toBe(204);
    // The node that revoked refuses at once; the other may serve from its cache for up to 60 s.
    expect((await fetch(manifestOn(a))).status).toBe(401);
    clock.advance(30_000);
    expect((await fetch(manifestOn(b))).status).toBe(200);
    clock.advance(30_001);
    expect((await fetch(manifestOn(b))).status).toBe(401);
  }, 60_000);
});

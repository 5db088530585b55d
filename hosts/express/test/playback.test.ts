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

describe("playback over HTTP: sessions, delivery, content protection, telemetry", () => {
  let dir: string;
  let host: RunningHost;
  let sink: ReturnType<typeof memoryTelemetrySink>;
  let storage: ReturnType<typeof memoryStorage>;
  let auth: Record<string, string>;
  let clearAsset: string;
  let drmAsset: string;
  let source: Buffer;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "vod-play-"));
    storage = memoryStorage();
    sink = memoryTelemetrySink();
    host = await startHost(
      loadConfig({
        PORT: "0",
        VOD_HOST: "127.0.0.1",
        VOD_DATA_DIR: dir,
        VOD_LOG_LEVEL: "silent",
        VOD_DRM_WIDEVINE_LICENSE_URL: "https://widevine.example/license",
        VOD_DRM_PLAYREADY_LICENSE_URL: "https://playready.example/rightsmanager.asmx",
        VOD_DRM_FAIRPLAY_LICENSE_URL: "https://fairplay.example/license",
        VOD_DRM_FAIRPLAY_CERTIFICATE_URL: "https://fairplay.example/cert.der",
      }),
      {
        storage,
        jobQueue: memoryJobQueue(storage.state, { retryDelayMs: 200 }),
        objectStore: memoryObjectStore(),
        telemetrySink: sink,
        revocationStore: memoryRevocationStore(),
        // One x264 thread: the clear and the protected asset then encode to the same frames.
        mediaProcessor: ffmpegMediaProcessor({ x264Threads: 1 }),
      },
    );
    auth = await signUp(host.url, "play");
    await makeVideo(join(dir, "src.mp4"), { width: 640, height: 360, seconds: 4 });
    source = await readFile(join(dir, "src.mp4"));
    clearAsset = (await uploadAsset(host.url, auth, source, "clear")).assetId;
    const created = await call(host.url, "/v1/assets", {
      body: { title: "protected", drm: true },
      headers: auth,
    });
    drmAsset = created.body.asset.id;
    const started = await call(host.url, "/v1/uploads", {
      body: { asset_id: drmAsset, size_bytes: source.length },
      headers: auth,
    });
    await fetch(started.body.upload.parts[0].url, { method: "PUT", body: source });
    await call(host.url, `/v1/uploads/${started.body.upload.id}/complete`, { body: {}, headers: auth });
    expect((await settledAsset(host.url, auth, clearAsset)).status).toBe("ready");
    expect((await settledAsset(host.url, auth, drmAsset)).status).toBe("ready");
  }, 120_000);
  afterAll(async () => {
    await host?.close(1_000);
    await rm(dir, { recursive: true, force: true });
  });

  const session = (assetId: string, extra: Record<string, unknown> = {}) =>
    call(host.url, "/v1/playback/sessions", { body: { asset_id: assetId, ...extra }, headers: auth });

  it("mints a session for a ready asset: 201, a v1 token, manifest and telemetry URLs, no entitlement URL", async () => {
    const res = await session(clearAsset);
    expect(res.status).toBe(201);
    const { session: s, token, urls } = res.body;
    expect(Object.keys(res.body).sort()).toEqual(["session", "token", "urls"]);
    expect(s).toEqual({
      id: expect.any(String),
      asset_id: clearAsset,
      expires_at: expect.any(Number),
      drm: false,
    });
    expect(s.expires_at - Date.now()).toBeGreaterThan(3_590_000);
    expect(token).toMatch(/^v1\.[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(urls.manifest).toBe(`${urls.manifest.split("/v1/")[0]}/v1/play/${token}/master.m3u8`);
    expect(urls.telemetry).toMatch(/\/v1\/telemetry$/);
    expect("entitlement" in urls).toBe(false);
  });

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
    const manifest = await fetch(urls.manifest, { headers: { origin: "https://player.example" } });
    expect(manifest.status).toBe(200);
    expect(manifest.headers.get("content-type")).toBe("application/vnd.apple.mpegurl");
    expect(manifest.headers.get("cache-control")).toContain("private");
    expect(manifest.headers.get("access-control-allow-origin")).toBe("https://player.example");
    const text = await manifest.text();
    // Relative URIs: whatever a player resolves stays under /v1/play/<token>/.
    for (const line of text.split("\n").filter((l) => l && !l.startsWith("#")))
      expect(line).not.toMatch(/^(\/|https?:)/);
  });

  it("serves byte ranges of segments", async () => {
    const { urls } = (await session(clearAsset)).body;
    const base = urls.manifest.replace(/master\.m3u8$/, "");
    const master = await (await fetch(urls.manifest)).text();
    const media = master.split("\n").find((l: string) => l.endsWith(".m3u8")) as string;
    const playlist = await (await fetch(base + media)).text();
    const segment = playlist.split("\n").find((l: string) => l.endsWith(".m4s")) as string;
    const segmentUrl = new URL(segment, base + media).toString();
    const whole = await fetch(segmentUrl);
    const bytes = new Uint8Array(await whole.arrayBuffer());
    expect(whole.headers.get("accept-ranges")).toBe("bytes");
    const part = await fetch(segmentUrl, { headers: { range: "bytes=10-99" } });
    expect(part.status).toBe(206);
    expect(part.headers.get("content-range")).toBe(`bytes 10-99/${bytes.length}`);
    expect(new Uint8Array(await part.arrayBuffer())).toEqual(bytes.subarray(10, 100));
    expect((await fetch(segmentUrl, { headers: { range: `bytes=${bytes.length + 5}-` } })).status).toBe(416);
  });

  it("bounds ttl_seconds and refuses assets that are not ready", async () => {
    expect((await session(clearAsset, { ttl_seconds: 59 })).status).toBe(400);
    expect((await session(clearAsset, { ttl_seconds: 86_401 })).status).toBe(400);
    expect((await session(clearAsset, { ttl_seconds: 60 })).status).toBe(201);
    const pending = await call(host.url, "/v1/assets", { body: {}, headers: auth });
    const res = await session(pending.body.asset.id);
    expect(res.status).toBe(409);
    expect(res.body.code).toBe("upload_in_progress");
  });

  it("refuses the manifest after DELETE, and forged tokens, with the spec's error body", async () => {
    const { session: s, urls } = (await session(clearAsset)).body;
    expect((await fetch(urls.manifest)).status).toBe(200);
    const deleted = await call(host.url, `/v1/playback/sessions/${s.id}`, {
      method: "DELETE",
      headers: auth,
    });
    expect(deleted.status).toBe(204);
    const refused = await fetch(urls.manifest);
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({ error: "unauthorized", code: "unauthorized" });
    const forged = urls.manifest.replace(
      /\.([\w-])([\w-]*)\/master/,
      (_m: string, c: string, rest: string) => `.${c === "A" ? "B" : "A"}${rest}/master`,
    );
    expect((await fetch(forged)).status).toBe(401);
  });

  it("entitles a DRM session, releases the key only with the licence token, and the key decrypts", async () => {
    const res = await session(drmAsset);
    expect(res.body.session.drm).toBe(true);
    const { token, urls } = res.body;
    expect(urls.entitlement).toMatch(/\/v1\/drm\/entitlement$/);
    expect((await fetch(urls.entitlement, { method: "POST" })).status).toBe(401);
    const clearToken = (await session(clearAsset)).body.token;
    const conflict = await fetch(urls.entitlement, {
      method: "POST",
      headers: { authorization: `Bearer ${clearToken}` },
    });
    expect(conflict.status).toBe(409);
    expect(((await conflict.json()) as { code: string }).code).toBe("conflict");
    const entitled = await fetch(urls.entitlement, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
    });
    expect(entitled.status).toBe(200);
    const ent = (await entitled.json()) as {
      expires_at: number;
      license_headers: Record<string, string>;
      key_systems: Record<string, { license_url: string }>;
    };
    expect(ent.expires_at).toBeLessThanOrEqual(res.body.session.expires_at);
    expect(Object.keys(ent.license_headers)).toEqual(["x-vod-license-token"]);
    const clearkey = ent.key_systems["org.w3.clearkey"] as { license_url: string };
    expect(ent.key_systems).toEqual({
      "org.w3.clearkey": { license_url: clearkey.license_url },
      "com.widevine.alpha": { license_url: "https://widevine.example/license" },
      "com.microsoft.playready": { license_url: "https://playready.example/rightsmanager.asmx" },
      "com.apple.fps": {
        license_url: "https://fairplay.example/license",
        certificate_url: "https://fairplay.example/cert.der",
      },
    });
    expect(clearkey.license_url).toMatch(/\/v1\/drm\/clearkey\/license$/);

    // The media playlist names the key (KID) for ClearKey; the licence endpoint gives the key.
    const base = urls.manifest.replace(/master\.m3u8$/, "");
    const master = await (await fetch(urls.manifest)).text();
    const media = master
      .split("\n")
      .find((l: string) => l.endsWith(".m3u8") && !l.includes("audio")) as string;
    const playlist = await (await fetch(base + media)).text();
    expect(playlist).toMatch(/#EXT-X-KEY:METHOD=SAMPLE-AES-CTR/);
    expect(playlist).toContain('KEYFORMAT="org.w3.clearkey"');
    const licenseRequest = (kids: string[]) => ({ kids, type: "temporary" });
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
    // The KID is in the init segment (tenc box): ask the licence endpoint for every key it knows of this asset.
    const kidMatch = /KEYID=0x([0-9a-fA-F]{32})|base64,([A-Za-z0-9+/=_-]+)/.exec(playlist);
    expect(kidMatch).not.toBeNull();
    const unauthorised = await fetch(clearkey.license_url, {
      method: "POST",
      body: JSON.stringify(licenseRequest(["AAAAAAAAAAAAAAAAAAAAAA"])),
    });
    expect(unauthorised.status).toBe(401);
    const kidB64 = kidMatch?.[1]
      ? Buffer.from(kidMatch[1], "hex").toString("base64url")
      : Buffer.from(kidMatch?.[2] ?? "", "base64")
          .subarray(-16)
          .toString("base64url");
    const licensed = await fetch(clearkey.license_url, {
      method: "POST",
      headers: ent.license_headers,
      body: JSON.stringify(licenseRequest([kidB64])),
    });
    expect(licensed.status).toBe(200);
    const { keys } = (await licensed.json()) as { keys: Array<{ kty: string; kid: string; k: string }> };
    expect(keys).toEqual([{ kty: "oct", kid: kidB64, k: expect.stringMatching(/^[\w-]{22}$/) }]);
    const hexKey = Buffer.from(keys[0]?.k ?? "", "base64url").toString("hex");
    // At rest the key exists only wrapped: the stored row holds it in no readable form.
    const stored = [...storage.state.contentKeys.values()].find((k) => k.asset_id === drmAsset);
    expect(stored?.kid).toBe(Buffer.from(kidB64, "base64url").toString("hex"));
    const row = JSON.stringify(stored);
    for (const form of [hexKey, keys[0]?.k ?? "", Buffer.from(hexKey, "hex").toString("base64")])
      expect(row).not.toContain(form);

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

  it("takes telemetry: counts what it stores, drops invalid events, refuses bad batches", async () => {
    const { session: s, token, urls } = (await session(clearAsset)).body;
    const post = (body: string, type = "text/plain") =>
      fetch(urls.telemetry, { method: "POST", headers: { "content-type": type }, body });
    const ev = (i: number) => ({
      event: "heartbeat",
      ts_ms: 1000 + i,
      playhead_ms: i * 10,
      rendition: "360p",
      custom: { n: i },
    });
    const three = await post(JSON.stringify({ token, player_version: "t/1", events: [ev(1), ev(2), ev(3)] }));
    expect(three.status).toBe(204);
    expect(three.headers.get("x-telemetry-accepted")).toBe("3");
    const two = await post(
      JSON.stringify({ token, events: [ev(4), { event: "play", playhead_ms: 0 }, ev(5)] }),
      "application/json",
    );
    expect(two.headers.get("x-telemetry-accepted")).toBe("2");
    const nul = await post(JSON.stringify({ token, events: [ev(6), { ...ev(99), note: "a\u0000b" }] }));
    expect(nul.headers.get("x-telemetry-accepted")).toBe("1");
    expect(
      (await post(JSON.stringify({ token, events: Array.from({ length: 51 }, (_, i) => ev(i)) }))).status,
    ).toBe(400);
    const big = JSON.stringify({ token, events: [{ ...ev(0), pad: "x".repeat(33 * 1024) }] });
    expect((await post(big)).status).toBe(413);
    expect((await post("not json")).status).toBe(400);
    expect((await post(JSON.stringify({ events: [] }))).status).toBe(400);
    const forged = `${token.slice(0, -3)}AAA`;
    expect((await post(JSON.stringify({ token: forged, events: [ev(9)] }))).status).toBe(401);
    const stored = sink.events.filter((e) => e.session_id === s.id);
    expect(stored.map((e) => e.ts_ms)).toEqual([1001, 1002, 1003, 1004, 1005, 1006]);
    expect(stored[0]).toMatchObject({
      asset_id: clearAsset,
      event: "heartbeat",
      rendition: "360p",
      player_version: "t/1",
      extra: { custom: { n: 1 } },
    });
    await call(host.url, `/v1/playback/sessions/${s.id}`, { method: "DELETE", headers: auth });
    expect((await post(JSON.stringify({ token, events: [ev(7)] }))).status).toBe(401);
  });
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
    const a = await startHost(config, { ...shared, clock, jobQueue: memoryJobQueue(storage.state) });
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

import { execFile } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { ffmpegMediaProcessor } from "@vod/adapter-ffmpeg";
import { filesystemObjectStore } from "@vod/adapter-filesystem";
import { memoryObjectStore, memoryRevocationStore } from "@vod/adapter-memory";
import { startWebhookReceiver, type WebhookReceiver } from "@vod/contract-tests";
import type { RunningHost } from "@vod/host-express";
import { Webhook } from "standardwebhooks";
import { beforeAll, describe, expect, it } from "vitest";
import { suiteScratch } from "./suites.js";
import { call, makeVideo, settledAsset, signUp, uploadAsset } from "./support.js";

const run = promisify(execFile);

const SECONDS = 8;
const WIDTH = 640;
const HEIGHT = 360;

interface Stream {
  readonly codec_type: string;
  readonly height?: number;
}

/** What ffprobe, an independent demuxer, reads of a file: its streams and its duration in seconds. */
const probe = async (file: string) => {
  const { stdout } = await run("ffprobe", [
    ...["-v", "error", "-show_entries", "stream=codec_type,height:format=duration,format_name"],
    ...["-of", "json", file],
  ]);
  const parsed = JSON.parse(stdout) as {
    streams: Stream[];
    format: { duration: string; format_name: string };
  };
  return { streams: parsed.streams, duration: Number(parsed.format.duration) };
};

/** The order of the top-level MP4 boxes: `moov` before `mdat` is a file a player starts early. */
const topLevelBoxes = (bytes: Buffer) => {
  const boxes: string[] = [];
  for (let at = 0; at + 8 <= bytes.length; ) {
    let size = bytes.readUInt32BE(at);
    if (size === 1) size = Number(bytes.readBigUInt64BE(at + 8));
    boxes.push(bytes.subarray(at + 4, at + 8).toString("latin1"));
    if (size < 8) break;
    at += size;
  }
  return boxes;
};

interface StaticRendition {
  readonly name: string;
  readonly status: string;
  readonly size_bytes: number | null;
}

describe("static MP4 renditions of real media (mp4_support: standard)", () => {
  const scratch = suiteScratch("vod-static-");
  let dir: string;
  let host: RunningHost;
  /** A host whose store has local files, read in place: the silent asset is made there. */
  let local: RunningHost;
  let auth: Record<string, string>;
  let localAuth: Record<string, string>;
  let receiver: WebhookReceiver;
  let secret: string;
  let source: string;
  let silentSource: string;
  let patched: string;
  let silent: string;
  const hook = "/hook/static";

  /** Waits until none of the asset's static renditions is preparing; the asset then. */
  const settledStatic = async (assetId: string, on = host, as = auth) => {
    const until = Date.now() + 120_000;
    for (;;) {
      const { body } = await call(on.url, `/v1/assets/${assetId}`, { headers: as });
      const list = body.asset.static_renditions as StaticRendition[];
      if (list.length > 0 && list.every((r) => r.status !== "preparing")) return body.asset;
      if (Date.now() > until) throw new Error(`static renditions still ${JSON.stringify(list)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  };

  beforeAll(async () => {
    dir = await scratch.dir();
    receiver = await startWebhookReceiver();
    scratch.afterwards(() => receiver.close());
    host = await scratch.memoryHost(
      { VOD_DATA_DIR: dir, VOD_LOG_LEVEL: "silent", VOD_WEBHOOKS_ALLOW_PRIVATE: "true" },
      {
        // No local files: the remux fetches every segment from the store.
        objectStore: memoryObjectStore(),
        revocationStore: memoryRevocationStore(),
        mediaProcessor: ffmpegMediaProcessor(),
      },
      { retryDelayMs: 200 },
    );
    local = await scratch.memoryHost(
      { VOD_DATA_DIR: join(dir, "local"), VOD_LOG_LEVEL: "silent" },
      {
        objectStore: filesystemObjectStore({ root: join(dir, "objects") }),
        revocationStore: memoryRevocationStore(),
        mediaProcessor: ffmpegMediaProcessor(),
      },
      { retryDelayMs: 200 },
    );
    auth = await signUp(host.url, "static");
    localAuth = await signUp(local.url, "static-local");
    const created = await call(host.url, "/v1/webhooks", {
      headers: auth,
      body: { url: `${receiver.url}${hook}`, events: ["asset.static_rendition.ready"] },
    });
    expect(created.status).toBe(201);
    secret = created.body.secret;
    source = join(dir, "source.mp4");
    silentSource = join(dir, "silent.mp4");
    await makeVideo(source, { width: WIDTH, height: HEIGHT, seconds: SECONDS, fps: 25 });
    await makeVideo(silentSource, { width: WIDTH, height: HEIGHT, seconds: SECONDS, fps: 25, audio: false });
    // Turned on once ready (PATCH), and from creation on for the one without audio.
    patched = (await uploadAsset(host.url, auth, await readFile(source), "patched")).assetId;
    const draft = await call(local.url, "/v1/assets", {
      headers: localAuth,
      body: { title: "silent", mp4_support: "standard" },
    });
    expect(draft.status).toBe(201);
    expect(draft.body.asset).toMatchObject({ mp4_support: "standard", static_renditions: [] });
    silent = draft.body.asset.id;
    const bytes = await readFile(silentSource);
    const started = await call(local.url, "/v1/uploads", {
      headers: localAuth,
      body: { asset_id: silent, size_bytes: bytes.length },
    });
    const part = started.body.upload.parts[0] as { url: string };
    expect((await fetch(part.url, { method: "PUT", body: bytes })).status).toBe(200);
    const completed = await call(local.url, `/v1/uploads/${started.body.upload.id}/complete`, {
      headers: localAuth,
      body: {},
    });
    expect(completed.status).toBe(200);
    const ready = await settledAsset(host.url, auth, patched);
    expect(ready).toMatchObject({ status: "ready", mp4_support: "none", static_renditions: [] });
  }, 180_000);

  const session = async (assetId: string, on = host, as = auth) => {
    const res = await call(on.url, "/v1/playback/sessions", { body: { asset_id: assetId }, headers: as });
    expect(res.status).toBe(201);
    return res.body as { token: string; urls: Record<string, string> };
  };

  const save = async (url: string, name: string, headers: Record<string, string> = {}) => {
    const res = await fetch(url, { headers });
    const bytes = Buffer.from(await res.arrayBuffer());
    const path = join(dir, name);
    await writeFile(path, bytes);
    return { res, bytes, path };
  };

  it("makes high.mp4, low.mp4 and audio.m4a once PATCH turns them on, each announced by its webhook", async () => {
    const before = await session(patched);
    expect(before.urls).not.toHaveProperty("mp4_high");
    const base = before.urls.manifest?.replace(/master\.m3u8$/, "") as string;
    const early = await call(base.replace(/\/$/, ""), "/high.mp4");
    expect(early.status).toBe(404);
    expect(early.body.code).toBe("not_found");

    const res = await call(host.url, `/v1/assets/${patched}`, {
      method: "PATCH",
      headers: auth,
      body: { mp4_support: "standard" },
    });
    expect(res.status).toBe(200);
    expect(res.body.asset.mp4_support).toBe("standard");

    const asset = await settledStatic(patched);
    const list = asset.static_renditions as StaticRendition[];
    expect(list.map((r) => [r.name, r.status])).toEqual([
      ["high.mp4", "ready"],
      ["low.mp4", "ready"],
      ["audio.m4a", "ready"],
    ]);
    for (const r of list) expect(r.size_bytes).toBeGreaterThan(1000);

    const delivered = await receiver.waitFor(hook, 3, 30_000);
    const events = delivered.map((d) =>
      new Webhook(secret).verify(d.body, {
        "webhook-id": String(d.headers["webhook-id"]),
        "webhook-timestamp": String(d.headers["webhook-timestamp"]),
        "webhook-signature": String(d.headers["webhook-signature"]),
      }),
    ) as Array<{ type: string; data: { asset: { id: string }; static_rendition: StaticRendition } }>;
    expect(
      events.every((e) => e.type === "asset.static_rendition.ready" && e.data.asset.id === patched),
    ).toBe(true);
    expect(events.map((e) => e.data.static_rendition.name).sort()).toEqual([
      "audio.m4a",
      "high.mp4",
      "low.mp4",
    ]);
    for (const e of events)
      expect(e.data.static_rendition).toEqual(list.find((r) => r.name === e.data.static_rendition.name));
  }, 180_000);

  it("serves files ffprobe reads as the renditions' heights with the source's duration; audio.m4a holds audio only", async () => {
    const { token, urls } = await session(patched);
    const base = urls.manifest?.replace(/master\.m3u8$/, "") as string;
    expect(base).toContain(`/v1/play/${token}/`);
    expect(urls.mp4_high).toBe(`${base}high.mp4`);
    expect(urls.mp4_low).toBe(`${base}low.mp4`);
    expect(urls.audio).toBe(`${base}audio.m4a`);

    const { asset } = (await call(host.url, `/v1/assets/${patched}`, { headers: auth })).body;
    const heights = (asset.renditions as Array<{ height: number; status: string }>)
      .filter((r) => r.status === "ready")
      .map((r) => r.height);
    const sourceDuration = (await probe(source)).duration;
    const sizes = new Map((asset.static_renditions as StaticRendition[]).map((r) => [r.name, r.size_bytes]));

    const high = await save(urls.mp4_high as string, "high.mp4");
    expect(high.res.status).toBe(200);
    expect(high.res.headers.get("content-type")).toBe("video/mp4");
    expect(high.res.headers.get("accept-ranges")).toBe("bytes");
    expect(high.bytes.length).toBe(sizes.get("high.mp4"));
    const highProbe = await probe(high.path);
    expect(highProbe.streams.map((s) => s.codec_type).sort()).toEqual(["audio", "video"]);
    expect(highProbe.streams.find((s) => s.codec_type === "video")?.height).toBe(Math.max(...heights));
    expect(Math.abs(highProbe.duration - sourceDuration)).toBeLessThanOrEqual(0.1);
    const boxes = topLevelBoxes(high.bytes);
    expect(boxes.indexOf("moov")).toBeGreaterThanOrEqual(0);
    expect(boxes.indexOf("moov")).toBeLessThan(boxes.indexOf("mdat"));

    const low = await save(urls.mp4_low as string, "low.mp4");
    expect(low.res.status).toBe(200);
    const lowProbe = await probe(low.path);
    expect(lowProbe.streams.map((s) => s.codec_type).sort()).toEqual(["audio", "video"]);
    expect(lowProbe.streams.find((s) => s.codec_type === "video")?.height).toBe(Math.min(...heights));
    expect(Math.abs(lowProbe.duration - sourceDuration)).toBeLessThanOrEqual(0.1);

    const audio = await save(urls.audio as string, "audio.m4a");
    expect(audio.res.status).toBe(200);
    expect(audio.res.headers.get("content-type")).toBe("audio/mp4");
    const audioProbe = await probe(audio.path);
    expect(audioProbe.streams.map((s) => s.codec_type)).toEqual(["audio"]);
    expect(Math.abs(audioProbe.duration - sourceDuration)).toBeLessThanOrEqual(0.1);
  }, 60_000);

  it("answers byte ranges (206, and 416 as the spec's JSON) and names a download as asked", async () => {
    const { urls } = await session(patched);
    const whole = Buffer.from(await (await fetch(urls.mp4_high as string)).arrayBuffer());

    const part = await save(urls.mp4_high as string, "part.bin", { range: "bytes=100-1099" });
    expect(part.res.status).toBe(206);
    expect(part.res.headers.get("content-range")).toBe(`bytes 100-1099/${whole.length}`);
    expect(part.bytes.equals(whole.subarray(100, 1100))).toBe(true);

    const past = await fetch(urls.mp4_high as string, { headers: { range: `bytes=${whole.length}-` } });
    expect(past.status).toBe(416);
    expect(past.headers.get("content-range")).toBe(`bytes */${whole.length}`);
    expect(await past.json()).toMatchObject({ code: "invalid_request", details: { size: whole.length } });

    const named = await fetch(`${urls.mp4_low}?download=${encodeURIComponent("My clip (low).mp4")}`);
    expect(named.status).toBe(200);
    expect(named.headers.get("content-disposition")).toBe('attachment; filename="My clip (low).mp4"');
    await named.arrayBuffer();
    const accented = await fetch(`${urls.audio}?download=${encodeURIComponent("Café.m4a")}`, {
      headers: { range: "bytes=0-9" },
    });
    expect(accented.status).toBe(206);
    expect(accented.headers.get("content-disposition")).toBe(
      "attachment; filename=\"Caf?.m4a\"; filename*=UTF-8''Caf%C3%A9.m4a",
    );
    await accented.arrayBuffer();
    const plain = await fetch(urls.mp4_low as string);
    expect(plain.headers.get("content-disposition")).toBeNull();
    await plain.arrayBuffer();

    const base = (urls.manifest as string).replace(/\/master\.m3u8$/, "");
    for (const bad of ["a%2Fb.mp4", "", "..", "x%22y", "tab%09name", "x".repeat(201)]) {
      const res = await call(base, `/high.mp4?download=${bad}`);
      expect(res.status, bad).toBe(400);
      expect(res.body.code, bad).toBe("invalid_request");
      expect(
        (res.body.details.fields as Array<{ path: string[] }>).map((f) => f.path),
        bad,
      ).toContainEqual(["download"]);
    }
  }, 60_000);

  it("makes no audio.m4a of a source without audio, and answers 404 for it (a store read in place)", async () => {
    const asset = await settledStatic(silent, local, localAuth);
    expect((asset.static_renditions as StaticRendition[]).map((r) => [r.name, r.status])).toEqual([
      ["high.mp4", "ready"],
      ["low.mp4", "ready"],
    ]);
    const { urls } = await session(silent, local, localAuth);
    expect(urls).toHaveProperty("mp4_high");
    expect(urls).not.toHaveProperty("audio");
    const base = (urls.manifest as string).replace(/\/master\.m3u8$/, "");
    const missing = await call(base, "/audio.m4a");
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe("not_found");
    const high = await save(urls.mp4_high as string, "silent-high.mp4");
    const probed = await probe(high.path);
    expect(probed.streams.map((s) => s.codec_type)).toEqual(["video"]);
    expect(Math.abs(probed.duration - (await probe(silentSource)).duration)).toBeLessThanOrEqual(0.1);
  }, 180_000);

  it("refuses standard for a DRM asset, at creation and by PATCH", async () => {
    const created = await call(host.url, "/v1/assets", {
      headers: auth,
      body: { title: "protected", drm: true, mp4_support: "standard" },
    });
    expect(created.status).toBe(400);
    expect(created.body.code).toBe("invalid_request");
    expect(created.body.details.fields.map((f: { path: string[] }) => f.path)).toContainEqual([
      "mp4_support",
    ]);
    const drm = await call(host.url, "/v1/assets", {
      headers: auth,
      body: { title: "protected", drm: true },
    });
    const patch = await call(host.url, `/v1/assets/${drm.body.asset.id}`, {
      method: "PATCH",
      headers: auth,
      body: { mp4_support: "standard" },
    });
    expect(patch.status).toBe(400);
    expect(patch.body.details.fields.map((f: { path: string[] }) => f.path)).toContainEqual(["mp4_support"]);
  });
});

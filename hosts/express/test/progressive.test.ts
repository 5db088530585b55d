import { execFile } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { promisify } from "node:util";
import { ffmpegMediaProcessor } from "@vod/adapter-ffmpeg";
import { memoryObjectStore, memoryRevocationStore } from "@vod/adapter-memory";
import { type MediaProcessor, MediaRejected } from "@vod/core";
import type { RunningHost } from "@vod/host-express";
import { Effect } from "effect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatedProcessor } from "./media-gate.js";
import { suiteScratch } from "./suites.js";
import { call, eventually, makeVideo, settledAsset, signUp, uploadAsset } from "./support.js";

const run = promisify(execFile);

interface Rendition {
  name: string;
  width: number;
  height: number;
  bitrate_kbps: number;
  status: string;
}
interface Event {
  type: string;
  data: {
    asset: { id: string; status: string; ready_at: number | null; renditions: Rendition[] };
    rendition?: Rendition;
  };
}

const ffprobeStreams = async (url: string) =>
  (
    JSON.parse(
      (await run("ffprobe", ["-v", "error", "-print_format", "json", "-show_streams", url])).stdout,
    ) as { streams: Array<{ codec_type: string; codec_name: string; height?: number }> }
  ).streams;

const variantHeights = (master: string) =>
  [...master.matchAll(/RESOLUTION=\d+x(\d+)/g)].map((m) => Number(m[1])).sort((a, b) => a - b);

/** The heights of a DASH manifest's video representations. */
const dashHeights = (mpd: string) =>
  [...mpd.matchAll(/<Representation [^>]*mimeType="video\/mp4"[^>]*height="(\d+)"/g)]
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);

describe("progressive readiness: playable at the first rendition, the others added as they are made", () => {
  const scratch = suiteScratch("vod-progressive-");
  let dir: string;
  let host: RunningHost;
  let auth: Record<string, string>;
  let gate: ReturnType<typeof gatedProcessor>;
  let receiver: Server;
  let receiverUrl: string;
  const events: Event[] = [];

  beforeAll(async () => {
    dir = await scratch.dir();
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        events.push(JSON.parse(Buffer.concat(chunks).toString("utf8")) as Event);
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
    scratch.afterwards(() => new Promise((resolve) => receiver.close(resolve)));
    // One x264 thread: the clear and the protected asset then encode to the same frames.
    gate = gatedProcessor(ffmpegMediaProcessor({ x264Threads: 1 }));
    host = await scratch.memoryHost(
      { VOD_DATA_DIR: dir, VOD_LOG_LEVEL: "silent", VOD_WEBHOOKS_ALLOW_PRIVATE: "true" },
      {
        objectStore: memoryObjectStore(),
        revocationStore: memoryRevocationStore(),
        mediaProcessor: gate.processor,
      },
      { retryDelayMs: 200 },
    );
    auth = await signUp(host.url, "progressive");
    const hook = await call(host.url, "/v1/webhooks", {
      body: { url: receiverUrl, events: ["*"] },
      headers: auth,
    });
    expect(hook.status).toBe(201);
    await makeVideo(join(dir, "src.mp4"), { width: 1280, height: 720, seconds: 4 });
  }, 60_000);

  afterAll(() => gate?.open());

  const asset = async (id: string) =>
    (await call(host.url, `/v1/assets/${id}`, { headers: auth })).body.asset;
  const session = async (id: string) => {
    const res = await call(host.url, "/v1/playback/sessions", { body: { asset_id: id }, headers: auth });
    expect(res.status).toBe(201);
    return res.body as { token: string; urls: { manifest: string; dash: string; entitlement?: string } };
  };
  const statuses = (a: { renditions: Rendition[] }) =>
    Object.fromEntries(a.renditions.map((r) => [r.name, r.status]));

  it("is ready and playable with 360p while 720p, 480p and 240p are pending; a new session then sees them all", async () => {
    const source = await readFile(join(dir, "src.mp4"));
    const { assetId } = await uploadAsset(host.url, auth, source, "progressive");
    await gate.held();

    const early = await asset(assetId);
    expect(early.status).toBe("ready");
    expect(early.ready_at).toEqual(expect.any(Number));
    expect(early.renditions).toEqual([
      { name: "720p", width: 1280, height: 720, bitrate_kbps: 3000, status: "pending" },
      { name: "480p", width: 854, height: 480, bitrate_kbps: 1400, status: "pending" },
      { name: "360p", width: 640, height: 360, bitrate_kbps: 800, status: "ready" },
      { name: "240p", width: 426, height: 240, bitrate_kbps: 400, status: "pending" },
    ]);
    // Playable now: the master lists the ready rendition only, and ffprobe reads its media
    // (first segment included) through the playback URLs.
    const first = await session(assetId);
    const earlyMaster = await (await fetch(first.urls.manifest)).text();
    expect(variantHeights(earlyMaster)).toEqual([360]);
    const streams = await ffprobeStreams(first.urls.manifest);
    expect(streams.filter((s) => s.codec_type === "video").map((s) => s.height)).toEqual([360]);
    expect(streams.some((s) => s.codec_type === "audio" && s.codec_name === "aac")).toBe(true);
    const base = first.urls.manifest.replace(/master\.m3u8$/, "");
    const playlist = await (await fetch(`${base}360p/playlist.m3u8`)).text();
    const segment = playlist.split("\n").find((l) => l.endsWith(".m4s"));
    const init = await fetch(`${base}360p/init.mp4`);
    const firstSegment = await fetch(`${base}360p/${segment}`);
    expect([init.status, firstSegment.status]).toEqual([200, 200]);
    await writeFile(
      join(dir, "first.mp4"),
      Buffer.concat([Buffer.from(await init.arrayBuffer()), Buffer.from(await firstSegment.arrayBuffer())]),
    );
    const firstStreams = await ffprobeStreams(join(dir, "first.mp4"));
    expect(firstStreams).toEqual([
      expect.objectContaining({ codec_type: "video", codec_name: "h264", height: 360 }),
    ]);
    expect((await fetch(`${base}720p/playlist.m3u8`)).status).toBe(404);
    // The DASH manifest likewise lists the ready rendition alone, and ffprobe plays it.
    expect(dashHeights(await (await fetch(first.urls.dash)).text())).toEqual([360]);
    const dashStreams = await ffprobeStreams(first.urls.dash);
    expect(dashStreams.filter((s) => s.codec_type === "video").map((s) => s.height)).toEqual([360]);

    gate.open();
    const done = await settledAsset(host.url, auth, assetId);
    expect(statuses(done)).toEqual({ "720p": "ready", "480p": "ready", "360p": "ready", "240p": "ready" });
    expect(done.ready_at).toBe(early.ready_at);
    // A new session, and a reload of the master by the first one, see every rendition.
    const later = await session(assetId);
    expect(variantHeights(await (await fetch(later.urls.manifest)).text())).toEqual([240, 360, 480, 720]);
    expect(variantHeights(await (await fetch(first.urls.manifest)).text())).toEqual([240, 360, 480, 720]);
    // The DASH manifest, merged as each unit was packaged, lists them all too.
    expect(dashHeights(await (await fetch(later.urls.dash)).text())).toEqual([240, 360, 480, 720]);
    const all = await ffprobeStreams(later.urls.manifest);
    expect(
      all
        .filter((s) => s.codec_type === "video")
        .map((s) => s.height)
        .sort((a, b) => (a ?? 0) - (b ?? 0)),
    ).toEqual([240, 360, 480, 720]);

    // Webhooks: ready once (with 360p alone ready), a rendition.ready per rendition, and
    // renditions_complete once no rendition is pending.
    const mine = () => events.filter((e) => e.data.asset.id === assetId);
    await eventually("the webhook events", () => mine().length >= 9, 30_000, 50);
    const byType = (type: string) => mine().filter((e) => e.type === type);
    expect(byType("asset.ready")).toHaveLength(1);
    expect(statuses(byType("asset.ready")[0]!.data.asset)).toEqual(statuses(early));
    expect(
      byType("asset.rendition.ready")
        .map((e) => e.data.rendition?.name)
        .sort(),
    ).toEqual(["240p", "360p", "480p", "720p"]);
    for (const e of byType("asset.rendition.ready"))
      expect(e.data.rendition).toEqual({
        ...done.renditions.find((r: Rendition) => r.name === e.data.rendition?.name),
      });
    expect(byType("asset.renditions_complete")).toHaveLength(1);
    expect(byType("asset.renditions_complete")[0]!.data.asset).toEqual(done);
  }, 120_000);

  it("makes a DRM asset ready at its first rendition, encrypted, that the licence key decrypts", async () => {
    const source = await readFile(join(dir, "src.mp4"));
    const clear = (await uploadAsset(host.url, auth, source, "clear twin")).assetId;
    await gate.held();
    gate.open();
    await settledAsset(host.url, auth, clear);
    const { assetId } = await uploadAsset(host.url, auth, source, "protected", { drm: true });
    await gate.held();
    expect(statuses(await asset(assetId))).toEqual({
      "720p": "pending",
      "480p": "pending",
      "360p": "ready",
      "240p": "pending",
    });

    const { token, urls } = await session(assetId);
    const base = urls.manifest.replace(/master\.m3u8$/, "");
    expect(variantHeights(await (await fetch(urls.manifest)).text())).toEqual([360]);
    const playlist = await (await fetch(`${base}360p/playlist.m3u8`)).text();
    expect(playlist).toContain("METHOD=SAMPLE-AES-CTR");
    expect(playlist).toContain('KEYFORMAT="org.w3.clearkey"');
    const kid = Buffer.from(/base64,([A-Za-z0-9+/=]+)"/.exec(playlist)?.[1] ?? "", "base64").toString(
      "base64url",
    );
    const ent = (await (
      await fetch(urls.entitlement as string, {
        method: "POST",
        headers: { authorization: `Bearer ${token}` },
      })
    ).json()) as {
      license_headers: Record<string, string>;
      key_systems: Record<string, { license_url: string }>;
    };
    const licensed = await fetch(ent.key_systems["org.w3.clearkey"]!.license_url, {
      method: "POST",
      headers: ent.license_headers,
      body: JSON.stringify({ kids: [kid], type: "temporary" }),
    });
    expect(licensed.status).toBe(200);
    const { keys } = (await licensed.json()) as { keys: Array<{ k: string }> };
    const hexKey = Buffer.from(keys[0]?.k ?? "", "base64url").toString("hex");

    const firstOf = async (b: string) => {
      const p = await (await fetch(`${b}360p/playlist.m3u8`)).text();
      const seg = p.split("\n").find((l) => l.endsWith(".m4s"));
      return Buffer.concat([
        Buffer.from(await (await fetch(`${b}360p/init.mp4`)).arrayBuffer()),
        Buffer.from(await (await fetch(`${b}360p/${seg}`)).arrayBuffer()),
      ]);
    };
    await writeFile(join(dir, "drm.mp4"), await firstOf(base));
    const clearBase = (await session(clear)).urls.manifest.replace(/master\.m3u8$/, "");
    await writeFile(join(dir, "clear.mp4"), await firstOf(clearBase));
    const frames = async (file: string, key?: string) =>
      (
        await run("ffmpeg", [
          ...(key ? ["-decryption_key", key] : []),
          ...["-v", "error", "-i", file, "-map", "0:v:0", "-f", "framemd5", "-"],
        ]).catch((e: { stdout?: string }) => ({ stdout: e.stdout ?? "" }))
      ).stdout
        .split("\n")
        .filter((l) => l && !l.startsWith("#"))
        .map((l) => l.split(",").pop()?.trim());
    const reference = await frames(join(dir, "clear.mp4"));
    expect(reference.length).toBeGreaterThan(10);
    expect(await frames(join(dir, "drm.mp4"), hexKey)).toEqual(reference);
    expect(await frames(join(dir, "drm.mp4"))).not.toEqual(reference);

    gate.open();
    const done = await settledAsset(host.url, auth, assetId);
    expect(done.renditions.every((r: Rendition) => r.status === "ready")).toBe(true);
    const later = await session(assetId);
    const laterBase = later.urls.manifest.replace(/master\.m3u8$/, "");
    expect(variantHeights(await (await fetch(later.urls.manifest)).text())).toEqual([240, 360, 480, 720]);
    expect(await (await fetch(`${laterBase}720p/playlist.m3u8`)).text()).toContain(
      'KEYFORMAT="org.w3.clearkey"',
    );
  }, 180_000);
});

describe("progressive readiness when a later rendition fails", () => {
  const scratch = suiteScratch("vod-progressive-fail-");

  /** Fails each run adding renditions with `failures`' next code while there is one; records every run's renditions. */
  const failingProcessor = (
    inner: MediaProcessor,
    failures: Array<"processing_error" | "unsupported_codec">,
  ) => {
    const runs: string[][] = [];
    const processor: MediaProcessor = {
      probe: (input) => inner.probe(input),
      plan: (source, ladder) => inner.plan(source, ladder),
      package: (input, source, renditions, emit, options) => {
        runs.push(renditions.map((r) => r.name));
        const code = options?.shared === false ? failures.shift() : undefined;
        return code === undefined
          ? inner.package(input, source, renditions, emit, options)
          : Effect.fail(new MediaRejected({ code, message: `made to fail: ${code}` }));
      },
    };
    return { processor, runs };
  };

  const hostWith = async (processor: MediaProcessor) => {
    const dir = await scratch.dir();
    const host = await scratch.memoryHost(
      { VOD_DATA_DIR: dir, VOD_LOG_LEVEL: "silent", VOD_JOB_MAX_ATTEMPTS: "3" },
      {
        objectStore: memoryObjectStore(),
        revocationStore: memoryRevocationStore(),
        mediaProcessor: processor,
      },
      { retryDelayMs: 100 },
    );
    const auth = await signUp(host.url, "later");
    await makeVideo(join(dir, "src.mp4"), { width: 640, height: 360, seconds: 2 });
    const { assetId } = await uploadAsset(host.url, auth, await readFile(join(dir, "src.mp4")));
    const asset = await settledAsset(host.url, auth, assetId);
    const play = await call(host.url, "/v1/playback/sessions", {
      body: { asset_id: assetId },
      headers: auth,
    });
    const master = await (await fetch(play.body.urls.manifest)).text();
    return { asset, master };
  };

  it("a retried job makes only what is pending: the first rendition is not encoded again", async () => {
    const failing = failingProcessor(ffmpegMediaProcessor({ x264Preset: "ultrafast" }), ["processing_error"]);
    const { asset, master } = await hostWith(failing.processor);
    expect(asset.status).toBe("ready");
    expect(asset.renditions.map((r: Rendition) => [r.name, r.status])).toEqual([
      ["360p", "ready"],
      ["240p", "ready"],
    ]);
    expect(failing.runs).toEqual([["360p"], ["240p"], ["240p"]]);
    expect(variantHeights(master)).toEqual([240, 360]);
  }, 60_000);

  it("a rendition that cannot be made is failed, the asset stays ready with the others", async () => {
    const failing = failingProcessor(ffmpegMediaProcessor({ x264Preset: "ultrafast" }), [
      "unsupported_codec",
    ]);
    const { asset, master } = await hostWith(failing.processor);
    expect(asset).toMatchObject({ status: "ready", failure_code: null, ready_at: expect.any(Number) });
    expect(asset.renditions.map((r: Rendition) => [r.name, r.status])).toEqual([
      ["360p", "ready"],
      ["240p", "failed"],
    ]);
    expect(failing.runs).toEqual([["360p"], ["240p"]]);
    expect(variantHeights(master)).toEqual([360]);
  }, 60_000);
});

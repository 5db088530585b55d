import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { ffmpegMediaProcessor } from "@vod/adapter-ffmpeg";
import { memoryObjectStore, memoryRevocationStore } from "@vod/adapter-memory";
import type { RunningHost } from "@vod/host-express";
import {
  launchChromium,
  type PageServer,
  packageFile,
  servePages,
  type TestBrowser,
} from "@vod/test-services/browser";
import HLS from "hls-parser";
import { beforeAll, describe, expect, it } from "vitest";
import { suiteScratch } from "./suites.js";
import { call, makeVideo, settledAsset, signUp, uploadAsset } from "./support.js";

const run = promisify(execFile);

// Cue times far from segment boundaries and from the start, so that "at its time" is unambiguous.
const FRENCH = [
  "WEBVTT",
  "",
  "00:00:00.000 --> 00:00:01.500",
  "Début",
  "",
  "00:00:01.500 --> 00:00:07.500",
  "Bonjour tout le monde",
  "",
].join("\n");
const SPANISH_SRT = ["1", "00:00:00,000 --> 00:00:07,500", "Hola a todos", ""].join("\r\n");

interface Session {
  readonly manifest: string;
  readonly dash: string;
  readonly token: string;
  readonly entitlement?: string;
}

/** The pages' globals; the functions given to `page.evaluate` run there, not here. */
type HlsPage = typeof globalThis & {
  player: {
    start(session: { manifest: string }): Promise<void>;
    state(): { currentTime: number; fatal: string[] };
    subtitles(): Array<{ name: string; lang: string }>;
    showSubtitles(lang: string): void;
    activeCues(): string[];
  };
};
type ShakaPage = typeof globalThis & {
  player: {
    supported(): boolean;
    start(session: { manifest: string; token?: string; entitlement?: string }): Promise<void>;
    state(): {
      heights: number[];
      texts: Array<{ language: string; kind: string; label: string }>;
      keySystem: string;
      currentTime: number;
      decodedFrames: number;
      errors: string[];
    };
  };
};

describe("text tracks and DASH of real media: ffprobe, hls.js and Shaka Player in headless Chromium", () => {
  const scratch = suiteScratch("vod-tracks-");
  let browser: TestBrowser;
  let pages: PageServer;
  let host: RunningHost;
  let auth: Record<string, string>;
  let clearAsset: string;
  let drmAsset: string;

  beforeAll(async () => {
    browser = await launchChromium();
    scratch.afterwards(() => browser.close());
    pages = await servePages({
      "/hls": { file: fileURLToPath(new URL("./fixtures/hls-player.html", import.meta.url)) },
      "/hls.min.js": { file: packageFile("hls.js/dist/hls.min.js") },
      "/shaka": { file: fileURLToPath(new URL("./fixtures/shaka-player.html", import.meta.url)) },
      "/shaka-player.compiled.js": { file: packageFile("shaka-player/dist/shaka-player.compiled.js") },
    });
    scratch.afterwards(() => pages.close());
    const dir = await scratch.dir();
    host = await scratch.memoryHost(
      { VOD_DATA_DIR: dir, VOD_LOG_LEVEL: "silent" },
      {
        objectStore: memoryObjectStore(),
        revocationStore: memoryRevocationStore(),
        mediaProcessor: ffmpegMediaProcessor(),
      },
      { retryDelayMs: 200 },
    );
    auth = await signUp(host.url, "tracks");
    // 640x360 has two rungs (360p first, 240p added after): the DASH manifest is a merged one.
    await makeVideo(join(dir, "src.mp4"), { width: 640, height: 360, seconds: 8 });
    const source = await readFile(join(dir, "src.mp4"));
    clearAsset = (await uploadAsset(host.url, auth, source, "clear")).assetId;
    drmAsset = (await uploadAsset(host.url, auth, source, "protected", { drm: true })).assetId;
    for (const id of [clearAsset, drmAsset]) {
      expect((await settledAsset(host.url, auth, id)).status).toBe("ready");
      for (const body of [
        { type: "text", language_code: "fr", content: FRENCH },
        { type: "text", language_code: "es", name: "Español", closed_captions: true, content: SPANISH_SRT },
      ])
        expect((await call(host.url, `/v1/assets/${id}/tracks`, { body, headers: auth })).status).toBe(201);
    }
  }, 180_000);

  const session = async (assetId: string): Promise<Session> => {
    const res = await call(host.url, "/v1/playback/sessions", { body: { asset_id: assetId }, headers: auth });
    expect(res.status).toBe(201);
    return { ...res.body.urls, token: res.body.token };
  };

  it("the master lists the subtitle group (hls-parser), whose playlists ffmpeg reads with each cue at its time", async () => {
    const { manifest } = await session(clearAsset);
    const master = HLS.parse(await (await fetch(manifest)).text());
    if (!master.isMasterPlaylist) throw new Error("the session's manifest is not a master playlist");
    expect(master.variants.length).toBe(2);
    for (const variant of master.variants)
      expect(variant.subtitles.map((r) => [r.name, r.language, r.isDefault, r.autoselect])).toEqual([
        ["French", "fr", false, true],
        ["Español", "es", false, true],
      ]);
    const [french, spanish] = master.variants[0]!.subtitles;
    const cues = async (uri: string) =>
      (await run("ffmpeg", ["-v", "error", "-i", new URL(uri, manifest).href, "-f", "webvtt", "-"])).stdout;
    // Segments of 6 s: the French cue from 1.5 s to 7.5 s crosses into the second one.
    expect(await cues(french!.uri!)).toContain("00:01.500 --> 00:07.500\nBonjour tout le monde");
    expect(await cues(spanish!.uri!)).toContain("00:00.000 --> 00:07.500\nHola a todos");
    const { stdout } = await run("ffprobe", [
      ...["-v", "error", "-show_entries", "stream=codec_type,codec_name", "-of", "csv=p=0"],
      new URL(french!.uri!, manifest).href,
    ]);
    // csv prints the program's stream and the stream itself.
    expect(new Set(stdout.split("\n").filter((l) => l !== ""))).toEqual(new Set(["webvtt,subtitle"]));
  }, 60_000);

  it("hls.js exposes both subtitle tracks and shows the French cue at its time", async () => {
    const { manifest } = await session(clearAsset);
    const { page, problems } = await browser.open(`${pages.url}/hls`);
    try {
      await page.evaluate((m) => (globalThis as HlsPage).player.start({ manifest: m }), manifest);
      await page.waitForFunction(() => (globalThis as HlsPage).player.subtitles().length > 0, undefined, {
        timeout: 30_000,
      });
      expect(await page.evaluate(() => (globalThis as HlsPage).player.subtitles())).toEqual([
        { name: "French", lang: "fr" },
        { name: "Español", lang: "es" },
      ]);
      await page.evaluate(() => (globalThis as HlsPage).player.showSubtitles("fr"));
      // The second cue runs from 1.5 s to 7.5 s: read while the video is inside it.
      await page.waitForFunction(
        () => {
          const { player } = globalThis as HlsPage;
          const t = player.state().currentTime;
          return (t > 2.5 && t < 7 && player.activeCues().length > 0) || player.state().fatal.length > 0;
        },
        undefined,
        { timeout: 60_000 },
      );
      const seen = await page.evaluate(() => ({
        cues: (globalThis as HlsPage).player.activeCues(),
        state: (globalThis as HlsPage).player.state(),
      }));
      expect(seen.state.fatal).toEqual([]);
      expect(seen.cues).toEqual(["Bonjour tout le monde"]);
      expect(problems()).toEqual([]);
    } finally {
      await page.context().close();
    }
  }, 120_000);

  /** Shaka Player on the session's DASH URL until 2 s have played or it reports an error. */
  const playDash = async (s: Session) => {
    const { page, problems } = await browser.open(`${pages.url}/shaka`);
    try {
      expect(await page.evaluate(() => (globalThis as ShakaPage).player.supported())).toBe(true);
      await page.evaluate((x) => (globalThis as ShakaPage).player.start(x), {
        manifest: s.dash,
        token: s.token,
        ...(s.entitlement ? { entitlement: s.entitlement } : {}),
      });
      await page.waitForFunction(
        () => {
          const state = (globalThis as ShakaPage).player.state();
          return state.currentTime > 2 || state.errors.length > 0;
        },
        undefined,
        { timeout: 60_000 },
      );
      return {
        state: await page.evaluate(() => (globalThis as ShakaPage).player.state()),
        problems: problems(),
      };
    } finally {
      await page.context().close();
    }
  };

  const expectPlayedDash = (played: Awaited<ReturnType<typeof playDash>>) => {
    expect(played.state.errors).toEqual([]);
    expect([...played.state.heights].sort((a, b) => a - b)).toEqual([240, 360]);
    expect(played.state.currentTime).toBeGreaterThan(2);
    expect(played.state.decodedFrames).toBeGreaterThan(0);
    expect(played.state.texts.map((t) => [t.language, t.kind, t.label]).sort()).toEqual([
      ["es", "caption", "Español"],
      ["fr", "subtitle", "French"],
    ]);
    expect(played.problems).toEqual([]);
  };

  it("Shaka Player plays the session's DASH URL: both renditions listed, text tracks too", async () => {
    const s = await session(clearAsset);
    expect(new URL(s.dash).pathname.endsWith("/manifest.mpd")).toBe(true);
    const played = await playDash(s);
    expectPlayedDash(played);
    expect(played.state.keySystem).toBe("");
  }, 120_000);

  it("Shaka Player plays a DRM asset's DASH URL with ClearKey: entitlement, licence, decryption", async () => {
    const s = await session(drmAsset);
    expect(s.entitlement).toEqual(expect.any(String));
    const mpd = await (await fetch(s.dash)).text();
    expect(mpd).toContain('schemeIdUri="urn:uuid:1077efec-c0b2-4d02-ace3-3c1e52e2fb4b"');
    const played = await playDash(s);
    expectPlayedDash(played);
    expect(played.state.keySystem).toBe("org.w3.clearkey");
  }, 120_000);
});

import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
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
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { gatedProcessor } from "./media-gate.js";
import { suiteScratch } from "./suites.js";
import { call, makeVideo, settledAsset, signUp, uploadAsset } from "./support.js";

/** What the player page (fixtures/hls-player.html) offers the test. */
interface PlayerSession {
  readonly manifest: string;
  readonly token?: string;
  readonly entitlement?: string;
  /** The rendition to play, by height; hls.js picks when absent. */
  readonly height?: number;
}
interface PlayerState {
  /** hls.js's levels: the heights of the renditions the master playlist listed. */
  readonly levels: ReadonlyArray<number>;
  /** The height of the rendition hls.js plays. */
  readonly playing: number | undefined;
  readonly currentTime: number;
  readonly decodedFrames: number;
  readonly fatal: ReadonlyArray<string>;
  readonly errors: ReadonlyArray<string>;
}
interface PlayerPage {
  readonly player: {
    supported(): boolean;
    start(session: PlayerSession): Promise<void>;
    state(): PlayerState;
  };
}
/** The page's global scope; the functions given to `page.evaluate` run there, not here. */
type Page = typeof globalThis & PlayerPage;

const PLAYED_SECONDS = 2;

describe("hls.js in headless Chromium plays an asset while its higher renditions are pending", () => {
  const scratch = suiteScratch("vod-browser-");
  let browser: TestBrowser;
  let pages: PageServer;
  let host: RunningHost;
  let auth: Record<string, string>;
  let gate: ReturnType<typeof gatedProcessor>;
  let source: Buffer;

  beforeAll(async () => {
    // First: without Chromium the suite fails here, saying so, before any encoding.
    browser = await launchChromium();
    scratch.afterwards(() => browser.close());
    pages = await servePages({
      "/": { file: fileURLToPath(new URL("./fixtures/hls-player.html", import.meta.url)) },
      "/hls.min.js": { file: packageFile("hls.js/dist/hls.min.js") },
    });
    scratch.afterwards(() => pages.close());
    gate = gatedProcessor(ffmpegMediaProcessor());
    host = await scratch.memoryHost(
      { VOD_DATA_DIR: await scratch.dir(), VOD_LOG_LEVEL: "silent" },
      {
        objectStore: memoryObjectStore(),
        revocationStore: memoryRevocationStore(),
        mediaProcessor: gate.processor,
      },
      { retryDelayMs: 200 },
    );
    auth = await signUp(host.url, "browser");
    const file = join(await scratch.dir(), "src.mp4");
    await makeVideo(file, { width: 1280, height: 720, seconds: 10 });
    source = await readFile(file);
  }, 60_000);

  // A test that failed while the gate held its asset must not leave the next one a gate that
  // reads as held already.
  afterEach(() => gate?.open());

  const statuses = async (assetId: string) => {
    const { asset } = (await call(host.url, `/v1/assets/${assetId}`, { headers: auth })).body;
    return {
      status: asset.status as string,
      renditions: Object.fromEntries(
        (asset.renditions as Array<{ name: string; status: string }>).map((r) => [r.name, r.status]),
      ),
    };
  };

  const newSession = async (assetId: string): Promise<PlayerSession> => {
    const res = await call(host.url, "/v1/playback/sessions", { body: { asset_id: assetId }, headers: auth });
    expect(res.status).toBe(201);
    return {
      manifest: res.body.urls.manifest,
      token: res.body.token,
      entitlement: res.body.urls.entitlement,
    };
  };

  /**
   * Opens the player page on its own origin, starts `session` and waits until the video has
   * played PLAYED_SECONDS or hls.js gave up; answers the player's state then, the requests the
   * page made to the platform, and what else went wrong in the page.
   */
  const play = async (session: PlayerSession) => {
    const { page, problems } = await browser.open(`${pages.url}/`);
    const requests: Array<{ method: string; url: string }> = [];
    page.on("request", (r) => {
      if (new URL(r.url()).origin !== pages.url) requests.push({ method: r.method(), url: r.url() });
    });
    try {
      expect(await page.evaluate(() => (globalThis as Page).player.supported())).toBe(true);
      await page.evaluate((s) => (globalThis as Page).player.start(s), session);
      await page.waitForFunction(
        (seconds) => {
          const state = (globalThis as Page).player.state();
          return state.currentTime > seconds || state.fatal.length > 0;
        },
        PLAYED_SECONDS,
        { timeout: 60_000 },
      );
      const state = await page.evaluate(() => (globalThis as Page).player.state());
      return { state, requests, problems: problems() };
    } finally {
      await page.context().close();
    }
  };

  /** The renditions whose playlist, init segment or segments the page fetched. */
  const renditionsFetched = (requests: ReadonlyArray<{ url: string }>) =>
    [
      ...new Set(
        requests.map((r) => /\/v1\/play\/[^/]+\/(\d+p)\//.exec(r.url)?.[1]).filter((r) => r !== undefined),
      ),
    ].sort();

  /** After completion: every rendition listed, and the 720p, added after the asset was ready, plays. */
  const expectEveryRenditionAnd720pPlays = (later: Awaited<ReturnType<typeof play>>) => {
    expect(later.state.fatal).toEqual([]);
    expect([...later.state.levels].sort((a, b) => a - b)).toEqual([240, 360, 480, 720]);
    expect(later.state.playing).toBe(720);
    expect(later.state.currentTime).toBeGreaterThan(PLAYED_SECONDS);
    expect(later.state.decodedFrames).toBeGreaterThan(0);
    expect(renditionsFetched(later.requests)).toContain("720p");
    expect(later.problems).toEqual([]);
  };

  it("plays the first rendition alone while 720p, 480p and 240p are pending; a new session after completion has every rendition, and plays", async () => {
    const { assetId } = await uploadAsset(host.url, auth, source, "browser");
    await gate.held();
    expect(await statuses(assetId)).toEqual({
      status: "ready",
      renditions: { "720p": "pending", "480p": "pending", "360p": "ready", "240p": "pending" },
    });

    const first = await newSession(assetId);
    // The page's origin is not the platform's: every request it makes there is cross-origin.
    expect(new URL(first.manifest).origin).not.toBe(pages.url);
    const early = await play(first);
    expect(early.state.fatal).toEqual([]);
    expect(early.state.levels).toEqual([360]);
    expect(early.state.currentTime).toBeGreaterThan(PLAYED_SECONDS);
    expect(early.state.decodedFrames).toBeGreaterThan(0);
    expect(renditionsFetched(early.requests)).toEqual(["360p"]);
    expect(early.problems).toEqual([]);
    // Still pending once it played: what it played was the asset before its ladder was done.
    expect((await statuses(assetId)).renditions).toEqual({
      "720p": "pending",
      "480p": "pending",
      "360p": "ready",
      "240p": "pending",
    });

    gate.open();
    const done = await settledAsset(host.url, auth, assetId);
    expect(done.renditions.map((r: { status: string }) => r.status)).toEqual([
      "ready",
      "ready",
      "ready",
      "ready",
    ]);
    // A new session lists every rendition, and one added after the asset was ready plays.
    const later = await play({ ...(await newSession(assetId)), height: 720 });
    expectEveryRenditionAnd720pPlays(later);
  }, 180_000);

  it("plays a DRM asset with ClearKey (entitlement, licence) while its higher renditions are pending, and every rendition after", async () => {
    const { assetId } = await uploadAsset(host.url, auth, source, "browser drm", { drm: true });
    await gate.held();
    expect(await statuses(assetId)).toEqual({
      status: "ready",
      renditions: { "720p": "pending", "480p": "pending", "360p": "ready", "240p": "pending" },
    });

    const session = await newSession(assetId);
    expect(session.entitlement).toEqual(expect.any(String));
    const entitled = await fetch(session.entitlement as string, {
      method: "POST",
      headers: { authorization: `Bearer ${session.token}` },
    });
    const { key_systems } = (await entitled.json()) as {
      key_systems: Record<string, { license_url: string }>;
    };
    const licenceUrl = key_systems["org.w3.clearkey"]?.license_url;
    const early = await play(session);
    expect(early.state.fatal).toEqual([]);
    expect(early.state.levels).toEqual([360]);
    expect(early.state.currentTime).toBeGreaterThan(PLAYED_SECONDS);
    expect(early.state.decodedFrames).toBeGreaterThan(0);
    expect(renditionsFetched(early.requests)).toEqual(["360p"]);
    expect(early.problems).toEqual([]);
    // The page asked for the entitlement and the licence itself, across origins.
    expect(early.requests).toEqual(
      expect.arrayContaining([
        { method: "POST", url: session.entitlement },
        { method: "POST", url: licenceUrl },
      ]),
    );

    gate.open();
    await settledAsset(host.url, auth, assetId);
    // The 720p, encrypted under the same key after the asset was ready, decrypts and plays too.
    const later = await play({ ...(await newSession(assetId)), height: 720 });
    expectEveryRenditionAnd720pPlays(later);
  }, 180_000);
});

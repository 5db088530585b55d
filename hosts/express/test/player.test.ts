import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { openPgliteProcess } from "@vod/adapter-postgres";
import { postgresTelemetryBackdoor } from "@vod/adapter-postgres/testing";
import { type BrowserPage, launchChromium, servePages, type TestBrowser } from "@vod/test-services/browser";
import { beforeAll, describe, expect, it } from "vitest";
import { suiteScratch } from "./suites.js";
import { call, makeVideo, settledAsset, signUp, uploadAsset } from "./support.js";

type Page = BrowserPage["page"];
type Frame = ReturnType<Page["frames"]>[number];

/** `read()` once it answers something, polled; fails naming `what` after `timeoutMs`. */
const until = async <T>(what: string, read: () => Promise<T | undefined>, timeoutMs: number): Promise<T> => {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
};

interface Pixels {
  readonly width: number;
  readonly height: number;
  /** The share of pixels that are not near black. */
  readonly litShare: number;
  /** How many coarse colours (3 bits a channel) the image has. */
  readonly colours: number;
}

/** What `fixtures/player-probe.js` gives each frame of a page. */
interface Probe {
  readonly vodProbe: {
    playingPast(seconds: number): boolean;
    pixels(): Pixels;
    imagePixels(dataUrl: string): Promise<Pixels>;
    preview(): { image: string; position: string; width: string; display: string };
    startupMs(): number | undefined;
    seekedPast(seconds: number): boolean;
    ended(): boolean;
  };
}
const PROBE = fileURLToPath(new URL("./fixtures/player-probe.js", import.meta.url));

const SOURCE_SECONDS = 100;

const framePixels = (where: Page | Frame) =>
  where.evaluate(() => (globalThis as unknown as Probe).vodProbe.pixels());

/** The pixels of the player's video as the page shows it: a screenshot of the element. */
const shownPixels = async (page: Page) => {
  const shot = await page.locator("vod-player video").screenshot({ type: "png" });
  return page.evaluate(
    (url) => (globalThis as unknown as Probe).vodProbe.imagePixels(url),
    `data:image/png;base64,${shot.toString("base64")}`,
  );
};

const playingPast = (where: Page | Frame, seconds: number, timeout: number) =>
  where.waitForFunction((s) => (globalThis as unknown as Probe).vodProbe.playingPast(s), seconds, {
    timeout,
    polling: 250,
  });

describe("<vod-player> and the embed page in headless Chromium, on the embedded default", () => {
  const scratch = suiteScratch("vod-player-");
  let browser: TestBrowser;
  let host: Awaited<ReturnType<typeof scratch.serve>>;
  let auth: Record<string, string>;
  let dataDir: string;
  let clearAsset: string;
  let drmAsset: string;

  beforeAll(async () => {
    browser = await launchChromium();
    scratch.afterwards(() => browser.close());
    dataDir = await scratch.dir();
    host = await scratch.serve({ VOD_DATA_DIR: dataDir, VOD_LOG_LEVEL: "warn" });
    auth = await signUp(host.url, "player");
    // Long enough to play past 90 s on 60 s tokens; small (one 240p rendition) to encode fast.
    const file = join(dataDir, "src.mp4");
    await makeVideo(file, { width: 426, height: 240, seconds: SOURCE_SECONDS, fps: 15 });
    const source = await readFile(file);
    clearAsset = (await uploadAsset(host.url, auth, source, "player clear")).assetId;
    drmAsset = (await uploadAsset(host.url, auth, source, "player drm", { drm: true })).assetId;
    for (const id of [clearAsset, drmAsset])
      expect((await settledAsset(host.url, auth, id)).status).toBe("ready");
  }, 240_000);

  const newSession = async (assetId: string, ttlSeconds?: number) => {
    const res = await call(host.url, "/v1/playback/sessions", {
      body: { asset_id: assetId, ...(ttlSeconds ? { ttl_seconds: ttlSeconds } : {}) },
      headers: auth,
    });
    expect(res.status).toBe(201);
    return res.body as {
      session: { id: string; expires_at: number };
      token: string;
      urls: Record<string, string>;
    };
  };

  const embedUrl = (token: string, query = "?autoplay=1") => `${host.url}/v1/embed/${token}${query}`;

  /** The telemetry stored for a session, read from the database the host serves from. */
  const storedEvents = async (sessionId: string) => {
    const db = await openPgliteProcess(join(dataDir, "pglite"), { whenInUse: "reach" });
    try {
      return await postgresTelemetryBackdoor(db).events(sessionId);
    } finally {
      await db.close();
    }
  };

  /**
   * Opens `url` with the probe in every frame (`fixtures/player-probe.js`) and a record of the
   * requests its frames send, with the status each got.
   */
  const open = async (url: string, prepare?: (page: Page) => Promise<unknown>) => {
    const requests: Array<{ method: string; url: string; status?: number }> = [];
    const opened = await browser.open(url, async (page) => {
      await page.addInitScript({ path: PROBE });
      // Each finished request with its status; one still being read as the page closes is left out.
      page.on("requestfinished", (r) =>
        r.response().then(
          (res) => requests.push({ method: r.method(), url: r.url(), status: res?.status() }),
          () => undefined,
        ),
      );
      await prepare?.(page);
    });
    return { ...opened, requests };
  };

  it("the embed page plays a clear asset: a decoded frame that is not black, storyboard previews on the seek bar, seeking and pausing; telemetry with startup_ms, seek and pause stored", async () => {
    const { session, token } = await newSession(clearAsset);
    const { page, problems } = await open(embedUrl(token));
    try {
      await playingPast(page, 2, 60_000);
      const frame = await framePixels(page);
      expect(frame).toMatchObject({ width: 426, height: 240 });
      expect(frame.litShare).toBeGreaterThan(0.5);
      expect(frame.colours).toBeGreaterThan(20);

      // Hovering the seek bar shows the storyboard tile of that time, from the sprite sheet.
      const seekBar = page.locator("vod-player .seek");
      const box = await seekBar.boundingBox();
      if (!box) throw new Error("no seek bar");
      await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
      const preview = await page.evaluate(() => (globalThis as unknown as Probe).vodProbe.preview());
      expect(preview.image).toContain(`/v1/play/${token}/storyboard.jpg`);
      expect(preview.width).toBe("160px");
      // Half way through 100 s, at least 2 s a tile: not the first tile.
      expect(preview.position).not.toBe("0px 0px");

      // A click on the seek bar seeks there; the play button then pauses.
      await page.mouse.click(box.x + box.width * 0.75, box.y + box.height / 2);
      await page.waitForFunction(() => (globalThis as unknown as Probe).vodProbe.seekedPast(70), undefined, {
        timeout: 30_000,
      });
      // The pause goes to telemetry at once (with the seek before it): the test waits for that
      // beacon's answer before the page closes.
      await Promise.all([
        page.waitForResponse(
          (r) => r.url().endsWith("/v1/telemetry") && (r.request().postData() ?? "").includes('"pause"'),
        ),
        page.locator("vod-player .play").click(),
      ]);
      expect(problems()).toEqual([]);
    } finally {
      await page.context().close();
    }

    const events = await until(
      "first_frame stored",
      async () => {
        const stored = await storedEvents(session.id);
        return stored.some((e) => e.event === "first_frame") ? stored : undefined;
      },
      20_000,
    );
    const first = events.find((e) => e.event === "first_frame");
    expect(first).toMatchObject({
      asset_id: clearAsset,
      player_version: "vod-player/0.1.0",
      rendition: "240p",
    });
    expect(first?.startup_ms).toBeGreaterThan(0);
    expect(first?.startup_ms).toBeLessThan(30_000);
    expect(events.map((e) => e.event)).toEqual(
      expect.arrayContaining(["play", "rendition_change", "first_frame"]),
    );
    expect(events.find((e) => e.event === "rendition_change")?.bitrate_kbps).toBeGreaterThan(0);
    const seek = await until(
      "seek and pause stored",
      async () => {
        const stored = await storedEvents(session.id);
        return stored.some((e) => e.event === "pause") ? stored.find((e) => e.event === "seek") : undefined;
      },
      20_000,
    );
    expect(seek?.playhead_ms).toBeGreaterThan(70_000);
    expect(seek?.extra.from_ms).toBeLessThan(30_000);
  }, 120_000);

  it("the embed page plays a ClearKey asset through the session's entitlement and licence", async () => {
    const { token, urls } = await newSession(drmAsset);
    expect(urls.entitlement).toEqual(expect.any(String));
    const entitled = await fetch(urls.entitlement as string, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
    });
    const licenceUrl = ((await entitled.json()) as { key_systems: Record<string, { license_url: string }> })
      .key_systems["org.w3.clearkey"]?.license_url;
    const { page, problems, requests } = await open(embedUrl(token));
    try {
      await playingPast(page, 2, 60_000);
      // Shown, decrypted: a frame that is not black (a canvas gets none of an EME frame's pixels).
      const frame = await shownPixels(page);
      expect(frame.litShare).toBeGreaterThan(0.5);
      expect(frame.colours).toBeGreaterThan(20);
      expect(requests).toEqual(
        expect.arrayContaining([
          { method: "POST", url: urls.entitlement, status: 200 },
          { method: "POST", url: licenceUrl, status: 200 },
        ]),
      );
      expect(problems()).toEqual([]);
    } finally {
      await page.context().close();
    }
  }, 120_000);

  it("a bad token gets the spec's error, not a page", async () => {
    const res = await fetch(`${host.url}/v1/embed/v1.not-a-token`);
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ error: "unauthorized", code: "unauthorized" });
    const script = await fetch(`${host.url}/v1/player.js`, { headers: { origin: "https://site.example" } });
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(script.headers.get("access-control-allow-origin")).toBe("https://site.example");
    expect(script.headers.get("cache-control")).toBe("public, max-age=300");
    expect((await script.text()).length).toBeGreaterThan(100_000);
    const again = await fetch(`${host.url}/v1/player.js`, {
      headers: { "if-none-match": script.headers.get("etag") ?? "" },
    });
    expect(again.status).toBe(304);
  });

  it("on a 60 s token, an embedded player asks its page for new tokens and plays on past 90 s, to the end", async () => {
    const { session, token } = await newSession(clearAsset, 60);
    // Each token handed is a new session's of the same asset: the API mints no other kind.
    const handed: Array<{ token: string; sessionId: string }> = [];
    // The site's page, on an origin of its own, embeds the player and answers its token requests
    // (its server would mint the session's next token; here the test does).
    const site = await servePages({
      "/": {
        text: `<!doctype html><html><head><link rel="icon" href="data:,"></head><body>
<iframe id="player" src="${embedUrl(token)}" width="640" height="360" allow="autoplay; encrypted-media"></iframe>
<script>
window.addEventListener("message", async (message) => {
  if (message.data?.type !== "vod:token-request") return;
  const next = await window.nextToken();
  message.source.postMessage({ type: "vod:token", token: next }, "*");
});
</script></body></html>`,
      },
    });
    const { page, problems, requests } = await open(`${site.url}/`, (page) =>
      page.exposeFunction("nextToken", async () => {
        const next = await newSession(clearAsset, 60);
        handed.push({ token: next.token, sessionId: next.session.id });
        return next.token;
      }),
    ).catch(async (e) => {
      await site.close();
      throw e;
    });
    try {
      const embedded = page.frames().find((f) => f.url().startsWith(`${host.url}/v1/embed/`));
      if (!embedded) throw new Error("no embed frame");
      await playingPast(embedded, 92, 150_000);
      const frame = await framePixels(embedded);
      expect(frame.litShare).toBeGreaterThan(0.5);

      // The first token has expired: the media app refuses it.
      const expired = await fetch(`${host.url}/v1/play/${token}/master.m3u8`);
      expect(expired.status).toBe(401);
      expect(handed.length).toBeGreaterThanOrEqual(1);
      const media = requests.filter((r) => r.url.includes("/v1/play/") && r.url.endsWith(".m4s"));
      expect(media.every((r) => r.status === 200 || r.status === 206)).toBe(true);
      // Segments went out under the tokens handed later, not only the first.
      const tokensUsed = new Set(media.map((r) => /\/v1\/play\/([^/]+)\//.exec(r.url)?.[1]));
      expect(handed.some((t) => tokensUsed.has(t.token))).toBe(true);
      // And on to the end of the video.
      await embedded.waitForFunction(() => (globalThis as unknown as Probe).vodProbe.ended(), undefined, {
        timeout: 30_000,
        polling: 250,
      });
      expect(problems()).toEqual([]);
    } finally {
      await page.context().close();
      await site.close();
    }
    // A heartbeat every 10 s of the 90 s played, each under the token current when it was sent.
    const events = await until(
      "heartbeats and the end stored",
      async () => {
        const stored = [];
        for (const id of [session.id, ...handed.map((h) => h.sessionId)])
          stored.push(...(await storedEvents(id)));
        const heartbeats = stored.filter((e) => e.event === "heartbeat").length;
        return heartbeats >= 8 && stored.some((e) => e.event === "ended") ? stored : undefined;
      },
      20_000,
    );
    expect(new Set(events.map((e) => e.session_id)).size).toBeGreaterThan(1);
    expect(events.filter((e) => e.event === "first_frame")).toHaveLength(1);
  }, 240_000);
});

import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { uploadThroughEndpoint } from "@vod/client";
import { startWebPage } from "@vod/example-web-page";
import { launchChromium, type TestBrowser } from "@vod/test-services/browser";
import { beforeAll, describe, expect, it } from "vitest";
import { suiteScratch } from "../../../hosts/express/test/suites.js";
import { call, makeSizedVideo, signUp } from "../../../hosts/express/test/support.js";

interface Pixels {
  readonly litShare: number;
  readonly colours: number;
}

/** What `player-probe.js` and the listeners added below give the page. */
interface Probe {
  readonly vodProbe: {
    playingPast(seconds: number): boolean;
    imagePixels(dataUrl: string): Promise<Pixels>;
  };
  readonly uploaderEvents: Array<{ type: string; detail: Record<string, unknown> }>;
}
const PROBE = fileURLToPath(new URL("../../../hosts/express/test/fixtures/player-probe.js", import.meta.url));

interface Seen {
  readonly method: string;
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body: string | null;
}

describe("examples/web-page: <vod-uploader endpoint> then <vod-player>, in headless Chromium on the embedded default", () => {
  const scratch = suiteScratch("vod-web-page-");
  let browser: TestBrowser;
  let host: Awaited<ReturnType<typeof scratch.serve>>;
  let web: Awaited<ReturnType<typeof startWebPage>>;
  let apiKey: string;
  let video: string;

  beforeAll(async () => {
    browser = await launchChromium();
    scratch.afterwards(() => browser.close());
    const dir = await scratch.dir();
    host = await scratch.serve({ VOD_DATA_DIR: dir, VOD_LOG_LEVEL: "warn" });
    const auth = await signUp(host.url, "web-page");
    const key = await call(host.url, "/v1/api-keys", {
      headers: auth,
      body: { name: "page", scopes: ["write"] },
    });
    expect(key.status).toBe(201);
    apiKey = key.body.key;
    web = await startWebPage({ apiUrl: host.url, apiKey });
    scratch.afterwards(() => web.close());
    // Three parts of 8 MiB at most: sent in parallel.
    video = join(dir, "clip.mp4");
    await makeSizedVideo(video, 18);
  }, 120_000);

  it("uploads a file through the widget straight to the part URLs with no key in the page; the asset reaches ready and the page's player shows a decoded frame", async () => {
    const size = (await stat(video)).size;
    const requests: Seen[] = [];
    const statuses = new Map<string, number>();
    const served: string[] = [];
    const { page, problems } = await browser.open(`${web.url}/`, async (page) => {
      await page.addInitScript({ path: PROBE });
      // The widget's events as the page heard them (its document: they bubble out of the shadow).
      await page.addInitScript({
        content: `window.uploaderEvents = [];
for (const type of ["upload-progress", "upload-complete", "upload-error"])
  document.addEventListener(type, (e) => uploaderEvents.push({ type, detail: JSON.parse(JSON.stringify(e.detail)) }));`,
      });
      page.on("request", (r) =>
        requests.push({
          method: r.method(),
          url: r.url(),
          headers: r.headers(),
          // A part's body is the video's bytes: not text to search.
          body: r.method() === "PUT" ? null : r.postData(),
        }),
      );
      page.on("requestfinished", (r) =>
        r.response().then(
          (res) => {
            if (res) statuses.set(`${r.method()} ${r.url()}`, res.status());
          },
          () => undefined,
        ),
      );
      // Everything the page's own server answered it: where a leaked key would show.
      page.on("response", (res) => {
        if (res.url().startsWith(web.url))
          res.text().then(
            (t) => served.push(t),
            () => undefined,
          );
      });
    });

    await page.locator("vod-uploader input[type=file]").setInputFiles(video);
    await page.waitForFunction(() => (globalThis as unknown as Probe).vodProbe.playingPast(1), undefined, {
      timeout: 240_000,
      polling: 250,
    });

    // What the widget told the page.
    const events = await page.evaluate(() => (globalThis as unknown as Probe).uploaderEvents);
    expect(events.filter((e) => e.type === "upload-error")).toEqual([]);
    const percents = events
      .filter((e) => e.type === "upload-progress")
      .map((e) => e.detail.percent as number);
    expect(percents[0]).toBe(0);
    expect(percents.at(-1)).toBe(100);
    expect(percents).toEqual([...percents].sort((a, b) => a - b));
    const completes = events.filter((e) => e.type === "upload-complete");
    expect(completes).toHaveLength(1);
    const { assetId, upload } = (completes[0] as (typeof completes)[number]).detail as {
      assetId: string;
      upload: { id: string; part_count: number; status: string };
    };
    expect(upload.status).toBe("completed");
    expect(upload.part_count).toBe(3);
    expect(await page.locator("vod-uploader").getAttribute("data-state")).toBe("complete");
    expect(await page.locator("#status").textContent()).toBe("Ready");

    // The bytes went from the browser straight to the media app's part URLs, each part once.
    const started = served
      .map((t) => JSON.parse(t.startsWith("{") ? t : "null"))
      .find((b) => b?.upload?.parts);
    const partUrls: string[] = started.upload.parts.map((p: { url: string }) => p.url);
    expect(partUrls).toHaveLength(3);
    const puts = requests.filter((r) => r.method === "PUT");
    expect(puts.map((r) => r.url).sort()).toEqual([...partUrls].sort());
    for (const put of puts) {
      // The media app (the host's public URL, localhost at its port): PUT /v1/uploads/{id}/parts/{n}.
      const at = new URL(put.url);
      expect(at.port).toBe(new URL(host.url).port);
      expect(at.pathname).toMatch(new RegExp(`^/v1/uploads/${upload.id}/parts/[123]$`));
      expect(statuses.get(`PUT ${put.url}`)).toBe(200);
    }
    // The page asked its own server for the session and the completion, never the API.
    const toPageServer = requests
      .filter((r) => r.url.startsWith(web.url))
      .map((r) => `${r.method} ${new URL(r.url).pathname}`);
    expect(toPageServer).toEqual(
      expect.arrayContaining(["GET /", "POST /uploads", "POST /uploads/complete", `GET /assets/${assetId}`]),
    );
    const toApi = requests.filter(
      (r) => r.url.startsWith(host.url) && /\/v1\/(assets|uploads|playback\/sessions|api-keys)/.test(r.url),
    );
    expect(toApi).toEqual([]);

    // No key anywhere the browser saw: its requests (URLs, headers, bodies), the answers of the
    // page's server, the document.
    for (const r of requests) {
      expect(r.url).not.toContain(apiKey);
      expect(JSON.stringify(r.headers)).not.toContain(apiKey);
      expect(r.headers["x-api-key"]).toBeUndefined();
      expect(r.body ?? "").not.toContain(apiKey);
    }
    expect(served.length).toBeGreaterThan(3);
    for (const text of served) expect(text).not.toContain(apiKey);
    expect(await page.content()).not.toContain(apiKey);

    // The asset, as the API stores it: ready, of the file's size.
    const stored = await call(host.url, `/v1/assets/${assetId}`, { headers: { "x-api-key": apiKey } });
    expect(stored.status).toBe(200);
    expect(stored.body.asset.status).toBe("ready");
    expect(stored.body.asset.origin_size_bytes).toBe(size);

    // The player shows a decoded frame of the upload, not black: testsrc2's many colours.
    const shot = await page.locator("vod-player video").screenshot({ type: "png" });
    const frame = await page.evaluate(
      (url) => (globalThis as unknown as Probe).vodProbe.imagePixels(url),
      `data:image/png;base64,${shot.toString("base64")}`,
    );
    expect(frame.litShare).toBeGreaterThan(0.5);
    expect(frame.colours).toBeGreaterThan(20);
    // The page's server has no favicon: its 404 aside, nothing went wrong in the page.
    expect(problems().filter((p) => !p.includes("status of 404"))).toEqual([]);
  }, 300_000);

  it("the page's server refuses bad bodies with 400 and details.fields, and ids it did not start with 404", async () => {
    const post = (path: string, body: unknown) =>
      fetch(`${web.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: typeof body === "string" ? body : JSON.stringify(body),
      }).then(async (res) => ({ status: res.status, body: await res.json() }));

    expect(await post("/uploads", "{not json")).toMatchObject({
      status: 400,
      body: { code: "invalid_request" },
    });
    expect(await post("/uploads", [1])).toMatchObject({ status: 400, body: { code: "invalid_request" } });
    for (const size_bytes of [-1, 0, 1.5, "10", null])
      expect(await post("/uploads", { size_bytes, name: "x" })).toMatchObject({
        status: 400,
        body: {
          code: "invalid_request",
          details: { fields: [{ path: ["size_bytes"], message: expect.any(String) }] },
        },
      });
    expect(await post("/uploads", { size_bytes: 10, name: 7 })).toMatchObject({
      status: 400,
      body: { details: { fields: [{ path: ["name"], message: expect.any(String) }] } },
    });
    expect(await post("/uploads", { size_bytes: 10, name: "x".repeat(201) })).toMatchObject({ status: 400 });
    // Over the API's limit (100 GiB): its refusal, passed on, and no asset left behind for it.
    const before = (await call(host.url, "/v1/assets?limit=100", { headers: { "x-api-key": apiKey } })).body
      .data.length;
    expect(await post("/uploads", { size_bytes: 107_374_182_401, name: "huge" })).toMatchObject({
      status: 400,
      body: {
        code: "invalid_request",
        details: { fields: [{ path: ["size_bytes"], message: expect.any(String) }] },
      },
    });
    const after = (await call(host.url, "/v1/assets?limit=100", { headers: { "x-api-key": apiKey } })).body
      .data;
    expect(after.length).toBe(before);
    expect(await post("/uploads/complete", {})).toMatchObject({
      status: 400,
      body: { details: { fields: [{ path: ["upload_id"], message: expect.any(String) }] } },
    });
    expect(await post("/uploads/resume", { upload_id: 5 })).toMatchObject({ status: 400 });

    // A session and an asset of the same tenant, started with the key but not by this page.
    const headers = { "x-api-key": apiKey };
    const asset = (await call(host.url, "/v1/assets", { headers, body: { title: "not the page's" } })).body
      .asset;
    const upload = (
      await call(host.url, "/v1/uploads", { headers, body: { asset_id: asset.id, size_bytes: 10 } })
    ).body.upload;
    expect(await post("/uploads/complete", { upload_id: upload.id })).toMatchObject({
      status: 404,
      body: { code: "not_found" },
    });
    expect(await post("/uploads/resume", { upload_id: upload.id })).toMatchObject({ status: 404 });
    expect(await post(`/assets/${asset.id}/playback`, {})).toMatchObject({ status: 404 });
    const read = await fetch(`${web.url}/assets/${asset.id}`);
    expect(read.status).toBe(404);
    expect((await fetch(`${web.url}/no-such-route`)).status).toBe(404);
    // Nothing of it touched the session: still waiting for its bytes.
    const stored = await call(host.url, `/v1/uploads/${upload.id}`, { headers });
    expect(stored.body.upload.status).toBe("created");
  });

  it("uploadThroughEndpoint (what the widget runs), from Node: a part URL refused as expired is replaced through /resume and the upload completes", async () => {
    const bytes = await readFile(video);
    const seen: string[] = [];
    let refused = 0;
    const watched: typeof fetch = async (input, init) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      const line = `${init?.method ?? "GET"} ${url.pathname}`;
      seen.push(line);
      // The media app's answer to a part URL past its expiry, once.
      if (line.endsWith("/parts/2") && refused++ === 0) return new Response("expired", { status: 403 });
      return fetch(input, init);
    };
    const done = await uploadThroughEndpoint({
      endpoint: `${web.url}/uploads`,
      file: new Blob([bytes]),
      name: "from node",
      parallel: 2,
      fetch: watched,
    });
    expect(done.upload).toMatchObject({ status: "completed", part_count: 3, size_bytes: bytes.length });
    expect(done.asset).toMatchObject({ title: "from node", status: "uploaded" });
    const parts = `PUT /v1/uploads/${done.upload.id}/parts/`;
    expect(seen.filter((l) => l === `${parts}2`)).toHaveLength(2);
    expect(seen.filter((l) => l === `${parts}1` || l === `${parts}3`)).toHaveLength(2);
    expect(seen.filter((l) => l.startsWith("POST"))).toEqual([
      "POST /uploads",
      "POST /uploads/resume",
      "POST /uploads/complete",
    ]);
    const stored = await call(host.url, `/v1/assets/${done.asset.id}`, { headers: { "x-api-key": apiKey } });
    expect(stored.body.asset.origin_size_bytes).toBe(bytes.length);
  }, 60_000);
});

import { fileURLToPath } from "node:url";
import type { BrowserPage } from "@vod/test-services/browser";
import { rolldown } from "rolldown";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, type KitPages, startKitPages } from "../../../hosts/express/test/support.js";

/** The package as a bundler makes it for a page: its built entry, the browser field applied. */
const bundleForBrowsers = async () => {
  const entry = fileURLToPath(new URL("../dist/index.js", import.meta.url));
  const bundle = await rolldown({ input: entry, platform: "browser" });
  const { output } = await bundle.generate({ format: "esm", codeSplitting: false });
  await bundle.close();
  return output.map((chunk) => ("code" in chunk ? chunk.code : "")).join("\n");
};

const page = `<!doctype html><script type="module">
import { createClient, verifyWebhook } from "/client.js";
window.uploadFromPage = async ({ apiUrl, apiKey, signed }) => {
  const client = createClient({ baseUrl: apiUrl, apiKey });
  const bytes = await (await fetch("/video.mp4")).blob();
  const file = new File([bytes], "video.mp4", { type: "video/mp4" });
  const asset = await client.assets.create({ title: "from a page" });
  const parts = [];
  const done = await client.uploads.upload({ assetId: asset.id, file, parallel: 2, onProgress: (p) => parts.push(p.partsDone) });
  const event = verifyWebhook(signed.secret, new Headers(signed.headers), signed.body);
  let tampered = "accepted";
  try { verifyWebhook(signed.secret, new Headers(signed.headers), signed.body.replace("asset", "assets")); }
  catch (e) { tampered = e.name; }
  const missing = await client.assets.get("ast_missing").catch((e) => ({ name: e.name, status: e.status, code: e.code }));
  return { asset: done.asset, parts, event, tampered, missing };
};
window.ready = true;
</script>`;

describe("@vod/client in a browser page (headless Chromium)", () => {
  let kit: KitPages;
  let bundle: string;

  beforeAll(async () => {
    bundle = await bundleForBrowsers();
    kit = await startKitPages({
      prefix: "vod-client-browser-",
      videoMiB: 20,
      routes: (video) => ({
        "/": { text: page },
        "/client.js": { text: bundle, type: "text/javascript; charset=utf-8" },
        "/video.mp4": { file: video },
      }),
      scope: "write",
    });
  }, 120_000);

  afterAll(() => kit?.close());

  it("uploads a File straight to the part URLs, verifies a signed webhook and reports errors as VodError", async () => {
    // The Node-only module (file paths) is mapped away: nothing of node: reaches the page.
    expect(bundle).not.toMatch(/from\s*["']node:|import\(\s*["']node:/);

    const secret = `whsec_${Buffer.alloc(32, 9).toString("base64")}`;
    const body = JSON.stringify({
      id: "evt_1",
      type: "asset.ready",
      created_at: Date.now(),
      data: { asset: { id: "ast_x" } },
    });
    const timestamp = new Date();
    const signed = {
      secret,
      body,
      headers: {
        "webhook-id": "evt_1",
        "webhook-timestamp": String(Math.floor(timestamp.getTime() / 1000)),
        "webhook-signature": new Webhook(secret).sign("evt_1", timestamp, body),
      },
    };

    const opened: BrowserPage = await kit.browser.open(`${kit.pages.url}/`);
    await opened.page.waitForFunction(() => (globalThis as unknown as { ready?: boolean }).ready === true);
    const result = await opened.page.evaluate(
      (args) =>
        (globalThis as unknown as { uploadFromPage: (a: typeof args) => Promise<unknown> }).uploadFromPage(
          args,
        ),
      { apiUrl: kit.host.url, apiKey: kit.apiKey, signed },
    );
    const { asset, parts, event, tampered, missing } = result as {
      asset: { id: string; status: string; origin_size_bytes: number };
      parts: number[];
      event: { type: string; data: { asset: { id: string } } };
      tampered: string;
      missing: unknown;
    };
    expect(asset.status).toBe("uploaded");
    expect(parts).toEqual([0, 1, 2, 3]);
    const stored = await call(kit.host.url, `/v1/assets/${asset.id}`, {
      headers: { "x-api-key": kit.apiKey },
    });
    expect(stored.body.asset.origin_size_bytes).toBe(asset.origin_size_bytes);
    expect(event).toMatchObject({ type: "asset.ready", data: { asset: { id: "ast_x" } } });
    expect(tampered).toBe("WebhookVerificationError");
    expect(missing).toEqual({ name: "VodError", status: 404, code: "not_found" });
    // The page's own 404s (the asset asked for above, the favicon the page server lacks) aside.
    expect(opened.problems().filter((p) => !p.includes("status of 404"))).toEqual([]);
  }, 120_000);
});

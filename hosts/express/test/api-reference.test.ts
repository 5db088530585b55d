import { stat } from "node:fs/promises";
import { join } from "node:path";
import type { RunningHost } from "@vod/host-express";
import { launchChromium, type TestBrowser } from "@vod/test-services/browser";
import { beforeAll, describe, expect, it } from "vitest";
import { suiteScratch } from "./suites.js";

describe("the API reference at {base_url}/docs", () => {
  const scratch = suiteScratch("vod-docs-");
  let browser: TestBrowser;
  let host: RunningHost;
  let dir: string;

  beforeAll(async () => {
    // First: without Chromium the suite fails here, saying so.
    browser = await launchChromium();
    scratch.afterwards(() => browser.close());
    dir = await scratch.dir();
    host = await scratch.memoryHost({
      VOD_DATA_DIR: dir,
      VOD_LOG_LEVEL: "silent",
      VOD_WORKER_CONCURRENCY: "0",
    });
  });

  it("serves a page and its script from the platform itself, as the catalog lists them", async () => {
    const page = await fetch(`${host.url}/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    const html = await page.text();
    expect(html).toContain('<script src="docs/reference.js"></script>');
    expect(html).toContain('url: "v1/openapi.json"');
    // No script or style from anywhere else.
    expect(html).not.toMatch(/(src|href)="https?:/);
    const script = await fetch(`${host.url}/docs/reference.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(script.headers.get("cache-control")).toBe("public, max-age=3600");
    const body = Buffer.from(await script.arrayBuffer());
    expect(body.byteLength).toBe(Number(script.headers.get("content-length")));
    expect(body.toString()).toContain("createApiReference");
    const doc = (await (await fetch(`${host.url}/v1/openapi.json`)).json()) as {
      info: { description: string };
      paths: Record<string, Record<string, { summary?: string }>>;
      components: { securitySchemes: Record<string, { description?: string }> };
    };
    // What a newcomer looks for first: the order of the calls, and where each credential goes.
    expect(doc.info.description).toContain("`POST /v1/auth/signup`");
    expect(doc.info.description).toContain("when a key is created with several, the highest is kept");
    expect(doc.paths["/v1/api-keys"]?.post?.summary).toContain(
      "of several sent, the highest (admin, then write, then read) is kept",
    );
    expect(doc.components.securitySchemes.apiKey?.description).toContain(
      "sent as `Authorization: Bearer` instead, it is refused 401",
    );
    expect(doc.paths["/docs"]?.get?.summary).toMatch(/^This document as a web page/);
    expect(Object.keys(doc.paths["/docs/reference.js"] ?? {})).toEqual(["get"]);
  });

  it("renders the operations in headless Chromium, asking nothing of another origin", async () => {
    const { page, problems } = await browser.open(`${host.url}/docs`);
    await page.getByText("Create an asset draft (pending, private).").first().waitFor({ timeout: 30_000 });
    const text = await page.locator("body").innerText();
    for (const summary of [
      "Create a tenant and its owner user, and sign in.",
      "Create an API key; the full key is in this response only. A key has one scope",
      "Start a multipart upload session for an asset: one upload URL per part.",
    ])
      expect(text).toContain(summary);
    const shot = join(dir, "docs.png");
    await page.screenshot({ path: shot, fullPage: false });
    expect((await stat(shot)).size).toBeGreaterThan(10_000);
    // Everything the page fetched, its own load included: scripts, the document, fonts, images.
    const requested = await page.evaluate(() => performance.getEntriesByType("resource").map((e) => e.name));
    expect(requested).toContain(`${host.url}/v1/openapi.json`);
    expect(requested.filter((url) => !url.startsWith(host.url))).toEqual([]);
    // The AI agent is off: it would send the document to a third party.
    expect(text).not.toContain("Ask AI");
    expect(problems()).toEqual([]);
  });
});

import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  launchChromium,
  type PageServer,
  packageFile,
  servePages,
  type TestBrowser,
} from "../src/browser.js";

describe("the browser harness: headless Chromium and a page server", () => {
  let browser: TestBrowser;
  let pages: PageServer;

  beforeAll(async () => {
    browser = await launchChromium();
    pages = await servePages({
      "/": {
        text: `<!doctype html><link rel="icon" href="data:,"><p id="said">not yet</p>
          <script src="/hls.min.js"></script>
          <script>document.getElementById("said").textContent = "Hls " + Hls.version;</script>`,
      },
      "/broken": {
        text: `<!doctype html><link rel="icon" href="data:,">
          <script src="/absent.js"></script><script>throw new Error("page broke")</script>`,
      },
      "/hls.min.js": { file: packageFile("hls.js/dist/hls.min.js") },
    });
  }, 30_000);

  afterAll(async () => {
    await browser?.close();
    await pages?.close();
  });

  it("a missing Chromium fails the launch, saying how to install it", async () => {
    await expect(launchChromium("/nonexistent/chromium")).rejects.toThrow(
      "no Chromium at /nonexistent/chromium: the browser tests need it (apt-get install -y chromium",
    );
  });

  it("loads a page that runs a script of an installed package, served from node_modules", async () => {
    const { page, problems } = await browser.open(`${pages.url}/`);
    const { version } = JSON.parse(await readFile(packageFile("hls.js/package.json"), "utf8"));
    expect(await page.textContent("#said")).toBe(`Hls ${version}`);
    expect(problems()).toEqual([]);
    await page.context().close();
  });

  it("records what went wrong in a page: an uncaught error and a missing script", async () => {
    const { page, problems } = await browser.open(`${pages.url}/broken`);
    expect(problems()).toEqual(
      expect.arrayContaining([
        "uncaught: page broke",
        expect.stringMatching(/^console: Failed to load resource: .*404/),
      ]),
    );
    await page.context().close();
  });

  it("answers 404 for a path it does not serve, and for a write", async () => {
    expect((await fetch(`${pages.url}/other`)).status).toBe(404);
    expect((await fetch(`${pages.url}/`, { method: "POST" })).status).toBe(404);
    const page = await fetch(`${pages.url}/`);
    expect([page.status, page.headers.get("content-type")]).toEqual([200, "text/html; charset=utf-8"]);
  });
});

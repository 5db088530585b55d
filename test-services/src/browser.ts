import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { extname } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";

/** Debian's Chromium: the browser tests drive it rather than a browser build of Playwright's own. */
export const CHROMIUM_PATH = "/usr/bin/chromium";

/**
 * Without the networking switches Chromium keeps calling home (updates, sync, field trials), which
 * a machine with no network answers by nothing but time-outs.
 */
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export interface BrowserPage {
  readonly page: Page;
  /** What went wrong in the page so far: uncaught errors, console errors, failed requests. */
  problems(): ReadonlyArray<string>;
}

export interface TestBrowser {
  /**
   * A new page at `url`, in a context of its own (no cookies, cache or storage shared), loaded;
   * `prepare` runs on the page before it navigates (init scripts, request listeners).
   */
  open(url: string, prepare?: (page: Page) => Promise<void> | void): Promise<BrowserPage>;
  close(): Promise<void>;
}

/**
 * Headless Chromium, each launch with a fresh profile (Playwright makes a new user-data-dir and
 * removes it at close). A machine without Chromium fails here, saying how to install it: a
 * browser test must not pass by being skipped.
 */
export const launchChromium = async (executablePath = CHROMIUM_PATH): Promise<TestBrowser> => {
  if (!existsSync(executablePath))
    throw new Error(
      `no Chromium at ${executablePath}: the browser tests need it (apt-get install -y chromium; .ci/run installs it)`,
    );
  const browser: Browser = await chromium.launch({ executablePath, headless: true, args: CHROMIUM_ARGS });
  return {
    open: async (url, prepare) => {
      const context = await browser.newContext();
      const page = await context.newPage();
      await prepare?.(page);
      const problems: string[] = [];
      page.on("pageerror", (e) => problems.push(`uncaught: ${e.message}`));
      page.on("console", (m) => {
        if (m.type() === "error") problems.push(`console: ${m.text()}`);
      });
      page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
      const res = await page.goto(url);
      if (res?.status() !== 200) throw new Error(`${url}: ${res?.status()}`);
      return { page, problems: () => [...problems] };
    },
    close: () => browser.close(),
  };
};

/** What a page server answers on one path: a text (an HTML page, a script) or a file's bytes. */
export type PageRoute = { readonly text: string; readonly type?: string } | { readonly file: string };

export interface PageServer {
  /** `http://127.0.0.1:<port>`: an origin of its own, as a site embedding a player has. */
  readonly url: string;
  close(): Promise<void>;
}

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json",
  ".json": "application/json",
};

/**
 * Serves `routes` (path to text or file) on 127.0.0.1 with a free port; any other path is 404.
 * The pages of a browser test and the scripts they load (see `packageFile`) come from here.
 */
export const servePages = async (routes: Readonly<Record<string, PageRoute>>): Promise<PageServer> => {
  const server = createServer((req, res) => {
    const route = routes[new URL(req.url ?? "/", "http://localhost").pathname];
    if (route === undefined || (req.method !== "GET" && req.method !== "HEAD"))
      return void res.writeHead(404).end();
    const body = "text" in route ? Promise.resolve(route.text) : readFile(route.file);
    const type = "text" in route ? (route.type ?? TYPES[".html"]) : TYPES[extname(route.file)];
    body.then(
      (bytes) => res.writeHead(200, { "content-type": type ?? "application/octet-stream" }).end(bytes),
      (e: Error) => res.writeHead(500).end(e.message),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
};

const require = createRequire(import.meta.url);

/** The path of a file of an installed package (`hls.js/dist/hls.min.js`), to serve to a page. */
export const packageFile = (specifier: string) => require.resolve(specifier);

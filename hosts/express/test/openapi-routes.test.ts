import { join } from "node:path";
import { Writable } from "node:stream";
import { filesystemObjectStore } from "@vod/adapter-filesystem";
import { createApiApp, createLogger, createOpsApp, type RunningHost } from "@vod/host-express";
import { beforeAll, describe, expect, it } from "vitest";
import { suiteScratch } from "./suites.js";

interface Layer {
  readonly route?: { readonly path: string; readonly methods: Record<string, boolean> };
  readonly handle?: { readonly stack?: ReadonlyArray<Layer> };
}

const templated = (path: string) => path.replace(/[:*](\w+)/g, "{$1}");

/** `METHOD /path/{param}` of every route on an Express router stack, sub-routers included. */
const mounted = (stack: ReadonlyArray<Layer>): string[] =>
  stack.flatMap((layer) => {
    if (layer.route) {
      const path = templated(layer.route.path);
      return Object.keys(layer.route.methods)
        .filter((method) => layer.route?.methods[method])
        .map((method) => `${method.toUpperCase()} ${path}`);
    }
    return layer.handle?.stack ? mounted(layer.handle.stack) : [];
  });

describe("the OpenAPI document the host serves", () => {
  const scratch = suiteScratch("vod-openapi-");
  let host: RunningHost;

  beforeAll(async () => {
    const dir = await scratch.dir();
    host = await scratch.memoryHost(
      { VOD_DATA_DIR: dir, VOD_WORKER_CONCURRENCY: "0" },
      {
        objectStore: filesystemObjectStore({ root: join(dir, "objects") }),
        logger: createLogger("error", new Writable({ write: (_c, _e, done) => done() })),
      },
    );
  });

  it("documents exactly the routes the host mounts, and nothing else", async () => {
    const reply = await fetch(`${host.url}/v1/openapi.json`);
    expect(reply.status).toBe(200);
    const doc = (await reply.json()) as { paths: Record<string, Record<string, unknown>> };
    const documented = Object.entries(doc.paths)
      .flatMap(([path, methods]) => Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`))
      .sort();
    // The app as the host composes it: every route of the catalog and the host's own.
    const app = createApiApp({
      vod: host.vod,
      logger: createLogger("error", new Writable({ write: (_c, _e, done) => done() })),
    });
    // The catalog says what it routes; Express's router holds the host's own routes.
    const catalog = app.catalog.mounted.map((route) => {
      const [method = "", path = ""] = route.split(" ");
      return `${method} ${templated(path)}`;
    });
    const own = mounted((app.express as unknown as { router: { stack: ReadonlyArray<Layer> } }).router.stack);
    // CORS preflights are answered for browsers by the CORS middleware; they are no API operation.
    const routes = [...new Set([...catalog, ...own])].filter((r) => !r.startsWith("OPTIONS ")).sort();
    expect(routes.length).toBeGreaterThan(20);
    expect(documented).toEqual(routes);
    // The worker's app (`vod worker` with VOD_OPS_PORT) serves three of the host's own routes.
    const opsApp = createOpsApp({
      logger: createLogger("error", new Writable({ write: (_c, _e, done) => done() })),
      ops: { readiness: [] },
    });
    const ops = mounted(
      (opsApp as unknown as { router: { stack: ReadonlyArray<Layer> } }).router.stack,
    ).sort();
    expect(ops).toEqual(["GET /healthz", "GET /metrics", "GET /readyz"]);
    for (const route of ops) expect(documented).toContain(route);
  });
});

import { join } from "node:path";
import { Writable } from "node:stream";
import { filesystemObjectStore } from "@vod/adapter-filesystem";
import { createLogger, createOpsApp, type RunningHost } from "@vod/host-express";
import { createHttpHandler } from "@vod/http";
import { beforeAll, describe, expect, it } from "vitest";
import { suiteScratch } from "./suites.js";

const templated = (path: string) => path.replace(/[:*](\w+)/g, "{$1}");

/** `METHOD /path/{param}` of routes as a handler lists them. */
const asDocumented = (routes: ReadonlyArray<string>) =>
  routes.map((route) => {
    const [method = "", path = ""] = route.split(" ");
    return `${method} ${templated(path)}`;
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

  it("documents every route the host serves, and serves every route it documents", async () => {
    const reply = await fetch(`${host.url}/v1/openapi.json`);
    expect(reply.status).toBe(200);
    const doc = (await reply.json()) as { paths: Record<string, Record<string, unknown>> };
    const documented = Object.entries(doc.paths)
      .flatMap(([path, methods]) => Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`))
      .sort();
    // The handler as the host composes it: every route of the catalog, the host's own, and the
    // CORS preflights of the routes browsers call.
    const silent = createLogger("error", new Writable({ write: (_c, _e, done) => done() }));
    const routes = asDocumented(createHttpHandler(host.vod, { logger: silent }).routes).sort();
    expect(routes.length).toBeGreaterThan(20);
    expect(documented).toEqual(routes);
    // The worker's app (`vod worker` with VOD_OPS_PORT) serves three of the host's own routes.
    const ops = asDocumented(
      createOpsApp({ vod: host.vod, logger: silent, ops: { readiness: [] } }).routes,
    ).sort();
    expect(ops).toEqual(["GET /healthz", "GET /metrics", "GET /readyz"]);
    for (const route of ops) expect(documented).toContain(route);
  });
});

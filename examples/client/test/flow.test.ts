import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runFlow } from "@vod/example-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, freePort, makeVideo, signUp, startServe, stop } from "../../../hosts/express/test/support.js";

describe("a backend on @vod/client against `vod serve` (embedded default)", () => {
  let dir: string;
  let host: Awaited<ReturnType<typeof startServe>>;
  let apiKey: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "vod-client-flow-"));
    host = await startServe(
      {
        VOD_DATA_DIR: join(dir, "data"),
        VOD_LOG_LEVEL: "warn",
        VOD_WORKER_CONCURRENCY: "1",
        VOD_WEBHOOKS_ALLOW_PRIVATE: "true",
      },
      await freePort(),
    );
    const auth = await signUp(host.url, "client-flow");
    // Three assets before this one: listing two a page takes more than one page to reach it.
    for (const title of ["one", "two", "three"])
      expect((await call(host.url, "/v1/assets", { headers: auth, body: { title } })).status).toBe(201);
    const key = await call(host.url, "/v1/api-keys", {
      headers: auth,
      body: { name: "backend", scopes: ["admin"] },
    });
    expect(key.status).toBe(201);
    apiKey = key.body.key;
  }, 120_000);

  afterAll(async () => {
    if (host) await stop(host);
    await rm(dir, { recursive: true, force: true });
  });

  it("creates, uploads, waits for ready, plays, lists every page and verifies the asset.ready webhook", async () => {
    const file = join(dir, "clip.mp4");
    await makeVideo(file, { width: 320, height: 180, seconds: 3 });
    const size = (await stat(file)).size;

    const result = await runFlow({ apiUrl: host.url, apiKey, file });

    expect(result.asset.status).toBe("ready");
    expect(result.asset.origin_size_bytes).toBe(size);
    expect(result.uploadedBytes).toBe(size);
    expect(result.progressReports).toBeGreaterThanOrEqual(2);
    expect(result.manifest.startsWith("#EXTM3U")).toBe(true);
    expect(result.listed).toEqual({ assets: 4, pages: 2, found: true });
    expect(result.webhook.type).toBe("asset.ready");
    expect(result.webhook.data.asset.id).toBe(result.asset.id);
    expect(result.webhook.data.asset.status).toBe("ready");
    expect(result.tamperedRejected).toBe(true);
    // The webhook was deleted at the end of the flow.
    const hooks = await call(host.url, "/v1/webhooks", { headers: { "x-api-key": apiKey } });
    expect(hooks.body.data).toEqual([]);
  }, 240_000);
});

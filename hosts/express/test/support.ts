import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { generateSigningKeys } from "@vod/adapter-jose";
import {
  type MemoryJobQueueOptions,
  type MemoryStorage,
  memoryJobQueue,
  memoryStorage,
} from "@vod/adapter-memory";
import { loadConfig, startHost } from "@vod/host-express";
import {
  launchChromium,
  type PageRoute,
  type PageServer,
  servePages,
  type TestBrowser,
} from "@vod/test-services/browser";

/** The CLI as `npm start` runs it, from the build that `npm test` makes before vitest. */
export const cli = fileURLToPath(new URL("../dist/bin/vod.js", import.meta.url));

/**
 * The host in this process on memory storage (a new one unless given) and the memory job queue
 * over it (`queue`: its options); `overrides` give any other port.
 */
export const startMemoryHost = (
  env: Record<string, string>,
  overrides: NonNullable<Parameters<typeof startHost>[1]> & { readonly storage?: MemoryStorage } = {},
  queue: MemoryJobQueueOptions = {},
) => {
  const storage = overrides.storage ?? memoryStorage();
  return startHost(loadConfig({ PORT: "0", VOD_HOST: "127.0.0.1", ...env }), {
    ...overrides,
    storage,
    jobQueue: memoryJobQueue(storage, queue),
  });
};

export const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

export interface Spawned {
  readonly child: ChildProcess;
  readonly output: () => string;
  /** Resolves once the output contains `text`. */
  readonly waitFor: (text: string, timeoutMs?: number) => Promise<void>;
}

export const spawnCli = (command: "serve" | "worker", env: Record<string, string>): Spawned => {
  let output = "";
  const child = spawn(process.execPath, [cli, command], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout?.on("data", (d) => {
    output += d;
  });
  child.stderr?.on("data", (d) => {
    output += d;
  });
  const waitFor = async (text: string, timeoutMs = 60_000) => {
    const until = Date.now() + timeoutMs;
    while (!output.includes(text)) {
      if (child.exitCode !== null) throw new Error(`${command} exited early:\n${output}`);
      if (Date.now() > until) throw new Error(`${command} never printed ${JSON.stringify(text)}:\n${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  return { child, output: () => output, waitFor };
};

export const exited = (spawned: Pick<Spawned, "child">) =>
  spawned.child.exitCode !== null || spawned.child.signalCode !== null;

/** Until `check` holds, looking every `everyMs`; past `timeoutMs` it fails, saying `what` never happened. */
export const eventually = async (
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 30_000,
  everyMs = 100,
) => {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
};

/** Until a started `vod serve` answers /healthz with 200; one that exits on the way fails with its output. */
export const healthy = async (spawned: Spawned, url: string) => {
  try {
    await eventually(
      "/healthz answering 200",
      async () => {
        if (exited(spawned)) throw new Error(`serve exited while starting:\n${spawned.output()}`);
        return fetch(`${url}/healthz`).then(
          (r) => r.status === 200,
          () => false,
        );
      },
      60_000,
    );
  } catch (e) {
    spawned.child.kill("SIGKILL");
    throw exited(spawned) ? e : new Error(`serve never answered /healthz:\n${spawned.output()}`);
  }
};

/** Starts `vod serve` on `port` and waits until /healthz answers 200. */
export const startServe = async (env: Record<string, string>, port: number) => {
  const spawned = spawnCli("serve", { ...env, PORT: String(port), VOD_HOST: "127.0.0.1" });
  const url = `http://127.0.0.1:${port}`;
  await healthy(spawned, url);
  return { ...spawned, url };
};

/** SIGTERM, then the exit code. */
export const stop = (spawned: Pick<Spawned, "child">) =>
  new Promise<number | null>((resolve) => {
    // Killed by a signal, a child keeps exitCode null and sets signalCode instead.
    if (exited(spawned)) return resolve(spawned.child.exitCode);
    spawned.child.once("exit", (code) => resolve(code));
    spawned.child.kill("SIGTERM");
  });

export interface Reply {
  readonly status: number;
  // biome-ignore lint/suspicious/noExplicitAny: JSON bodies are read field by field in assertions.
  readonly body: any;
  readonly headers: Headers;
}

export const call = async (
  url: string,
  path: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Reply> => {
  const res = await fetch(`${url}${path}`, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    headers: { ...(init.body === undefined ? {} : { "content-type": "application/json" }), ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
};

/** A real video made by ffmpeg: test pattern and a tone, H.264/AAC in MP4. */
export const makeVideo = async (
  path: string,
  options: { width: number; height: number; seconds: number; fps?: number; audio?: boolean },
) => {
  const fps = options.fps ?? 30;
  const args = [
    "-v",
    "error",
    "-y",
    "-f",
    "lavfi",
    "-i",
    `testsrc2=size=${options.width}x${options.height}:rate=${fps}:duration=${options.seconds}`,
    ...(options.audio === false
      ? []
      : ["-f", "lavfi", "-i", `sine=frequency=440:duration=${options.seconds}`]),
    "-c:v",
    "libx264",
    "-preset",
    "ultrafast",
    "-pix_fmt",
    "yuv420p",
    ...(options.audio === false ? [] : ["-c:a", "aac"]),
    "-movflags",
    "+faststart",
    path,
  ];
  await promisify(execFile)("ffmpeg", args);
};

/**
 * A real MP4 of about `megabytes` MB: x264 at a constant bitrate fills each second with filler
 * data, so the size is set by bitrate times duration while the encode stays quick.
 */
export const makeSizedVideo = (path: string, megabytes: number) => {
  const seconds = 6;
  const bitrate = `${Math.round((megabytes * 8) / seconds)}M`;
  return promisify(execFile)("ffmpeg", [
    ...["-v", "error", "-y", "-f", "lavfi", "-i", `testsrc2=size=640x360:rate=30:duration=${seconds}`],
    ...["-f", "lavfi", "-i", `sine=frequency=440:duration=${seconds}`],
    ...["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"],
    ...["-b:v", bitrate, "-minrate", bitrate, "-maxrate", bitrate, "-bufsize", bitrate],
    ...["-x264-params", "nal-hrd=cbr", "-c:a", "aac", "-movflags", "+faststart", path],
  ]);
};

/** The secrets every process of one deployment shares: given to each, not made per data directory. */
export const deploymentSecrets = async () => ({
  VOD_SIGNING_KEYS: JSON.stringify(await generateSigningKeys()),
  VOD_CURSOR_SECRET: randomBytes(32).toString("hex"),
  VOD_UPLOAD_URL_SECRET: randomBytes(32).toString("hex"),
  VOD_DRM_MASTER_KEY: randomBytes(32).toString("hex"),
});

/** Signs up a fresh tenant and answers its bearer header. */
export const signUp = async (url: string, tag: string) => {
  const res = await call(url, "/v1/auth/signup", {
    body: {
      email: `${tag}-${Date.now()}-${Math.random().toString(36).slice(2)}@example.com`,
      password: "correct horse battery",
    },
  });
  if (res.status !== 201) throw new Error(`signup: ${res.status} ${JSON.stringify(res.body)}`);
  return { authorization: `Bearer ${res.body.access_token}` };
};

/**
 * Creates an asset (`drm` as given) and uploads `bytes` through the part URLs, declaring `sha256`
 * if given, then completes the upload.
 */
export const uploadAsset = async (
  url: string,
  auth: Record<string, string>,
  bytes: Uint8Array,
  title = "clip",
  options: {
    readonly drm?: boolean;
    readonly sha256?: string;
    /** The `parts` list of the completion, from each part's bytes; default none. */
    readonly completeParts?: (parts: ReadonlyArray<{ number: number; bytes: Uint8Array }>) => unknown[];
  } = {},
) => {
  const { drm, sha256 } = options;
  const created = await call(url, "/v1/assets", { body: { title, drm }, headers: auth });
  const assetId: string = created.body.asset.id;
  const started = await call(url, "/v1/uploads", {
    body: { asset_id: assetId, size_bytes: bytes.length, sha256 },
    headers: auth,
  });
  if (started.status !== 201) throw new Error(`start: ${started.status} ${JSON.stringify(started.body)}`);
  const { id, part_size, parts } = started.body.upload as {
    id: string;
    part_size: number;
    parts: Array<{ number: number; url: string }>;
  };
  const bodies = parts.map((part) => ({
    number: part.number,
    bytes: bytes.subarray((part.number - 1) * part_size, part.number * part_size),
  }));
  for (const part of parts) {
    const put = await fetch(part.url, { method: "PUT", body: bodies[part.number - 1]!.bytes });
    if (put.status !== 200) throw new Error(`part ${part.number}: ${put.status} ${await put.text()}`);
  }
  const completed = await call(url, `/v1/uploads/${id}/complete`, {
    body: options.completeParts ? { parts: options.completeParts(bodies) } : {},
    headers: auth,
  });
  if (completed.status !== 200)
    throw new Error(`complete: ${completed.status} ${JSON.stringify(completed.body)}`);
  return { assetId, uploadId: id, tenantId: completed.body.asset.tenant_id as string | undefined };
};

/** Until the asset reads `status`: a worker's log line comes before the move it reports commits. */
export const assetReads = (
  url: string,
  auth: Record<string, string>,
  assetId: string,
  status: string,
  timeoutMs = 30_000,
) =>
  eventually(
    `asset ${assetId} reading ${status}`,
    async () => (await call(url, `/v1/assets/${assetId}`, { headers: auth })).body.asset.status === status,
    timeoutMs,
    50,
  );

/** Polls the asset until it is failed, or ready with no rendition pending. */
export const settledAsset = async (
  url: string,
  auth: Record<string, string>,
  assetId: string,
  timeoutMs = 120_000,
) => {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const res = await call(url, `/v1/assets/${assetId}`, { headers: auth });
    const { asset } = res.body;
    // Ready is playable; settled is every rendition made (or failed) too.
    const pending = (asset.renditions as Array<{ status: string }>).some((r) => r.status === "pending");
    if ((asset.status === "ready" && !pending) || asset.status === "failed") return asset;
    if (Date.now() > until) throw new Error(`asset still ${res.body.asset.status} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
};

/** A Redis of the test's own, which it may kill and restart: never the shared one. */
export const startRedis = async (port: number) => {
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
    { stdio: "ignore" },
  );
  for (let i = 0; i < 100; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const ping = spawn("redis-cli", ["-p", String(port), "ping"], { stdio: ["ignore", "pipe", "ignore"] });
      let out = "";
      ping.stdout.on("data", (d) => {
        out += d;
      });
      // "close": "exit" may come before the output is read.
      ping.on("close", () => resolve(out.includes("PONG")));
    });
    if (up) return child;
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill("SIGKILL");
  throw new Error(`redis-server did not start on port ${port}`);
};

/** SIGKILL, and wait for the exit. */
export const kill = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once("exit", () => resolve());
    child.kill("SIGKILL");
  });

/**
 * What a browser test of the kit starts with: a scratch directory holding a real MP4 of about
 * `videoMiB` MB, pages served from an origin of their own (`routes`, given the video's path), a
 * memory host whose CORS lets those pages call it, an API key of `scope`, and Chromium.
 * `close` undoes it all.
 */
export interface KitPages {
  readonly video: string;
  readonly pages: PageServer;
  readonly host: Awaited<ReturnType<typeof startMemoryHost>>;
  readonly apiKey: string;
  readonly browser: TestBrowser;
  readonly close: () => Promise<void>;
}

export const startKitPages = async (options: {
  readonly prefix: string;
  readonly videoMiB: number;
  readonly routes: (video: string) => Readonly<Record<string, PageRoute>>;
  readonly scope: "read" | "write" | "admin";
}): Promise<KitPages> => {
  const dir = await mkdtemp(join(tmpdir(), options.prefix));
  const video = join(dir, "video.mp4");
  await makeSizedVideo(video, options.videoMiB);
  const pages = await servePages(options.routes(video));
  const host = await startMemoryHost({
    VOD_DATA_DIR: dir,
    VOD_WORKER_CONCURRENCY: "0",
    VOD_LOG_LEVEL: "warn",
    VOD_CORS_ORIGINS: pages.url,
  });
  const auth = await signUp(host.url, options.prefix);
  const apiKey: string = (
    await call(host.url, "/v1/api-keys", { headers: auth, body: { name: "tool", scopes: [options.scope] } })
  ).body.key;
  const browser = await launchChromium();
  return {
    video,
    pages,
    host,
    apiKey,
    browser,
    close: async () => {
      await browser.close();
      await host.close(1_000);
      await pages.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
};

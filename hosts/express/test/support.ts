import { type ChildProcess, execFile, spawn } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/** The CLI as `npm start` runs it, from the build that `npm test` makes before vitest. */
export const cli = fileURLToPath(new URL("../dist/bin/vod.js", import.meta.url));

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

/** Starts `vod serve` on `port` and waits until /healthz answers 200. */
export const startServe = async (env: Record<string, string>, port: number) => {
  const spawned = spawnCli("serve", { ...env, PORT: String(port), VOD_HOST: "127.0.0.1" });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    if (spawned.child.exitCode !== null) throw new Error(`host exited early:\n${spawned.output()}`);
    const ok = await fetch(`${url}/healthz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return { ...spawned, url };
    await new Promise((r) => setTimeout(r, 100));
  }
  spawned.child.kill("SIGKILL");
  throw new Error(`host did not answer /healthz:\n${spawned.output()}`);
};

/** SIGTERM, then the exit code. */
export const stop = (spawned: Pick<Spawned, "child">) =>
  new Promise<number | null>((resolve) => {
    // Killed by a signal, a child keeps exitCode null and sets signalCode instead.
    if (spawned.child.exitCode !== null || spawned.child.signalCode !== null)
      return resolve(spawned.child.exitCode);
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

/** Creates an asset and uploads `bytes` through the part URLs, then completes the upload. */
export const uploadAsset = async (
  url: string,
  auth: Record<string, string>,
  bytes: Uint8Array,
  title = "clip",
) => {
  const created = await call(url, "/v1/assets", { body: { title }, headers: auth });
  const assetId: string = created.body.asset.id;
  const started = await call(url, "/v1/uploads", {
    body: { asset_id: assetId, size_bytes: bytes.length },
    headers: auth,
  });
  if (started.status !== 201) throw new Error(`start: ${started.status} ${JSON.stringify(started.body)}`);
  const { id, part_size, parts } = started.body.upload as {
    id: string;
    part_size: number;
    parts: Array<{ number: number; url: string }>;
  };
  for (const part of parts) {
    const body = bytes.subarray((part.number - 1) * part_size, part.number * part_size);
    const put = await fetch(part.url, { method: "PUT", body });
    if (put.status !== 200) throw new Error(`part ${part.number}: ${put.status} ${await put.text()}`);
  }
  const completed = await call(url, `/v1/uploads/${id}/complete`, { body: {}, headers: auth });
  if (completed.status !== 200)
    throw new Error(`complete: ${completed.status} ${JSON.stringify(completed.body)}`);
  return { assetId, uploadId: id, tenantId: completed.body.asset.tenant_id as string | undefined };
};

/** Polls the asset until it leaves uploaded/processing. */
export const settledAsset = async (
  url: string,
  auth: Record<string, string>,
  assetId: string,
  timeoutMs = 120_000,
) => {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const res = await call(url, `/v1/assets/${assetId}`, { headers: auth });
    if (res.body.asset.status === "ready" || res.body.asset.status === "failed") return res.body.asset;
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
      ping.on("exit", () => resolve(out.includes("PONG")));
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

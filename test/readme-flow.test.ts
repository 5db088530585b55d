/**
 * The README's "From sign-up to playback", run as a newcomer pastes it: its ```sh blocks, in
 * order and verbatim, in one bash, beside a host started on a new data directory.
 *
 * The host is started as `npm start` starts it once its build step is done: `npm start` runs
 * scripts/start.mjs, which builds (tsc -b) and then runs hosts/express/dist/bin/vod.js `serve` in
 * its own process; `npm test` has built by then, so this runs that file directly rather than
 * building again. The only settings are variables the README names (PORT, VOD_DATA_DIR, VOD_HOST,
 * VOD_STATE_DIR, VOD_LOG_FORMAT), and TMPDIR, so that the flow's `mktemp -d` lands in this test's
 * directory and is removed with it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";

const root = fileURLToPath(new URL("..", import.meta.url));
const cli = join(root, "hosts/express/dist/bin/vod.js");
const SECTION = "## From sign-up to playback";

/** The ```sh blocks of the README's flow section, in order. */
const flowBlocks = (readme: string) => {
  const start = readme.indexOf(`\n${SECTION}\n`);
  if (start < 0) throw new Error(`README.md has no section "${SECTION}"`);
  const next = readme.indexOf("\n## ", start + SECTION.length + 2);
  const section = readme.slice(start, next < 0 ? undefined : next);
  return [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map(([, code = ""]) => code);
};

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

const MARKER = "--- readme-flow: variables ---";

let dir: string;
let port: number;
let host: ChildProcess | undefined;
let hostOutput = "";

beforeAll(async () => {
  if (!existsSync(cli)) throw new Error(`${cli} is missing: build first (npx tsc -b), as npm test does`);
  dir = await mkdtemp(join(tmpdir(), "vod-readme-flow-"));
  await mkdir(join(dir, "tmp"));
  port = await freePort();
  host = spawn(process.execPath, [cli, "serve"], {
    cwd: root,
    env: {
      ...process.env,
      PORT: String(port),
      VOD_HOST: "127.0.0.1",
      VOD_DATA_DIR: join(dir, "data"),
      VOD_LOG_FORMAT: "json",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  host.stdout?.on("data", (d) => {
    hostOutput += d;
  });
  host.stderr?.on("data", (d) => {
    hostOutput += d;
  });
  // A new embedded database takes about half a minute to create on a small machine.
  const until = Date.now() + 110_000;
  for (;;) {
    if (host.exitCode !== null) throw new Error(`vod serve exited while starting:\n${hostOutput}`);
    const ok = await fetch(`http://127.0.0.1:${port}/healthz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) break;
    if (Date.now() > until) throw new Error(`vod serve never answered /healthz:\n${hostOutput}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}, 120_000);

afterAll(async () => {
  if (host && host.exitCode === null && host.signalCode === null) {
    const exited = new Promise((resolve) => host?.once("exit", resolve));
    host.kill("SIGTERM");
    await exited;
  }
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

/** The blocks in one `bash` with `set -euo pipefail`, then the flow's ids printed after a marker. */
const runFlow = (blocks: ReadonlyArray<string>) => {
  const script = [
    "set -euo pipefail",
    ...blocks,
    `printf '%s\\n' '${MARKER}' "$VOD_API_KEY" "$ASSET_ID" "$DRM_ASSET_ID"`,
  ].join("\n");
  const { VOD_API_URL: _url, VOD_API_KEY: _key, ...env } = process.env;
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const bash = spawn("bash", ["-c", script], {
      cwd: root,
      env: { ...env, PORT: String(port), VOD_STATE_DIR: join(dir, "state"), TMPDIR: join(dir, "tmp") },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    bash.stdout.on("data", (d) => {
      stdout += d;
    });
    bash.stderr.on("data", (d) => {
      stderr += d;
    });
    bash.on("close", (code) => resolve({ code, stdout, stderr }));
  });
};

it("the README's flow, pasted into bash on a fresh start, plays the upload and entitles its DRM copy", async () => {
  const blocks = flowBlocks(await readFile(join(root, "README.md"), "utf8"));
  // The flow a newcomer reads: sign-up, key, a video made by ffmpeg, upload, play, DRM.
  const flow = blocks.join("\n");
  for (const step of [
    "/v1/auth/signup",
    "/v1/api-keys",
    "ffmpeg ",
    "npm run -s vod -- upload",
    "--wait",
    "npm run -s vod -- play",
    "ffprobe ",
    "--drm",
  ])
    expect(flow).toContain(step);
  expect(flow).not.toContain("8080/"); // the address comes from PORT, defaulting to 8080

  const run = await runFlow(blocks);
  expect(run.code, `the flow failed:\n${run.stderr}\n${run.stdout}\nhost:\n${hostOutput}`).toBe(0);
  const [said = "", variables = ""] = run.stdout.split(`${MARKER}\n`);

  // ffprobe read the playback URL: the master playlist's rendition has a video stream (the sample
  // is 320x240, so the ladder is that one rendition) and its sound.
  expect(said).toMatch(/^codec_name=h264\|codec_type=video\|width=320\|height=240$/m);
  expect(said).toMatch(/^codec_name=aac\|codec_type=audio$/m);

  // The DRM step's answer, as jq printed it: the entitlement, ClearKey on this host.
  const entitlement = JSON.parse(said.slice(said.lastIndexOf("\n{\n") + 1));
  expect(entitlement.key_systems["org.w3.clearkey"].license_url).toBe(
    `http://localhost:${port}/v1/drm/clearkey/license`,
  );
  expect(Object.keys(entitlement.license_headers)).toEqual(["x-vod-license-token"]);
  expect(entitlement.expires_at).toBeGreaterThan(Date.now());

  // What the flow left on the platform, seen with the key it made.
  const [apiKey = "", assetId = "", drmAssetId = ""] = variables.trim().split("\n");
  expect(apiKey).toMatch(/^vod_/);
  const asset = async (id: string) => {
    const response = await fetch(`http://127.0.0.1:${port}/v1/assets/${id}`, {
      headers: { "x-api-key": apiKey },
    });
    expect(response.status).toBe(200);
    return ((await response.json()) as { asset: Record<string, unknown> }).asset;
  };
  expect(await asset(assetId)).toMatchObject({
    title: "Sample",
    status: "ready",
    drm_enabled: false,
    source_width: 320,
    source_height: 240,
    renditions: [{ name: "240p", status: "ready" }],
  });
  expect(await asset(drmAssetId)).toMatchObject({
    title: "Sample (protected)",
    status: "ready",
    drm_enabled: true,
  });
}, 240_000);

/**
 * The README's "From sign-up to playback", run as a newcomer pastes it: its ```sh blocks, in
 * order and verbatim, in one bash, beside a host started on a new data directory. Then the longer
 * flow of docs/api.md (curl alone) the same way, on a host of its own (both sign Ann up), with
 * `localhost:8080` read as this host's port.
 *
 * The host is started as `npm start` starts it once its build step is done: `npm start` runs
 * scripts/start.mjs, which builds (tsc -b) and then runs hosts/express/dist/bin/vod.js `serve` in
 * its own process; `npm test` has built by then, so this runs that file directly rather than
 * building again. The only settings are variables the README names (PORT, VOD_DATA_DIR, VOD_HOST,
 * VOD_STATE_DIR, VOD_LOG_FORMAT), and TMPDIR, so that the flow's `mktemp -d` lands in this test's
 * directory and is removed with it.
 */
import { spawn } from "node:child_process";
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

beforeAll(async () => {
  if (!existsSync(cli)) throw new Error(`${cli} is missing: build first (npx tsc -b), as npm test does`);
  dir = await mkdtemp(join(tmpdir(), "vod-readme-flow-"));
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** `vod serve` on a new data directory under `dir/name`, once it answers /healthz. */
const startHost = async (name: string) => {
  const port = await freePort();
  let output = "";
  const host = spawn(process.execPath, [cli, "serve"], {
    cwd: root,
    env: {
      ...process.env,
      PORT: String(port),
      VOD_HOST: "127.0.0.1",
      VOD_DATA_DIR: join(dir, name, "data"),
      VOD_LOG_FORMAT: "json",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  host.stdout?.on("data", (d) => {
    output += d;
  });
  host.stderr?.on("data", (d) => {
    output += d;
  });
  const stop = async () => {
    if (host.exitCode !== null || host.signalCode !== null) return;
    const exited = new Promise((resolve) => host.once("exit", resolve));
    host.kill("SIGTERM");
    await exited;
  };
  // A new embedded database takes about half a minute to create on a small machine.
  const until = Date.now() + 110_000;
  for (;;) {
    if (host.exitCode !== null) throw new Error(`vod serve exited while starting:\n${output}`);
    const ok = await fetch(`http://127.0.0.1:${port}/healthz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) break;
    if (Date.now() > until) {
      host.kill("SIGKILL");
      throw new Error(`vod serve never answered /healthz:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { port, stop, output: () => output };
};

/** `script` in one `bash` with `set -euo pipefail`, no VOD_API_URL or VOD_API_KEY of the test's own. */
const bash = (script: string, cwd: string, env: Record<string, string>) => {
  const { VOD_API_URL: _url, VOD_API_KEY: _key, ...inherited } = process.env;
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn("bash", ["-c", `set -euo pipefail\n${script}`], {
      cwd,
      env: { ...inherited, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
};

/** What the flow left on the platform, seen with the key it made. */
const assetOf = async (port: number, apiKey: string, id: string) => {
  const response = await fetch(`http://127.0.0.1:${port}/v1/assets/${id}`, {
    headers: { "x-api-key": apiKey },
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { asset: Record<string, unknown> }).asset;
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

  const host = await startHost("readme");
  try {
    await mkdir(join(dir, "readme", "tmp"));
    // The clone's directory, as the README says; the flow writes nothing there.
    const run = await bash(
      `${flow}\nprintf '%s\\n' '${MARKER}' "$VOD_API_KEY" "$ASSET_ID" "$DRM_ASSET_ID"`,
      root,
      {
        PORT: String(host.port),
        VOD_STATE_DIR: join(dir, "readme", "state"),
        TMPDIR: join(dir, "readme", "tmp"),
      },
    );
    expect(run.code, `the flow failed:\n${run.stderr}\n${run.stdout}\nhost:\n${host.output()}`).toBe(0);
    const [said = "", variables = ""] = run.stdout.split(`${MARKER}\n`);

    // ffprobe read the playback URL: the master playlist's rendition has a video stream (the
    // sample is 320x240, so the ladder is that one rendition) and its sound.
    expect(said).toMatch(/^codec_name=h264\|codec_type=video\|width=320\|height=240$/m);
    expect(said).toMatch(/^codec_name=aac\|codec_type=audio$/m);

    // The DRM step's answer, as jq printed it: the entitlement, ClearKey on this host.
    const entitlement = JSON.parse(said.slice(said.lastIndexOf("\n{\n") + 1));
    expect(entitlement.key_systems["org.w3.clearkey"].license_url).toBe(
      `http://localhost:${host.port}/v1/drm/clearkey/license`,
    );
    expect(Object.keys(entitlement.license_headers)).toEqual(["x-vod-license-token"]);
    expect(entitlement.expires_at).toBeGreaterThan(Date.now());

    const [apiKey = "", assetId = "", drmAssetId = ""] = variables.trim().split("\n");
    expect(apiKey).toMatch(/^vod_/);
    expect(await assetOf(host.port, apiKey, assetId)).toMatchObject({
      title: "Sample",
      status: "ready",
      drm_enabled: false,
      source_width: 320,
      source_height: 240,
      renditions: [{ name: "240p", status: "ready" }],
    });
    expect(await assetOf(host.port, apiKey, drmAssetId)).toMatchObject({
      title: "Sample (protected)",
      status: "ready",
      drm_enabled: true,
    });
  } finally {
    await host.stop();
  }
}, 240_000);

it("docs/api.md's flow, every sh block in order in one bash, runs from sign-up to the DRM entitlement", async () => {
  const blocks = [
    ...(await readFile(join(root, "docs/api.md"), "utf8")).matchAll(/^```sh\n([\s\S]*?)^```$/gm),
  ].map(([, code = ""]) => code);
  expect(blocks.length).toBeGreaterThanOrEqual(8);
  const host = await startHost("api");
  try {
    // The page runs in a directory holding trailer.mp4 and writes its answers there (signup.json, …).
    const work = join(dir, "api", "work");
    await mkdir(work, { recursive: true });
    const made = await bash(
      "ffmpeg -v error -f lavfi -i testsrc=size=320x240:rate=25:duration=5 -f lavfi -i sine=duration=5 " +
        "-c:v libx264 -pix_fmt yuv420p -c:a aac -shortest trailer.mp4",
      work,
      {},
    );
    expect(made.code, made.stderr).toBe(0);
    // The page names the host by `localhost:8080`, what `npm start` listens on; here it is this host's port.
    const script = blocks.join("\n").replaceAll("localhost:8080", `localhost:${host.port}`);
    const run = await bash(`${script}\nprintf '%s\\n' '${MARKER}' "$API_KEY" "$ASSET_ID"`, work, {});
    expect(run.code, `the flow failed:\n${run.stderr}\n${run.stdout}\nhost:\n${host.output()}`).toBe(0);
    const [said = "", variables = ""] = run.stdout.split(`${MARKER}\n`);
    // curl prints each answer without a newline after it: the lines after one are joined to it.
    expect(said).toMatch(/part 1: 200$/m);
    expect(said).toMatch(/^codec_name=h264\|codec_type=video\|width=320\|height=240$/m);
    const entitlement = JSON.parse(await readFile(join(work, "entitlement.json"), "utf8"));
    expect(entitlement.key_systems["org.w3.clearkey"].license_url).toBe(
      `http://localhost:${host.port}/v1/drm/clearkey/license`,
    );
    const [apiKey = "", drmAssetId = ""] = variables.trim().split("\n");
    expect(await assetOf(host.port, apiKey, drmAssetId)).toMatchObject({
      title: "Trailer (protected)",
      status: "ready",
      drm_enabled: true,
    });
  } finally {
    await host.stop();
  }
}, 240_000);

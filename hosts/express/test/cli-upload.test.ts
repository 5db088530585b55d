import { type ChildProcess, execFile, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { connect, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, cli, eventually, freePort, makeSizedVideo, signUp, startServe, stop } from "./support.js";

/**
 * A TCP relay in front of the host that counts every byte a client sends through it: requests,
 * headers and part bodies, those of a run killed midway included, as the server receives them.
 */
const countingRelay = async (target: number) => {
  let sent = 0;
  const server: Server = createServer((socket) => {
    const upstream = connect(target, "127.0.0.1");
    socket.on("data", (chunk) => {
      sent += chunk.length;
    });
    socket.pipe(upstream).pipe(socket);
    // A client killed outright resets its connections: the relay drops them quietly.
    socket.on("error", () => upstream.destroy());
    upstream.on("error", () => socket.destroy());
  });
  const port = await new Promise<number>((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)),
  );
  return {
    url: `http://127.0.0.1:${port}`,
    sent: () => sent,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
};

const sha256Of = (path: string) =>
  new Promise<string>((resolve, reject) => {
    const hash = createHash("sha256");
    createReadStream(path)
      .on("data", (d) => hash.update(d))
      .on("end", () => resolve(hash.digest("hex")))
      .on("error", reject);
  });

interface Run {
  readonly child: ChildProcess;
  readonly stdout: () => string;
  readonly stderr: () => string;
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const runCli = (args: ReadonlyArray<string>, env: Record<string, string>): Run => {
  let stdout = "";
  let stderr = "";
  const child = spawn(process.execPath, [cli, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout?.on("data", (d) => {
    stdout += d;
  });
  child.stderr?.on("data", (d) => {
    stderr += d;
  });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("close", (code, signal) => resolve({ code, signal })),
  );
  return { child, stdout: () => stdout, stderr: () => stderr, exit };
};

describe("vod upload (embedded host)", () => {
  let dir: string;
  let host: Awaited<ReturnType<typeof startServe>>;
  let relay: Awaited<ReturnType<typeof countingRelay>>;
  let apiKey: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "vod-cli-upload-"));
    const port = await freePort();
    relay = await countingRelay(port);
    // Part URLs and playback URLs name the relay, so that every byte sent passes through it.
    host = await startServe(
      {
        VOD_DATA_DIR: join(dir, "data"),
        VOD_LOG_LEVEL: "warn",
        VOD_WORKER_CONCURRENCY: "1",
        VOD_BASE_URL: relay.url,
        VOD_MEDIA_URL: relay.url,
        VOD_DRM_URL: relay.url,
      },
      port,
    );
    const auth = await signUp(host.url, "cli-upload");
    const key = await call(host.url, "/v1/api-keys", {
      headers: auth,
      body: { name: "cli", scopes: ["write"] },
    });
    expect(key.status).toBe(201);
    apiKey = key.body.key;
  }, 120_000);

  afterAll(async () => {
    if (host) await stop(host);
    await relay?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("SIGKILLed at about 40%, run again: resumes, sends at most 1.15x the file, reaches ready and prints a URL ffprobe reads", async () => {
    const file = join(dir, "source.mp4");
    await makeSizedVideo(file, 60);
    const size = (await stat(file)).size;
    expect(size).toBeGreaterThan(55_000_000);
    const stateDir = join(dir, "state");
    const env = { VOD_API_URL: relay.url, VOD_API_KEY: apiKey, VOD_STATE_DIR: stateDir };
    // A killed run loses the parts it was sending (at most `--parallel` of 8 MiB): one at a time
    // keeps that under 15% of a 60 MB file whenever the kill comes.
    const args = ["upload", file, "--title", "resumed", "--parallel", "1", "--wait"];

    const before = relay.sent();
    const first = runCli(args, env);
    await eventually("40% of the file sent", () => relay.sent() - before >= 0.4 * size, 60_000, 5);
    first.child.kill("SIGKILL");
    expect((await first.exit).signal).toBe("SIGKILL");
    const assetId = /asset (ast_\w+)/.exec(first.stdout())?.[1];
    expect(assetId).toBeDefined();
    // The state of the killed run is there for the next one.
    expect(await readdir(join(stateDir, "uploads"))).toHaveLength(1);

    const second = runCli(args, env);
    const { code } = await second.exit;
    expect(code, second.stderr()).toBe(0);
    expect(second.stderr()).toMatch(/resuming upload upl_\w+: [1-7] of 8 parts/);
    expect(second.stdout()).toContain(`asset ${assetId}`);
    const sent = relay.sent() - before;
    expect(sent).toBeGreaterThan(size);
    expect(sent / size).toBeLessThanOrEqual(1.15);

    const manifest = /ready: (\S+)/.exec(second.stdout())?.[1];
    expect(manifest).toMatch(/\/master\.m3u8$/);
    const probe = await promisify(execFile)("ffprobe", [
      ...["-v", "error", "-show_entries", "stream=codec_type", "-of", "json", manifest ?? ""],
    ]);
    const types = (JSON.parse(probe.stdout).streams as Array<{ codec_type: string }>).map(
      (s) => s.codec_type,
    );
    expect(types).toContain("video");

    // What was stored is the file, byte for byte; the finished upload leaves no state behind.
    const asset = await call(host.url, `/v1/assets/${assetId}`, { headers: { "x-api-key": apiKey } });
    expect(asset.body.asset.status).toBe("ready");
    expect(asset.body.asset.origin_size_bytes).toBe(size);
    expect(asset.body.asset.checksum_sha256).toBe(await sha256Of(file));
    expect(await readdir(join(stateDir, "uploads"))).toHaveLength(0);
  }, 240_000);

  it("on a terminal, draws a bar with percent, bytes, speed and ETA", async () => {
    const file = join(dir, "small.mp4");
    await makeSizedVideo(file, 20);
    const env = { VOD_API_URL: relay.url, VOD_API_KEY: apiKey, VOD_STATE_DIR: join(dir, "tty-state") };
    // util-linux `script` runs the command on a pseudo-terminal and copies what it draws.
    const command = [process.execPath, cli, "upload", file].map((a) => `'${a}'`).join(" ");
    const run = spawn("script", ["-qefc", command, "/dev/null"], {
      env: { ...process.env, ...env, COLUMNS: "120" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let output = "";
    run.stdout.on("data", (d) => {
      output += d;
    });
    const code = await new Promise<number | null>((resolve) => run.once("close", resolve));
    expect(code, output).toBe(0);
    expect(output).toMatch(/100% \| 19\.\d MiB of 19\.\d MiB \| \d+(\.\d)? MiB\/s \| ETA \d+s/);
    expect(output).toMatch(/uploaded 19\.\d MiB in [\d.]+ s \([\d.]+ MiB\/s\): asset ast_\w+ is uploaded/);
    expect(output).not.toMatch(/^uploaded [\d.]+ MiB of/m);
  }, 120_000);

  it("Ctrl-C stops the upload, says how to resume, and the same command resumes it", async () => {
    const file = join(dir, "interrupted.mp4");
    await makeSizedVideo(file, 25);
    const size = (await stat(file)).size;
    const env = { VOD_API_URL: relay.url, VOD_API_KEY: apiKey, VOD_STATE_DIR: join(dir, "sigint-state") };
    const args = ["upload", file, "--parallel", "1"];
    const before = relay.sent();
    const first = runCli(args, env);
    await eventually("half of the file sent", () => relay.sent() - before >= size / 2, 60_000, 5);
    first.child.kill("SIGINT");
    expect((await first.exit).code).toBe(130);
    expect(first.stderr()).toContain("interrupted; run the same command again to resume");

    const second = runCli(args, env);
    expect((await second.exit).code, second.stderr()).toBe(0);
    expect(second.stderr()).toMatch(/resuming upload upl_\w+: [1-3] of 3 parts/);
    expect(second.stdout()).toMatch(/asset ast_\w+ is uploaded/);
  }, 120_000);

  it("vod play prints a new session's manifest, telemetry URL and token; errors say what is wrong", async () => {
    const auth = { "x-api-key": apiKey };
    const listed = await call(host.url, "/v1/assets?status=ready", { headers: auth });
    const ready: string = listed.body.data[0].id;
    const env = { VOD_API_URL: relay.url, VOD_API_KEY: apiKey };
    const played = runCli(["play", ready, "--ttl", "600"], env);
    expect((await played.exit).code, played.stderr()).toBe(0);
    const manifest = /^manifest: (\S+)$/m.exec(played.stdout())?.[1] ?? "";
    expect(manifest).toMatch(/\/master\.m3u8$/);
    expect((await fetch(manifest)).status).toBe(200);
    expect(played.stdout()).toMatch(/^telemetry: http\S+$/m);
    expect(played.stdout()).toMatch(/^token: v1\.\S+$/m);

    const missing = runCli(["play", "ast_missing"], env);
    expect((await missing.exit).code).toBe(1);
    expect(missing.stderr()).toContain("vod play: not_found");
    const unconfigured = runCli(["play", ready], { VOD_API_URL: "", VOD_API_KEY: "" });
    expect((await unconfigured.exit).code).toBe(78);
    expect(unconfigured.stderr()).toContain("set VOD_API_URL");
    const usage = runCli(["upload"], env);
    expect((await usage.exit).code).toBe(2);
  }, 60_000);
});

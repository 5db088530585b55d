import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { memoryStorage } from "@vod/adapter-memory";
import { createLogger, loadConfig, loggedPath, startHost } from "@vod/host-express";
import { expect, it } from "vitest";

it("keeps playback tokens out of logged paths", () => {
  expect(loggedPath("/v1/play/v1.aaa.bbb.ccc/720p/3.m4s")).toBe("/v1/play/[token]/720p/3.m4s");
  expect(loggedPath("/v1/assets/ast_1")).toBe("/v1/assets/ast_1");
});

it("writes no credential of a request into the log", async () => {
  let lines = "";
  const sinkStream = new Writable({
    write(chunk, _enc, done) {
      lines += chunk;
      done();
    },
  });
  const dir = await mkdtemp(join(tmpdir(), "vod-log-"));
  const host = await startHost(loadConfig({ PORT: "0", VOD_HOST: "127.0.0.1", VOD_DATA_DIR: dir }), {
    storage: memoryStorage(),
    logger: createLogger("info", sinkStream),
  });
  try {
    const password = "secret horse battery";
    const signup = await fetch(`${host.url}/v1/auth/signup`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: `log-${Date.now()}@example.com`, password }),
    });
    const { access_token, refresh_token } = (await signup.json()) as {
      access_token: string;
      refresh_token: string;
    };
    await fetch(`${host.url}/v1/auth/me`, { headers: { authorization: `Bearer ${access_token}` } });
    await fetch(`${host.url}/v1/play/v1.forged.token.here/master.m3u8`);
    await fetch(`${host.url}/v1/assets?cursor=${refresh_token}`, {
      headers: { "x-api-key": "vod_AAAAAAAA_secret" },
    });
    await new Promise((r) => setTimeout(r, 50));
    expect(lines).toContain('"path":"/v1/auth/signup"');
    expect(lines).toContain('"path":"/v1/play/[token]/master.m3u8"');
    for (const secret of [
      password,
      access_token,
      refresh_token,
      "v1.forged.token.here",
      "vod_AAAAAAAA_secret",
    ])
      expect(lines).not.toContain(secret);
  } finally {
    await host.close(1_000);
    await rm(dir, { recursive: true, force: true });
  }
});

it("warns at start, naming the build and how to install ffmpeg, when only the npm-shipped ffmpeg is found", async () => {
  const startLog = async (toolSearchPath: string) => {
    let lines = "";
    const sinkStream = new Writable({
      write(chunk, _enc, done) {
        lines += chunk;
        done();
      },
    });
    const dir = await mkdtemp(join(tmpdir(), "vod-log-"));
    const host = await startHost(loadConfig({ PORT: "0", VOD_HOST: "127.0.0.1", VOD_DATA_DIR: dir }), {
      storage: memoryStorage(),
      logger: createLogger("info", sinkStream),
      toolSearchPath,
    });
    await host.close(1_000);
    await rm(dir, { recursive: true, force: true });
    return lines
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { level: number; msg: string; ffmpeg?: string });
  };

  // No ffmpeg on the search path: the installer packages' binaries are what is left.
  const fallback = await startLog("");
  const warning = fallback.findIndex((l) => l.level === 40 && l.msg.includes("untrusted uploads"));
  expect(warning).toBeGreaterThanOrEqual(0);
  expect(fallback[warning]?.msg).toMatch(
    /^ffmpeg 20181210-\w+ and ffprobe \w+-\w+ are the builds shipped by an npm package/,
  );
  expect(fallback[warning]?.msg).toContain("apt-get install ffmpeg");
  expect(fallback[warning]?.msg).toContain("brew install ffmpeg");
  expect(fallback[warning]?.ffmpeg).toMatch(/node_modules\/@ffmpeg-installer\//);
  // Given with the start, before the host says it listens.
  expect(warning).toBeLessThan(fallback.findIndex((l) => l.msg === "vod host listening"));

  // A system ffmpeg and ffprobe on the search path (stand-ins: only found, never run here).
  const bin = await mkdtemp(join(tmpdir(), "vod-bin-"));
  try {
    for (const tool of ["ffmpeg", "ffprobe"])
      await writeFile(join(bin, tool), "#!/bin/sh\n", { mode: 0o755 });
    const system = await startLog(bin);
    expect(system.some((l) => l.msg === "vod host listening")).toBe(true);
    expect(system.filter((l) => l.level >= 40)).toEqual([]);
  } finally {
    await rm(bin, { recursive: true, force: true });
  }
});

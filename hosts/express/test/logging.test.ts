import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { memoryJobQueue, memoryObjectStore, memoryStorage } from "@vod/adapter-memory";
import { temporarySchemas } from "@vod/adapter-postgres/testing";
import { suiteName, testServices } from "@vod/contract-tests";
import { createLogger, loadConfig, startHost } from "@vod/host-express";
import { loggedPath } from "@vod/http";
import { afterAll, describe, expect, it } from "vitest";
import { makeVideo, settledAsset, signUp, uploadAsset } from "./support.js";

/** A logger whose lines the test reads: as written (`text`) and parsed (`lines`). */
const capturedLog = () => {
  let text = "";
  const sink = new Writable({
    write(chunk, _enc, done) {
      text += chunk;
      done();
    },
  });
  return {
    logger: createLogger("info", sink),
    text: () => text,
    lines: <L = Record<string, unknown>>() =>
      text
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => JSON.parse(line) as L),
  };
};

/** POSTs JSON bodies to the host at `url`. */
const postJson = (url: string) => (path: string, body: unknown) =>
  fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

it("keeps playback tokens out of logged paths", () => {
  expect(loggedPath("/v1/play/v1.aaa.bbb.ccc/720p/3.m4s")).toBe("/v1/play/[token]/720p/3.m4s");
  expect(loggedPath("/v1/assets/ast_1")).toBe("/v1/assets/ast_1");
});

it("writes no credential of a request into the log", async () => {
  const log = capturedLog();
  const dir = await mkdtemp(join(tmpdir(), "vod-log-"));
  const host = await startHost(loadConfig({ PORT: "0", VOD_HOST: "127.0.0.1", VOD_DATA_DIR: dir }), {
    storage: memoryStorage(),
    logger: log.logger,
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
    expect(log.text()).toContain('"path":"/v1/auth/signup"');
    expect(log.text()).toContain('"path":"/v1/play/[token]/master.m3u8"');
    for (const secret of [
      password,
      access_token,
      refresh_token,
      "v1.forged.token.here",
      "vod_AAAAAAAA_secret",
    ])
      expect(log.text()).not.toContain(secret);
  } finally {
    await host.close(1_000);
    await rm(dir, { recursive: true, force: true });
  }
});

it("warns at start, naming the build and how to install ffmpeg, when only the npm-shipped ffmpeg is found", async () => {
  const startLog = async (toolSearchPath: string) => {
    const log = capturedLog();
    const dir = await mkdtemp(join(tmpdir(), "vod-log-"));
    const host = await startHost(loadConfig({ PORT: "0", VOD_HOST: "127.0.0.1", VOD_DATA_DIR: dir }), {
      storage: memoryStorage(),
      logger: log.logger,
      toolSearchPath,
    });
    await host.close(1_000);
    await rm(dir, { recursive: true, force: true });
    return log.lines<{ level: number; msg: string; ffmpeg?: string }>();
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
  expect(warning).toBeLessThan(fallback.findIndex((l) => l.msg.startsWith("listening on ")));

  // A system ffmpeg and ffprobe on the search path (stand-ins: only found, never run here).
  const bin = await mkdtemp(join(tmpdir(), "vod-bin-"));
  try {
    for (const tool of ["ffmpeg", "ffprobe"])
      await writeFile(join(bin, tool), "#!/bin/sh\n", { mode: 0o755 });
    const system = await startLog(bin);
    expect(system.some((l) => l.msg.startsWith("listening on "))).toBe(true);
    expect(system.filter((l) => l.level >= 40)).toEqual([]);
  } finally {
    await rm(bin, { recursive: true, force: true });
  }
});

it("writes account mail to the log at info when no VOD_SMTP_URL is set; its link works", async () => {
  const log = capturedLog();
  const dir = await mkdtemp(join(tmpdir(), "vod-log-"));
  const storage = memoryStorage();
  const host = await startHost(
    loadConfig({ PORT: "0", VOD_HOST: "127.0.0.1", VOD_DATA_DIR: dir, VOD_WORKER_CONCURRENCY: "1" }),
    { storage, jobQueue: memoryJobQueue(storage), logger: log.logger },
  );
  try {
    const email = `log-mail-${Date.now()}@example.com`;
    const post = postJson(host.url);
    expect((await post("/v1/auth/signup", { email, password: "secret horse battery" })).status).toBe(201);
    expect((await post("/v1/auth/password/forgot", { email })).status).toBe(202);
    const end = Date.now() + 10_000;
    let mail: Record<string, unknown> | undefined;
    while (!mail && Date.now() < end) {
      mail = log.lines().find((l) => l.to === email);
      if (!mail) await new Promise((r) => setTimeout(r, 20));
    }
    expect(mail).toMatchObject({ level: 30, subject: "Reset your password" });
    const token = /\/reset-password#token=([A-Za-z0-9]{43})/.exec(String(mail?.text))?.[1];
    expect(token).toBeDefined();
    const reset = await post("/v1/auth/password/reset", { token, new_password: "another horse battery" });
    expect(reset.status).toBe(204);
    expect(log.text()).not.toContain("another horse battery");
  } finally {
    await host.close(1_000);
    await rm(dir, { recursive: true, force: true });
  }
});

// A server deployment's logs are shared and kept: no link goes there, and without VOD_SMTP_URL
// the mail fails where an operator sees it.
const { databaseUrl } = testServices();
describe.skipIf(databaseUrl === null)(
  suiteName(
    "account mail on a server database without VOD_SMTP_URL",
    databaseUrl !== null,
    "VOD_TEST_DATABASE_URL",
  ),
  () => {
    const schemas = temporarySchemas(databaseUrl ?? "", "vod_logmail");
    afterAll(() => schemas.dropAll());

    it("sends nothing, warns at start, and logs the failed mail at error with no link in any line", async () => {
      const log = capturedLog();
      const dir = await mkdtemp(join(tmpdir(), "vod-log-"));
      const host = await startHost(
        loadConfig({
          PORT: "0",
          VOD_HOST: "127.0.0.1",
          VOD_DATA_DIR: dir,
          VOD_DATABASE_URL: databaseUrl ?? "",
          VOD_DATABASE_SCHEMA: schemas.fresh(),
          VOD_WORKER_CONCURRENCY: "1",
          VOD_JOB_MAX_ATTEMPTS: "1",
        }),
        { logger: log.logger },
      );
      try {
        expect(log.lines().find((l) => String(l.msg).includes("VOD_SMTP_URL is not set"))).toMatchObject({
          level: 40,
        });
        const email = `log-nomail-${Date.now()}@example.com`;
        const post = postJson(host.url);
        expect((await post("/v1/auth/signup", { email, password: "secret horse battery" })).status).toBe(201);
        expect((await post("/v1/auth/password/forgot", { email })).status).toBe(202);
        const end = Date.now() + 15_000;
        const failed = () => log.lines().find((l) => l.msg === "account mail not sent; no attempt left");
        while (!failed() && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
        expect(failed()).toMatchObject({
          level: 50,
          purpose: "reset_password",
        });
        expect(log.text()).not.toMatch(/#token=/);
      } finally {
        await host.close(1_000);
        await rm(dir, { recursive: true, force: true });
      }
    });
  },
);

it("logs a warn's error by type, message and code, without its stack; an error keeps its stack", () => {
  const log = capturedLog();
  const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:6379"), { code: "ECONNREFUSED" });
  log.logger.warn({ err: refused, attempt: 2 }, "redis unreachable");
  log.logger.error({ err: new Error("a defect") }, "stop failed");
  const [warn, error] = log.lines<{ level: number; attempt?: number; err: Record<string, unknown> }>();
  expect(warn).toMatchObject({ level: 40, attempt: 2, msg: "redis unreachable" });
  expect(warn?.err).toEqual({
    type: "Error",
    message: "connect ECONNREFUSED 127.0.0.1:6379",
    code: "ECONNREFUSED",
  });
  expect(error?.level).toBe(50);
  expect(error?.err.stack).toMatch(/^Error: a defect\n\s+at /);
});

it("writes pino-pretty's readable lines when asked, and on a terminal by default; JSON lines into a pipe", async () => {
  let text = "";
  const sink = new Writable({
    write(chunk, _enc, done) {
      text += chunk;
      done();
    },
  });
  createLogger("info", sink, "pretty").info({ asset_id: "ast_1" }, "processing done");
  expect(text).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: processing done\n {4}asset_id: "ast_1"\n$/);

  // `vod serve` under a pseudo-terminal (util-linux's script), then into a pipe.
  const serveFor = async (command: string, args: ReadonlyArray<string>) => {
    const child = spawn(command, [...args], {
      env: { ...process.env, VOD_STORAGE: "memory", PORT: "0", VOD_HOST: "127.0.0.1", VOD_LOG_LEVEL: "info" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d) => {
      output += d;
    });
    const deadline = Date.now() + 30_000;
    while (!output.includes("listening on") && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
    return output;
  };
  const cli = fileURLToPath(new URL("../dist/bin/vod.js", import.meta.url));
  const terminal = await serveFor("script", ["-qec", `${process.execPath} ${cli} serve`, "/dev/null"]);
  // Coloured: the level in green, the message in cyan.
  const ESC = "\u001b";
  expect(terminal).toContain(`${ESC}[32mINFO${ESC}[39m: ${ESC}[36mlistening on 127.0.0.1:`);
  expect(terminal).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] /m);
  const piped = await serveFor(process.execPath, [cli, "serve"]);
  const listening = piped
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as { msg: string; level: number })
    .find((l) => l.msg.startsWith("listening on"));
  expect(listening?.level).toBe(30);
}, 60_000);

it("logs each stage of a processing job with its time, at info, between started and done", async () => {
  const log = capturedLog();
  const dir = await mkdtemp(join(tmpdir(), "vod-log-"));
  const storage = memoryStorage();
  // Objects in memory: the worker copies the source from the store (the fetch stage).
  const host = await startHost(
    loadConfig({ PORT: "0", VOD_HOST: "127.0.0.1", VOD_DATA_DIR: dir, VOD_WORKER_CONCURRENCY: "1" }),
    { storage, jobQueue: memoryJobQueue(storage), objectStore: memoryObjectStore(), logger: log.logger },
  );
  try {
    const file = join(dir, "src.mp4");
    await makeVideo(file, { width: 640, height: 360, seconds: 2 });
    const auth = await signUp(host.url, "stages");
    const { assetId } = await uploadAsset(host.url, auth, await readFile(file));
    const asset = await settledAsset(host.url, auth, assetId);
    expect(asset.status).toBe("ready");
    type Line = {
      level: number;
      msg: string;
      asset_id?: string;
      stage?: string;
      ms?: number;
      renditions?: string[];
    };
    const job = log.lines<Line>().filter((l) => l.asset_id === assetId);
    const stages = job.filter((l) => l.stage !== undefined);
    for (const line of stages) {
      expect(line.level).toBe(30);
      expect(line.ms).toBeGreaterThanOrEqual(0);
      expect(line.msg).toBe(`processing ${line.stage} took ${line.ms} ms`);
    }
    // 360p is the first unit (the asset is ready with it), 240p the second.
    // The poster is made while the first unit encodes: it ends before that unit's upload.
    const poster = stages.findIndex((l) => l.stage === "poster");
    expect(stages.filter((l) => l.stage === "poster")).toHaveLength(1);
    expect(poster).toBeLessThan(stages.findIndex((l) => l.stage === "upload"));
    const sequence = stages.filter((l) => l.stage !== "poster");
    expect(sequence.map((l) => [l.stage, l.renditions?.join(",")])).toEqual([
      ["fetch", undefined],
      ["probe", undefined],
      ["fetch", undefined],
      ["encode", "360p"],
      ["package", "360p"],
      ["upload", "360p"],
      ["fetch", undefined],
      ["encode", "240p"],
      ["package", "240p"],
      ["upload", "240p"],
    ]);
    const messages = job.map((l) => l.msg);
    expect(messages.indexOf("processing started")).toBeLessThan(messages.indexOf(stages[0]?.msg ?? ""));
    expect(messages.indexOf("processing done")).toBeGreaterThan(
      messages.lastIndexOf(stages.at(-1)?.msg ?? ""),
    );
  } finally {
    await host.close(1_000);
    await rm(dir, { recursive: true, force: true });
  }
}, 120_000);

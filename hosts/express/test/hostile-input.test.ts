import { randomBytes } from "node:crypto";
import { get } from "node:http";
import { join } from "node:path";
import { Writable } from "node:stream";
import { ffmpegMediaProcessor } from "@vod/adapter-ffmpeg";
import { filesystemObjectStore } from "@vod/adapter-filesystem";
import { memoryStorage } from "@vod/adapter-memory";
import { sendRawBytes } from "@vod/contract-tests";
import { AssetId, TenantId } from "@vod/core";
import { createLogger, type RunningHost } from "@vod/host-express";
import { Effect, Option } from "effect";
import { beforeAll, describe, expect, it } from "vitest";
import { suiteScratch } from "./suites.js";
import { call, settledAsset, signUp, uploadAsset } from "./support.js";

/** What no error body may show: a stack, an object key, a file path, an errno, a NUL. */
const INTERNALS =
  /\bat .+\.(ts|js):\d+|_tag|stack|renditions\/|objects\/|\/tmp\/|ENAMETOOLONG|ENOENT|\\u0000/;

interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [key: string]: unknown;
}

/**
 * A host on memory storage, the filesystem object store and a worker with ffmpeg, logging at
 * debug into memory: what players, sign-ins and jobs leave in the log is read back line by line.
 */
describe("hostile input and what the log says of it", () => {
  const scratch = suiteScratch("vod-hostile-");
  let dir: string;
  let host: RunningHost;
  let storage: ReturnType<typeof memoryStorage>;
  let objects: ReturnType<typeof filesystemObjectStore>;
  let auth: Record<string, string>;
  let token: string;
  let text = "";
  /** Lines logged while `run` ran, once the host has had a moment to finish logging. */
  const logged = async (run: () => Promise<void>, settle: (l: LogLine[]) => boolean) => {
    const from = text.length;
    await run();
    const mine = () =>
      text
        .slice(from)
        .split("\n")
        .filter((l) => l.length > 0)
        .map((l) => JSON.parse(l) as LogLine);
    for (let i = 0; i < 200 && !settle(mine()); i++) await new Promise((r) => setTimeout(r, 50));
    return mine();
  };

  beforeAll(async () => {
    dir = await scratch.dir();
    storage = memoryStorage();
    objects = filesystemObjectStore({ root: join(dir, "objects") });
    const sink = new Writable({
      write(chunk, _enc, done) {
        text += chunk;
        done();
      },
    });
    host = await scratch.memoryHost(
      { VOD_DATA_DIR: dir, VOD_WORKER_CONCURRENCY: "1" },
      {
        storage,
        objectStore: objects,
        mediaProcessor: ffmpegMediaProcessor(),
        logger: createLogger("debug", sink),
      },
      { retryDelayMs: 100 },
    );
    auth = await signUp(host.url, "hostile");
    // A ready asset whose renditions are written straight into the object store: the delivery
    // path is under test here, not the transcoding.
    const created = await call(host.url, "/v1/assets", { body: { title: "ready" }, headers: auth });
    const tenantId: string = (await call(host.url, "/v1/auth/me", { headers: auth })).body.tenant.id;
    const assetId: string = created.body.asset.id;
    const stored = await Effect.runPromise(storage.assets.get(TenantId(tenantId), AssetId(assetId)));
    if (Option.isNone(stored)) throw new Error("the created asset is not stored");
    await Effect.runPromise(storage.assets.update({ ...stored.value, status: "ready" }));
    const prefix = `renditions/${tenantId}/${assetId}/`;
    await Effect.runPromise(
      objects.put(`${prefix}master.m3u8`, Buffer.from("#EXTM3U\n"), "application/vnd.apple.mpegurl"),
    );
    // Large enough that a player hanging up after the first chunk leaves most of it unsent.
    await Effect.runPromise(objects.put(`${prefix}360p/1.m4s`, randomBytes(16 * 1024 * 1024), "video/mp4"));
    const session = await call(host.url, "/v1/playback/sessions", {
      body: { asset_id: assetId },
      headers: auth,
    });
    if (session.status !== 201) throw new Error(`session: ${session.status} ${JSON.stringify(session.body)}`);
    token = session.body.token;
  }, 60_000);

  it("serves an absolute-form request target as its path, and answers one that is no URL 400 and stays up", async () => {
    const raw = (target: string) =>
      sendRawBytes(
        host.url,
        Buffer.from(
          `GET ${target} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: ${auth.authorization}\r\nconnection: close\r\n\r\n`,
          "latin1",
        ),
      );
    const served = await raw("http://127.0.0.1/v1/auth/me");
    expect(served.status).toBe(200);
    expect(JSON.parse(served.text)).toHaveProperty("user.email");
    // node's URL parser refuses these: the catalog's route, the host's own, and no route at all.
    for (const target of ["http://[::1/v1/auth/me", "http://[::1/healthz", "http://[::1/nowhere"]) {
      const refused = await raw(target);
      expect(refused.status, target).toBe(400);
      expect(refused.headers["content-type"]).toMatch(/^application\/json/);
      expect(refused.headers["x-request-id"]).toBeDefined();
      expect(JSON.parse(refused.text)).toEqual({
        error: "invalid_request",
        code: "invalid_request",
        message: "the request target is not a valid URL",
        details: { fields: [{ path: [], message: "malformed URL" }] },
      });
    }
    expect((await call(host.url, "/v1/auth/me", { headers: auth })).status).toBe(200);
  });

  it("answers 404 not_found for a file name that is not one of the asset's files, showing no key", async () => {
    const play = (file: string) => fetch(`${host.url}/v1/play/${token}/${file}`);
    expect((await play("master.m3u8")).status).toBe(200);
    for (const file of [
      "master.m3u8%00.ts",
      "%00",
      "x".repeat(5_000),
      `360p/${"y".repeat(5_000)}.m4s`,
      "360p/1.m4s%00",
      "a/b/c/d.m4s",
      "360p/..%2f..%2fmaster.m3u8",
      "master.m3u8.exe",
    ]) {
      const reply = await play(file);
      const body = await reply.text();
      expect({ file: file.slice(0, 40), status: reply.status }).toEqual({
        file: file.slice(0, 40),
        status: 404,
      });
      expect(JSON.parse(body)).toStrictEqual({
        error: "not_found",
        code: "not_found",
        message: expect.any(String),
      });
      expect(body).not.toMatch(INTERNALS);
    }
  });

  it("logs a player that hangs up mid-segment at debug, without a stack", async () => {
    const mine = await logged(
      () =>
        new Promise<void>((resolve, reject) => {
          const req = get(`${host.url}/v1/play/${token}/360p/1.m4s`, (res) => {
            expect(res.statusCode).toBe(200);
            res.once("data", () => {
              req.destroy();
              resolve();
            });
          });
          req.on("error", (e: NodeJS.ErrnoException) => {
            if (e.code !== "ECONNRESET") reject(e);
          });
        }),
      (l) => l.some((line) => line.msg === "client went away"),
    );
    const gone = mine.filter((l) => l.msg === "client went away");
    expect(gone).toHaveLength(1);
    expect(gone[0]).toMatchObject({ level: 20, path: "/v1/play/[token]/360p/1.m4s" });
    expect(JSON.stringify(gone[0])).not.toMatch(/stack|\bat .+\.(ts|js):\d+/);
    expect(mine.filter((l) => l.level >= 40)).toEqual([]);
  });

  it("logs an unconfigured Google sign-in once, at warn, without a stack, and answers 503 each time", async () => {
    const mine = await logged(
      async () => {
        for (let i = 0; i < 3; i++) {
          const reply = await call(host.url, "/v1/auth/google", { body: { id_token: "eyJ.x.y" } });
          expect(reply.status).toBe(503);
          expect(reply.body).toStrictEqual({
            error: "playback_unavailable",
            code: "playback_unavailable",
            message: expect.any(String),
          });
        }
      },
      (l) => l.filter((line) => line.msg === "request").length >= 3,
    );
    const warned = mine.filter((l) => l.level >= 40);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 40, code: "playback_unavailable" });
    expect(String(warned[0]?.msg)).toMatch(/Google sign-in is not configured/);
    expect(JSON.stringify(warned[0])).not.toMatch(/stack|\bat .+\.(ts|js):\d+/);
  });

  it("names a job's outcome: processing failed with its failure_code, never processing done", async () => {
    let assetId = "";
    const mine = await logged(
      async () => {
        ({ assetId } = await uploadAsset(host.url, auth, randomBytes(4096), "not a video"));
        const asset = await settledAsset(host.url, auth, assetId);
        expect(asset).toMatchObject({ status: "failed", failure_code: "invalid_media" });
      },
      (l) => l.some((line) => line.asset_id === assetId && line.msg === "processing failed"),
    );
    const outcomes = mine.filter((l) => l.asset_id === assetId && /^processing (done|failed)$/.test(l.msg));
    expect(outcomes).toEqual([
      expect.objectContaining({ msg: "processing failed", failure_code: "invalid_media" }),
    ]);
  });
});

import { createHash } from "node:crypto";
import { appendFile, copyFile, mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, type UploadProgress, VodError } from "@vod/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, makeVideo, signUp, startMemoryHost } from "../../../hosts/express/test/support.js";

/** The PUTs of part bytes and the API calls a client made, as its fetch saw them. */
interface Seen {
  readonly method: string;
  readonly path: string;
  readonly status?: number;
}

describe("@vod/client against the host (memory storage)", () => {
  let dir: string;
  let host: Awaited<ReturnType<typeof startMemoryHost>>;
  let apiKey: string;
  let video: string;
  let size: number;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "vod-client-"));
    host = await startMemoryHost({ VOD_DATA_DIR: dir, VOD_WORKER_CONCURRENCY: "1", VOD_LOG_LEVEL: "warn" });
    const auth = await signUp(host.url, "client");
    const key = await call(host.url, "/v1/api-keys", {
      headers: auth,
      body: { name: "sdk", scopes: ["write"] },
    });
    apiKey = key.body.key;
    // Several parts of 8 MiB: 20 s of a 1080p test pattern.
    video = join(dir, "source.mp4");
    await makeVideo(video, { width: 1920, height: 1080, seconds: 20, audio: false });
    size = (await stat(video)).size;
  }, 120_000);

  afterAll(async () => {
    await host?.close(1_000);
    await rm(dir, { recursive: true, force: true });
  });

  /** A client whose fetch records what it sends; `fault` may answer a request instead of the network. */
  const clientWith = (fault?: (url: URL, init: RequestInit | undefined) => Promise<Response> | undefined) => {
    const seen: Seen[] = [];
    const client = createClient({
      baseUrl: host.url,
      apiKey,
      retry: { baseDelayMs: 10 },
      fetch: async (input, init) => {
        const url = new URL(input instanceof Request ? input.url : String(input));
        const faulted = fault?.(url, init);
        const res = await (faulted ?? fetch(input, init));
        seen.push({ method: init?.method ?? "GET", path: url.pathname, status: res.status });
        return res;
      },
    });
    return { client, seen };
  };
  const partPuts = (seen: ReadonlyArray<Seen>) => seen.filter((s) => s.method === "PUT");

  it("uploads a file path in parallel parts (over node:http), reporting progress, and completes", async () => {
    const client = createClient({ baseUrl: host.url, apiKey });
    const asset = await client.assets.create({ title: "parallel" });
    const progress: UploadProgress[] = [];
    const done = await client.uploads.upload({
      assetId: asset.id,
      file: video,
      parallel: 3,
      onProgress: (p) => progress.push(p),
    });
    expect(done.upload.status).toBe("completed");
    expect(done.asset.status).toBe("uploaded");
    expect(done.asset.origin_size_bytes).toBe(size);
    const partCount = Math.ceil(size / (8 * 1024 * 1024));
    expect(done.upload.part_count).toBe(partCount);
    expect(progress.map((p) => p.partsDone)).toEqual(Array.from({ length: partCount + 1 }, (_, i) => i));
    expect(progress.at(-1)).toMatchObject({ uploadedBytes: size, totalBytes: size, resumedBytes: 0 });
    // The stored bytes are the file's.
    expect(done.asset.checksum_sha256).toBe(
      createHash("sha256")
        .update(await readFile(video))
        .digest("hex"),
    );
  });

  it("the same through a fetch of the caller's: every part PUT goes through it", async () => {
    const { client, seen } = clientWith();
    const asset = await client.assets.create({ title: "own fetch" });
    const done = await client.uploads.upload({ assetId: asset.id, file: video, parallel: 2 });
    expect(partPuts(seen).map((p) => p.status)).toEqual(Array(done.upload.part_count).fill(200));
    expect(done.asset.origin_size_bytes).toBe(size);
  });

  it("fails when the file changes during the upload; the asset stays pending", async () => {
    const copy = join(dir, "changing.mp4");
    await copyFile(video, copy);
    const client = createClient({ baseUrl: host.url, apiKey });
    const asset = await client.assets.create({ title: "changing" });
    const upload = client.uploads.upload({
      assetId: asset.id,
      file: copy,
      parallel: 1,
      onProgress: (p) => {
        if (p.partsDone === 1) void appendFile(copy, "more bytes");
      },
    });
    await expect(upload).rejects.toThrow("changed during the upload");
    expect((await client.assets.get(asset.id)).status).toBe("pending");
  });

  it("uploads a Blob, as a browser hands over a File", async () => {
    const { client } = clientWith();
    const asset = await client.assets.create({ title: "blob" });
    const blob = new Blob([await readFile(video)], { type: "video/mp4" });
    const done = await client.uploads.upload({ assetId: asset.id, file: blob });
    expect(done.asset.origin_size_bytes).toBe(size);
  });

  it("a part URL refused (as an expired one is) is replaced by a fresh one from GET /v1/uploads/{id}", async () => {
    const refused = new Set<string>();
    const { client, seen } = clientWith((url, init) => {
      // The first PUT of each part goes out with a signature the media app refuses: 401.
      if (init?.method !== "PUT" || refused.has(url.pathname)) return undefined;
      refused.add(url.pathname);
      url.searchParams.set("s", "expired");
      return fetch(url, init);
    });
    const asset = await client.assets.create({ title: "refreshed" });
    const done = await client.uploads.upload({ assetId: asset.id, file: video, parallel: 1 });
    expect(done.asset.status).toBe("uploaded");
    const puts = partPuts(seen);
    expect(puts.filter((p) => p.status === 401)).toHaveLength(done.upload.part_count);
    expect(puts.filter((p) => p.status === 200)).toHaveLength(done.upload.part_count);
    const resumes = seen.filter((s) => s.method === "GET" && s.path === `/v1/uploads/${done.upload.id}`);
    expect(resumes).toHaveLength(done.upload.part_count);
  });

  it("retries a part after a dropped connection, with backoff", async () => {
    let dropped = 0;
    const { client, seen } = clientWith((_url, init) => {
      if (init?.method !== "PUT" || dropped >= 2) return undefined;
      dropped++;
      return Promise.reject(new TypeError("fetch failed: socket hang up"));
    });
    const asset = await client.assets.create({ title: "retried" });
    const done = await client.uploads.upload({ assetId: asset.id, file: video });
    expect(dropped).toBe(2);
    expect(done.asset.origin_size_bytes).toBe(size);
    expect(partPuts(seen).filter((p) => p.status === 200)).toHaveLength(done.upload.part_count);
  });

  it("resumes an interrupted upload from its id: only the missing parts are sent", async () => {
    const first = clientWith();
    const asset = await first.client.assets.create({ title: "resumed" });
    const stop = new AbortController();
    let uploadId: string | undefined;
    const interrupted = first.client.uploads.upload({
      assetId: asset.id,
      file: video,
      parallel: 1,
      signal: stop.signal,
      onSession: (s) => {
        uploadId = s.id;
      },
      onProgress: (p) => {
        if (p.partsDone === 1) stop.abort(new Error("user stopped"));
      },
    });
    await expect(interrupted).rejects.toThrow("user stopped");
    expect(uploadId).toBeDefined();
    const storedFirst = partPuts(first.seen).filter((p) => p.status === 200).length;
    expect(storedFirst).toBe(1);

    const second = clientWith();
    const progress: UploadProgress[] = [];
    const done = await second.client.uploads.upload({
      assetId: asset.id,
      file: video,
      uploadId,
      onProgress: (p) => progress.push(p),
    });
    expect(done.upload.id).toBe(uploadId);
    expect(done.asset.origin_size_bytes).toBe(size);
    expect(partPuts(second.seen)).toHaveLength(done.upload.part_count - 1);
    expect(progress[0]).toMatchObject({ partsDone: 1, resumedBytes: 8 * 1024 * 1024 });
    // Resumed again once completed: nothing is sent, the completed upload is answered.
    const third = clientWith();
    const again = await third.client.uploads.upload({ assetId: asset.id, file: video, uploadId });
    expect(again.upload.status).toBe("completed");
    expect(partPuts(third.seen)).toHaveLength(0);
  });

  it("fails with VodError carrying the status, code and details of the spec's error body", async () => {
    const { client } = clientWith();
    const missing = await client.assets.get("ast_missing").catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(VodError);
    expect(missing).toMatchObject({ status: 404, code: "not_found" });
    const invalid = await client.assets.create({ title: "x".repeat(201) }).catch((e: unknown) => e);
    expect(invalid).toMatchObject({ status: 400, code: "invalid_request" });
    expect((invalid as VodError).details).toMatchObject({
      fields: [expect.objectContaining({ path: ["title"] })],
    });
    const unauthorized = await createClient({ baseUrl: host.url, apiKey: "vod_nope" })
      .assets.list()
      [Symbol.asyncIterator]()
      .next()
      .catch((e: unknown) => e);
    expect(unauthorized).toMatchObject({ status: 401, code: "unauthorized" });
  });

  it("updates, lists by status with the iterator, and deletes", async () => {
    const { client } = clientWith();
    const asset = await client.assets.create({ title: "to edit" });
    expect((await client.assets.update(asset.id, { title: "edited" })).title).toBe("edited");
    const pending: string[] = [];
    for await (const a of client.assets.list({ status: "pending", limit: 1 })) pending.push(a.id);
    expect(pending).toContain(asset.id);
    await client.assets.delete(asset.id);
    const gone = await client.assets.get(asset.id).catch((e: unknown) => e);
    expect(gone).toMatchObject({ status: 404 });
  });
});

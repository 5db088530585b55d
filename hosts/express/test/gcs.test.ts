import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { temporarySchemas } from "@vod/adapter-postgres/testing";
import { startWebhookReceiver, type WebhookReceiver } from "@vod/contract-tests";
import { createGcsTestServer, type GcsTestServer } from "@vod/test-services";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeWith } from "./suites.js";
import { call, freePort, makeVideo, settledAsset, signUp, startServe, stop, uploadAsset } from "./support.js";

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

const playbackSession = async (url: string, auth: Record<string, string>, assetId: string) => {
  const session = await call(url, "/v1/playback/sessions", { body: { asset_id: assetId }, headers: auth });
  expect(session.status).toBe(201);
  return session.body.urls.manifest as string;
};

/** The first segment a media playlist of the master lists, as a URL under the token's path. */
const firstSegment = async (manifest: string) => {
  const master = await (await fetch(manifest)).text();
  const playlist = new URL(master.split("\n").find((l) => l.endsWith(".m3u8"))!, manifest);
  const media = await fetch(playlist);
  expect(media.status).toBe(200);
  const segment = (await media.text()).split("\n").find((l) => l.endsWith(".m4s"))!;
  return new URL(segment, playlist).toString();
};

// The whole host on a bucket (VOD_OBJECT_STORE=gcs, credentials through ADC's
// GOOGLE_APPLICATION_CREDENTIALS), pointed at the GCS test server: parts go to the bucket,
// the worker reads the source from it and writes the renditions back, the media app serves them.
describe("the host on a GCS bucket", () => {
  let server: GcsTestServer;
  let receiver: WebhookReceiver;
  let dataDir: string;
  let source: Buffer;
  /** The clip followed by a 9 MiB `free` box, which players skip: a source of two 8 MiB parts. */
  let twoParts: Buffer;
  beforeAll(async () => {
    server = await createGcsTestServer();
    receiver = await startWebhookReceiver();
    dataDir = await mkdtemp(join(tmpdir(), "vod-gcs-"));
    const file = join(dataDir, "source.mp4");
    await makeVideo(file, { width: 320, height: 180, seconds: 2, fps: 30 });
    source = await readFile(file);
    const free = Buffer.alloc(9 * 1024 * 1024);
    free.writeUInt32BE(free.byteLength, 0);
    free.write("free", 4, "latin1");
    for (let i = 8; i < free.byteLength; i += 4096) free.writeUInt32BE(i, i);
    twoParts = Buffer.concat([source, free]);
  }, 60_000);
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  const hostEnv = (extra: Record<string, string>) => ({
    VOD_DATA_DIR: dataDir,
    VOD_OBJECT_STORE: "gcs",
    VOD_GCS_BUCKET: server.bucket,
    VOD_GCS_API_ENDPOINT: server.endpoint,
    GOOGLE_APPLICATION_CREDENTIALS: server.credentialsPath,
    VOD_LOG_LEVEL: "info",
    ...extra,
  });

  describe("embedded storage, segments redirected to the bucket", () => {
    let host: Awaited<ReturnType<typeof startServe>>;
    let auth: Record<string, string>;
    let tenantId: string;
    beforeAll(async () => {
      host = await startServe(
        hostEnv({
          VOD_DATA_DIR: join(dataDir, "embedded"),
          VOD_GCS_PREFIX: "embedded/",
          VOD_GCS_DELIVERY: "redirect",
          // Part and redirect URLs signed with the service account's HMAC key.
          VOD_GCS_HMAC_ACCESS_ID: server.hmacKey.accessId,
          VOD_GCS_HMAC_SECRET: server.hmacKey.secret,
          VOD_WEBHOOKS_ALLOW_PRIVATE: "true",
        }),
        await freePort(),
      );
      auth = await signUp(host.url, "gcs");
      tenantId = (await call(host.url, "/v1/auth/me", { headers: auth })).body.tenant.id;
    }, 60_000);
    afterAll(async () => {
      if (host) expect(await stop(host)).toBe(0);
    });

    it("takes a video uploaded to the bucket to ready, renditions in the bucket, segments by redirect", async () => {
      const { assetId } = await uploadAsset(host.url, auth, source, "gcs clip", { sha256: sha256(source) });
      const asset = await settledAsset(host.url, auth, assetId);
      expect(asset).toMatchObject({ status: "ready", source_width: 320, checksum_sha256: sha256(source) });
      const origin = await server.backdoor.read(`embedded/origins/${tenantId}/${assetId}`);
      expect(origin && sha256(origin)).toBe(sha256(source));
      const renditions = await server.backdoor.objects(`embedded/renditions/${tenantId}/${assetId}/`);
      const stored = renditions.map((o) => o.name);
      expect(stored).toContain(`embedded/renditions/${tenantId}/${assetId}/master.m3u8`);
      expect(stored).toContain(`embedded/renditions/${tenantId}/${assetId}/poster.jpg`);
      // Nothing of the upload is left in the bucket but the object it made.
      expect(server.backdoor.uploads().filter((u) => u.name.includes(assetId))).toEqual([]);
      expect(await server.backdoor.objects("embedded/.multipart/")).toEqual([]);

      const manifest = await playbackSession(host.url, auth, assetId);
      const master = await fetch(manifest);
      expect(master.status).toBe(200);
      expect(await master.text()).toContain("#EXTM3U");
      const segment = await firstSegment(manifest);
      const redirect = await fetch(segment, { redirect: "manual" });
      expect(redirect.status).toBe(302);
      expect(redirect.headers.get("cache-control")).toBe("private, no-store");
      const location = redirect.headers.get("location")!;
      expect(location.startsWith(`${server.endpoint}/${server.bucket}/embedded/renditions/`)).toBe(true);
      const name = decodeURIComponent(new URL(location).pathname.slice(`/${server.bucket}/`.length));
      const bytes = new Uint8Array(await (await fetch(location)).arrayBuffer());
      expect(sha256(bytes)).toBe(sha256((await server.backdoor.read(name))!));
      const range = await fetch(segment, { headers: { range: "bytes=0-99" } });
      expect(range.status).toBe(206);
      expect(new Uint8Array(await range.arrayBuffer())).toEqual(bytes.subarray(0, 100));

      // A text track's files are in the bucket beside the renditions; its subtitle segments, byte
      // ranges of one object, come by redirect, the player's Range header kept.
      const added = await call(host.url, `/v1/assets/${assetId}/tracks`, {
        body: {
          type: "text",
          language_code: "en",
          content: "WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nHello\n",
        },
        headers: auth,
      });
      expect(added.status).toBe(201);
      const trackId: string = added.body.track.id;
      const tracks = await server.backdoor.objects(`embedded/text-tracks/${tenantId}/${assetId}/`);
      expect(tracks.map((o) => o.name).sort()).toEqual(
        [`${trackId}-segments.vtt`, `${trackId}.m3u8`, `${trackId}.vtt`].map(
          (n) => `embedded/text-tracks/${tenantId}/${assetId}/${n}`,
        ),
      );
      const base = manifest.replace(/master\.m3u8$/, "");
      expect(await (await fetch(manifest)).text()).toContain(`URI="text/${trackId}.m3u8"`);
      const subtitles = await (await fetch(`${base}text/${trackId}.m3u8`)).text();
      const [, length, offset] = /#EXT-X-BYTERANGE:(\d+)@(\d+)/.exec(subtitles)!;
      const cueRange = `bytes=${offset}-${Number(offset) + Number(length) - 1}`;
      const viaBucket = await fetch(`${base}text/${trackId}-segments.vtt`, { redirect: "manual" });
      expect(viaBucket.status).toBe(302);
      const cues = await fetch(`${base}text/${trackId}-segments.vtt`, { headers: { range: cueRange } });
      expect(cues.status).toBe(206);
      expect(await cues.text()).toBe(
        "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000\n\n00:00:01.000 --> 00:00:02.000\nHello\n",
      );
    }, 120_000);

    it("keeps images in the bucket and answers them by redirect; a DRM asset's are made from its origin there", async () => {
      const clear = (await uploadAsset(host.url, auth, source, "gcs images")).assetId;
      const drm = (await uploadAsset(host.url, auth, source, "gcs images, protected", { drm: true })).assetId;
      for (const assetId of [clear, drm]) {
        expect((await settledAsset(host.url, auth, assetId)).status).toBe("ready");
        const manifest = await playbackSession(host.url, auth, assetId);
        const made = await fetch(manifest.replace(/master\.m3u8$/, "thumbnail.jpg?time=1"), {
          redirect: "manual",
        });
        expect(made.status).toBe(302);
        expect(made.headers.get("cache-control")).toBe("private, no-store");
        const location = new URL(made.headers.get("location") ?? "");
        const name = decodeURIComponent(location.pathname.slice(`/${server.bucket}/`.length));
        expect(name).toBe(
          `embedded/renditions/${tenantId}/${assetId}/images/thumbnail-1000-320x180-preserve.jpg`,
        );
        const bytes = Buffer.from(await (await fetch(location)).arrayBuffer());
        // A JPEG, the one stored in the bucket.
        expect(bytes.subarray(0, 2)).toEqual(Buffer.from([0xff, 0xd8]));
        expect(sha256(bytes)).toBe(sha256((await server.backdoor.read(name))!));
      }
    }, 120_000);

    it("answers the media app's part route 404: parts go to the bucket's own URLs", async () => {
      const e = Math.floor(Date.now() / 1000) + 3600;
      const put = await fetch(`${host.url}/v1/uploads/upl_x/parts/1?t=${tenantId}&e=${e}&s=abc`, {
        method: "PUT",
        body: new Uint8Array(10),
      });
      expect(put.status).toBe(404);
      expect(await put.json()).toMatchObject({ error: "not_found", code: "not_found" });
    });

    it("fails the asset with checksum_mismatch when the bytes differ from the declared sha256", async () => {
      const declared = sha256(new Uint8Array([1, 2, 3]));
      const { assetId } = await uploadAsset(host.url, auth, source, "gcs clip", { sha256: declared });
      const asset = await settledAsset(host.url, auth, assetId);
      expect(asset).toMatchObject({
        status: "failed",
        failure_code: "checksum_mismatch",
        checksum_sha256: declared,
      });
      expect(await server.backdoor.objects(`embedded/renditions/${tenantId}/${assetId}/`)).toEqual([]);
    }, 120_000);

    it("checks each part's declared sha256 while the worker reads the source: right ones reach ready", async () => {
      expect(twoParts.byteLength).toBeGreaterThan(8 * 1024 * 1024);
      const { assetId } = await uploadAsset(host.url, auth, twoParts, "two parts", {
        completeParts: (parts) => parts.map(({ number, bytes }) => ({ number, sha256: sha256(bytes) })),
      });
      expect(await settledAsset(host.url, auth, assetId)).toMatchObject({
        status: "ready",
        failure_code: null,
      });
    }, 120_000);

    it("fails the asset with checksum_mismatch naming the part whose bytes differ from its declared sha256", async () => {
      const path = "/hook/part-sha256";
      const hook = await call(host.url, "/v1/webhooks", {
        headers: auth,
        body: { url: `${receiver.url}${path}`, events: ["asset.failed"] },
      });
      expect(hook.status).toBe(201);
      const { assetId } = await uploadAsset(host.url, auth, twoParts, "two parts", {
        // Part 2 declared with part 1's hash: completion takes it (a bucket cannot hash), the worker not.
        completeParts: (parts) => parts.map(({ number }) => ({ number, sha256: sha256(parts[0]!.bytes) })),
      });
      const asset = await settledAsset(host.url, auth, assetId);
      expect(asset).toMatchObject({ status: "failed", failure_code: "checksum_mismatch" });
      expect(await server.backdoor.objects(`embedded/renditions/${tenantId}/${assetId}/`)).toEqual([]);
      const [delivered] = await receiver.waitFor(path, 1);
      const event = JSON.parse(delivered!.body);
      expect(event).toMatchObject({
        type: "asset.failed",
        data: {
          asset: { id: assetId, status: "failed", failure_code: "checksum_mismatch" },
          failure: { code: "checksum_mismatch", message: expect.stringMatching(/\bpart 2\b/) },
        },
      });
      expect(event.data.failure.message).not.toMatch(/\bpart 1\b/);
      const logged = host
        .output()
        .split("\n")
        .filter((line) => line.includes(assetId) && line.includes('"processing failed"'));
      expect(logged).toHaveLength(1);
      expect(JSON.parse(logged[0]!)).toMatchObject({
        failure_code: "checksum_mismatch",
        reason: expect.stringMatching(/\bpart 2\b/),
      });
    }, 120_000);

    it("answers a 100 GiB upload's start with every part URL, signed with the HMAC key", async () => {
      const asset = await call(host.url, "/v1/assets", { headers: auth, body: { title: "huge" } });
      const started = await call(host.url, "/v1/uploads", {
        headers: auth,
        body: { asset_id: asset.body.asset.id, size_bytes: 107_374_182_400 },
      });
      expect(started.status).toBe(201);
      const { part_count, parts } = started.body.upload;
      expect(part_count).toBe(9310);
      expect(parts.map((p: { number: number }) => p.number)).toEqual(
        Array.from({ length: part_count }, (_, i) => i + 1),
      );
      const url = new URL(parts[part_count - 1].url);
      expect(url.searchParams.get("X-Goog-Algorithm")).toBe("GOOG4-HMAC-SHA256");
      expect(url.searchParams.get("X-Goog-Credential")).toMatch(new RegExp(`^${server.hmacKey.accessId}/`));
      expect(url.searchParams.get("partNumber")).toBe(String(part_count));
    }, 60_000);
  });

  describeWith(["database"], "server storage, segments proxied by the media app", ({ databaseUrl }) => {
    const schemas = temporarySchemas(databaseUrl, "vod_gcs");
    let host: Awaited<ReturnType<typeof startServe>>;
    afterAll(async () => {
      if (host) expect(await stop(host)).toBe(0);
      await schemas.dropAll();
    });

    it("takes a video to ready and streams its segments, ranges included", async () => {
      host = await startServe(
        hostEnv({
          VOD_DATA_DIR: join(dataDir, "server"),
          VOD_DATABASE_URL: databaseUrl,
          VOD_DATABASE_SCHEMA: schemas.fresh(),
          VOD_GCS_PREFIX: "server/",
        }),
        await freePort(),
      );
      const auth = await signUp(host.url, "gcs-server");
      const { assetId } = await uploadAsset(host.url, auth, source, "gcs clip", { sha256: sha256(source) });
      expect(await settledAsset(host.url, auth, assetId)).toMatchObject({ status: "ready" });
      const segment = await firstSegment(await playbackSession(host.url, auth, assetId));
      const whole = await fetch(segment, { redirect: "manual" });
      expect(whole.status).toBe(200);
      const bytes = new Uint8Array(await whole.arrayBuffer());
      expect(bytes.byteLength).toBe(Number(whole.headers.get("content-length")));
      const range = await fetch(segment, { headers: { range: "bytes=10-29" } });
      expect(range.status).toBe(206);
      expect(range.headers.get("content-range")).toBe(`bytes 10-29/${bytes.byteLength}`);
      expect(new Uint8Array(await range.arrayBuffer())).toEqual(bytes.subarray(10, 30));
    }, 120_000);
  });
});

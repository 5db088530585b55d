import { describe, expect, it } from "vitest";
import {
  type CompletedUpload,
  type Credential,
  createApiKey,
  createAsset,
  credentialOptions,
  DAY,
  digestOf,
  type ErrorBody,
  etagOfReply,
  expectError,
  expectInvalidFields,
  expectNoContent,
  expectStatus,
  type Harness,
  KiB,
  type MakeHttpSubject,
  MiB,
  partsOf,
  putPart,
  type Reply,
  type ResumedUpload,
  randomPayload,
  SECOND,
  type StartedUpload,
  sendTo,
  sha256OfBytes,
  sharedSubject,
  signUp,
  startUpload,
  type WireAsset,
  type WireUploadedPart,
} from "./client.js";

/** The smallest part size (DECISIONS "Uploads"): every file here has parts of exactly this. */
const PART_SIZE = 8 * MiB;
/** Three parts: two full ones and a short last one of 1 KiB. */
const FILE_SIZE = 2 * PART_SIZE + KiB;
const LAST_PART_SIZE = KiB;
const MAX_SIZE_BYTES = 107_374_182_400;

/** A draft's fields as completion leaves them: uploaded, with the size and checksum, no source_*. */
const uploadedAsset = (draft: WireAsset, size: number, sha256: string | null): WireAsset => ({
  ...draft,
  status: "uploaded",
  origin_size_bytes: size,
  checksum_sha256: sha256,
  source_width: null,
  source_height: null,
  source_fps: null,
  source_codec: null,
  source_duration_ms: null,
  source_bitrate_kbps: null,
});

const originKey = (tenantId: string, assetId: string) => `origins/${tenantId}/${assetId}`;

/** The number path segment of a part URL, replaced (the signature no longer matches, or the number is out of range). */
const withPartNumber = (url: string, n: string) => {
  const u = new URL(url);
  u.pathname = u.pathname.replace(/\/parts\/\d+$/, `/parts/${n}`);
  return u.toString();
};

/** A part URL with one character of its signature `s` changed. */
const tampered = (url: string) => {
  const u = new URL(url);
  const s = u.searchParams.get("s");
  if (s === null) return `${url}x`; // a store's own signed URL: damage the query instead
  const first = s[0] === "A" ? "B" : "A";
  u.searchParams.set("s", `${first}${s.slice(1)}`);
  return u.toString();
};

/** A bucket's signed part URL (`partNumber` in its query) made out for another part number. */
const withPartNumberParam = (url: string, n: string) => {
  const u = new URL(url);
  u.searchParams.set("partNumber", n);
  return u.toString();
};

/** Part URLs of the object store itself: its refusals are its own 4xx, not the spec's JSON. */
const signsPartUrls = (h: Harness) => h.objectStore?.signsPartUrls === true;
/** A store that hashes at completion checks sha256s there; a bucket leaves it to processing. */
const checksAtCompletion = (h: Harness) => h.objectStore?.checksAtCompletion !== false;
/** The asset's checksum after completion: the bytes' own, or where the store cannot hash, the declared one. */
const checksumAfter = (h: Harness, file: Uint8Array, declared?: string) =>
  checksAtCompletion(h) ? sha256OfBytes(file) : (declared ?? null);
const expectRefusedByStore = (reply: Reply<unknown>) => {
  expect(reply.status).toBeGreaterThanOrEqual(400);
  expect(reply.status).toBeLessThan(500);
  expect(reply.headers.get("etag")).toBeNull();
};

/** Uploads & multipart sessions: start, part PUTs, resume, complete, abort, expiry. */
export const describeUploads = (makeSubject: MakeHttpSubject): void => {
  describe("uploads", () => {
    const subject = sharedSubject(makeSubject);

    /** A fresh account (its own tenant) with a fresh draft asset. */
    const fixture = async (h: Harness) => {
      const account = await signUp(h.api);
      const owner: Credential = { bearer: account.access_token };
      const asset = await createAsset(h.api, owner, { title: "Upload me" });
      return { account, owner, asset, tenantId: account.tenant.id };
    };

    /** A fixture with a started three-part session for its asset and the file to send. */
    const started = async (h: Harness, options: { sha256?: string; file?: Uint8Array } = {}) => {
      const base = await fixture(h);
      const file = options.file ?? randomPayload(FILE_SIZE);
      const upload = await startUpload(h.api, base.owner, {
        asset_id: base.asset.id,
        size_bytes: file.byteLength,
        ...(options.sha256 === undefined ? {} : { sha256: options.sha256 }),
      });
      const parts = partsOf(file, upload.part_size);
      expect(parts.length).toBe(upload.part_count);
      return { ...base, file, upload, parts };
    };

    /** PUTs `bytes` on a part URL, expecting 200, no body and a quoted ETag. */
    const sendPart = async (url: string, bytes: Uint8Array) => {
      const reply = await putPart(url, bytes);
      if (reply.status !== 200) throw new Error(`part PUT answered ${reply.status}: ${reply.text}`);
      expect(reply.text).toBe("");
      return etagOfReply(reply);
    };

    const sendAll = async (
      upload: StartedUpload,
      parts: ReadonlyArray<{ number: number; bytes: Uint8Array }>,
    ) => {
      const etags = new Map<number, { quoted: string; etag: string }>();
      for (const part of parts) {
        const url = upload.parts.find((p) => p.number === part.number)?.url;
        if (url === undefined) throw new Error(`no URL for part ${part.number}`);
        etags.set(part.number, await sendPart(url, part.bytes));
      }
      return etags;
    };

    const resume = (h: Harness, credential: Credential, id: string) =>
      h.api.get<{ upload: ResumedUpload }>(`/v1/uploads/${id}`, credentialOptions(credential));
    const complete = (h: Harness, credential: Credential, id: string, json: unknown = {}) =>
      h.api.post<CompletedUpload>(`/v1/uploads/${id}/complete`, { ...credentialOptions(credential), json });
    const abort = (h: Harness, credential: Credential, id: string) =>
      h.api.del(`/v1/uploads/${id}`, credentialOptions(credential));

    /** The part bodies the object store holds for the upload, by number, as size and hash. */
    const storedParts = async (h: Harness, uploadId: string) =>
      (await h.objects.storedParts(uploadId)).map(({ number, bytes }) => ({ number, ...digestOf(bytes) }));
    const digests = (parts: ReadonlyArray<{ number: number; bytes: Uint8Array }>) =>
      parts.map(({ number, bytes }) => ({ number, ...digestOf(bytes) }));

    const processJobsOf = async (h: Harness, assetId: string) =>
      (await h.backdoor.jobs()).filter(
        (j) => j.name === "process-asset" && (j.data as { asset_id?: unknown } | null)?.asset_id === assetId,
      );

    describe("POST /v1/uploads", () => {
      it("starts a session (201): 8 MiB parts, their count, a 24 h expiry, one URL per part, nothing else", async () => {
        const h = subject();
        const { owner, asset, tenantId } = await fixture(h);
        const reply = await h.api.post<{ upload: StartedUpload }>("/v1/uploads", {
          ...credentialOptions(owner),
          json: { asset_id: asset.id, size_bytes: FILE_SIZE },
        });
        expect(reply.status).toBe(201);
        const now = h.clock.now();
        expect(reply.body).toStrictEqual({
          upload: {
            id: expect.any(String),
            asset_id: asset.id,
            part_size: 8_388_608,
            part_count: 3,
            size_bytes: FILE_SIZE,
            expires_at: now + DAY,
            parts: [1, 2, 3].map((number) => ({ number, url: expect.any(String) })),
          },
        });
        const { upload } = reply.body;
        expect(upload.id.length).toBeGreaterThan(0);
        for (const part of upload.parts) {
          const url = new URL(part.url);
          expect(url.protocol).toMatch(/^https?:$/);
          // A bucket's URL names the object and carries the part number in its query.
          if (signsPartUrls(h)) expect(url.searchParams.get("partNumber")).toBe(String(part.number));
          else expect(url.pathname).toBe(`/v1/uploads/${encodeURIComponent(upload.id)}/parts/${part.number}`);
        }
        expect(new Set(upload.parts.map((p) => p.url)).size).toBe(3);
        expect(await h.backdoor.upload(upload.id)).toMatchObject({
          id: upload.id,
          tenant_id: tenantId,
          asset_id: asset.id,
          status: "created",
          part_size: 8_388_608,
          part_count: 3,
          size_bytes: FILE_SIZE,
          sha256: null,
          created_at: now,
          expires_at: now + DAY,
          completed_at: null,
        });
        expect(await h.objects.storedParts(upload.id)).toEqual([]);
        expect((await h.backdoor.asset(asset.id))?.status).toBe("pending");
      });

      it("sizes parts: at least 8 MiB, a multiple of 1 MiB, at most 10,000 of them", async () => {
        const h = subject();
        const { owner } = await fixture(h);
        const cases = [
          { size: 1, part_size: 8 * MiB, part_count: 1 },
          { size: 8 * MiB, part_size: 8 * MiB, part_count: 1 },
          { size: 8 * MiB + 1, part_size: 8 * MiB, part_count: 2 },
          { size: 80_000 * MiB, part_size: 8 * MiB, part_count: 10_000 },
          { size: 80_000 * MiB + 1, part_size: 9 * MiB, part_count: 8889 },
          { size: MAX_SIZE_BYTES, part_size: 11 * MiB, part_count: 9310 },
        ];
        for (const c of cases) {
          const asset = await createAsset(h.api, owner);
          const upload = await startUpload(h.api, owner, { asset_id: asset.id, size_bytes: c.size });
          expect({ size: c.size, part_size: upload.part_size, part_count: upload.part_count }).toEqual(c);
          expect(upload.parts.map((p) => p.number)).toEqual(
            Array.from({ length: c.part_count }, (_, i) => i + 1),
          );
        }
        // 28,000 part URLs: a bucket signs each (HMAC on the GCS set: RSA would be slow at this count).
      }, 120_000);

      it("refuses size_bytes 0, above 100 GiB or a string, an uppercase sha256, no asset_id (400 naming the field)", async () => {
        const h = subject();
        const { owner, asset } = await fixture(h);
        const post = (json: unknown) => h.api.post("/v1/uploads", { ...credentialOptions(owner), json });
        expectInvalidFields(await post({ asset_id: asset.id, size_bytes: 0 }), [["size_bytes"]]);
        expectInvalidFields(await post({ asset_id: asset.id, size_bytes: MAX_SIZE_BYTES + 1 }), [
          ["size_bytes"],
        ]);
        expectInvalidFields(await post({ asset_id: asset.id, size_bytes: "1024" }), [["size_bytes"]]);
        expectInvalidFields(await post({ asset_id: asset.id, size_bytes: 1.5 }), [["size_bytes"]]);
        expectInvalidFields(
          await post({
            asset_id: asset.id,
            size_bytes: 1024,
            sha256: sha256OfBytes(new Uint8Array()).toUpperCase(),
          }),
          [["sha256"]],
        );
        expectInvalidFields(await post({ size_bytes: 1024 }), [["asset_id"]]);
        // Nothing was started: a valid start still goes through.
        expectStatus(await post({ asset_id: asset.id, size_bytes: 1024 }), 201);
      });

      it("answers 404 for an unknown asset and for another tenant's asset", async () => {
        const h = subject();
        const { owner } = await fixture(h);
        const stranger = await fixture(h);
        const post = (asset_id: string) =>
          h.api.post("/v1/uploads", { ...credentialOptions(owner), json: { asset_id, size_bytes: 1024 } });
        expectError(await post("ast_doesnotexist00000000"), 404, "not_found");
        expectError(await post(stranger.asset.id), 404, "not_found");
        // The stranger's asset is untouched: its owner can start an upload for it.
        await startUpload(h.api, stranger.owner, { asset_id: stranger.asset.id, size_bytes: 1024 });
      });

      it("refuses a read key (403) and lets a write key start", async () => {
        const h = subject();
        const { owner, asset } = await fixture(h);
        const read = await createApiKey(h.api, owner, ["read"]);
        const write = await createApiKey(h.api, owner, ["write"]);
        expectError(
          await h.api.post("/v1/uploads", {
            apiKey: read.key,
            json: { asset_id: asset.id, size_bytes: 1024 },
          }),
          403,
          "forbidden",
        );
        await startUpload(h.api, { apiKey: write.key }, { asset_id: asset.id, size_bytes: 1024 });
      });

      it("refuses a second start while a session is open (409 upload_in_progress); the first stays usable", async () => {
        const h = subject();
        const { owner, asset } = await fixture(h);
        const first = await startUpload(h.api, owner, { asset_id: asset.id, size_bytes: LAST_PART_SIZE });
        expectError(
          await h.api.post("/v1/uploads", {
            ...credentialOptions(owner),
            json: { asset_id: asset.id, size_bytes: FILE_SIZE },
          }),
          409,
          "upload_in_progress",
        );
        expect((await h.backdoor.upload(first.id))?.status).toBe("created");
        const resumed = expectStatus(await resume(h, owner, first.id), 200).body.upload;
        expect(resumed.status).toBe("created");
        expect(resumed.missing_part_urls.map((p) => p.number)).toEqual([1]);
      });
    });

    describe("part uploads", () => {
      it("stores each part PUT (200 with a quoted ETag) with exactly the bytes sent", async () => {
        const h = subject();
        const { upload, parts } = await started(h);
        // Out of order: the last part first.
        const etags = new Map<number, string>();
        for (const n of [3, 1, 2]) {
          const part = parts[n - 1]!;
          const reply = await putPart(upload.parts[n - 1]!.url, part.bytes);
          expect(reply.status).toBe(200);
          expect(reply.text).toBe("");
          etags.set(n, etagOfReply(reply).etag);
        }
        expect(new Set(etags.values()).size).toBe(3);
        expect(await storedParts(h, upload.id)).toEqual(digests(parts));
        expect((await h.backdoor.upload(upload.id))?.status).toBe("created");
      });

      it("refuses a part one byte short or one byte long (400 wrong_size) and stores nothing for it", async () => {
        const h = subject();
        const { upload, parts } = await started(h);
        const full = parts[0]!.bytes;
        const last = parts[2]!.bytes;
        if (signsPartUrls(h)) {
          // A bucket refuses a body of another size than its URL was signed for, in its own words.
          for (const [n, bytes] of [
            [1, full.subarray(0, PART_SIZE - 1)],
            [1, randomPayload(PART_SIZE + 1)],
            [3, last.subarray(0, LAST_PART_SIZE - 1)],
            [3, randomPayload(LAST_PART_SIZE + 1)],
          ] as const)
            expectRefusedByStore(await putPart(upload.parts[n - 1]!.url, bytes));
        } else {
          const wrong = async (n: number, bytes: Uint8Array, expected: number) => {
            const body = expectError(await putPart(upload.parts[n - 1]!.url, bytes), 400, "invalid_request");
            expect(body.details).toMatchObject({ reason: "wrong_size", expected_size: expected });
            return body.details as { received_size: unknown };
          };
          expect((await wrong(1, full.subarray(0, PART_SIZE - 1), PART_SIZE)).received_size).toBe(
            PART_SIZE - 1,
          );
          const long = await wrong(1, randomPayload(PART_SIZE + 1), PART_SIZE);
          expect(long.received_size).toEqual(expect.any(Number));
          expect(long.received_size as number).toBeGreaterThan(PART_SIZE);
          expect((await wrong(3, last.subarray(0, LAST_PART_SIZE - 1), LAST_PART_SIZE)).received_size).toBe(
            LAST_PART_SIZE - 1,
          );
          const longLast = await wrong(3, randomPayload(LAST_PART_SIZE + 1), LAST_PART_SIZE);
          expect(longLast.received_size as number).toBeGreaterThan(LAST_PART_SIZE);
        }
        expect(await storedParts(h, upload.id)).toEqual([]);
        // The right bytes on the same URLs are still taken.
        await sendPart(upload.parts[0]!.url, full);
        await sendPart(upload.parts[2]!.url, last);
        expect(await storedParts(h, upload.id)).toEqual(digests([parts[0]!, parts[2]!]));
      });

      it("refuses a tampered signature (401) and part numbers outside 1..10,000; stores nothing", async () => {
        const h = subject();
        const { upload, parts, account } = await started(h);
        const last = parts[2]!.bytes;
        const url = upload.parts[2]!.url;
        if (signsPartUrls(h)) {
          // The bucket's signature binds the upload and the part number.
          expectRefusedByStore(await putPart(tampered(url), last));
          for (const n of ["2", "0", "10001", "4"])
            expectRefusedByStore(await putPart(withPartNumberParam(url, n), last));
          const otherUpload = new URL(url);
          otherUpload.searchParams.set("uploadId", `${otherUpload.searchParams.get("uploadId")}x`);
          expectRefusedByStore(await putPart(otherUpload.toString(), last));
          expect(await storedParts(h, upload.id)).toEqual([]);
          await sendPart(url, last);
          expect(await storedParts(h, upload.id)).toEqual(digests([parts[2]!]));
          return;
        }
        expectError(await putPart(tampered(url), last), 401, "unauthorized");
        // The signature binds the tenant and the part number too.
        const otherTenant = new URL(url);
        otherTenant.searchParams.set("t", `${account.tenant.id}x`);
        expectError(await putPart(otherTenant.toString(), last), 401, "unauthorized");
        expectError(await putPart(withPartNumber(url, "2"), last), 401, "unauthorized");
        for (const n of ["0", "10001", "4"]) {
          const reply = await putPart(withPartNumber(url, n), last);
          expect([400, 401]).toContain(reply.status);
          expectError(reply, reply.status, reply.status === 400 ? "invalid_request" : "unauthorized");
        }
        expect(await storedParts(h, upload.id)).toEqual([]);
        await sendPart(url, last);
        expect(await storedParts(h, upload.id)).toEqual(digests([parts[2]!]));
      });

      it("answers a CORS preflight (204) allowing PUT, and exposes the ETag of the PUT", async () => {
        const h = subject();
        const { upload, parts } = await started(h);
        const url = upload.parts[2]!.url;
        const origin = "https://app.example.com";
        const preflight = await sendTo("OPTIONS", url, {
          headers: {
            origin,
            "access-control-request-method": "PUT",
            "access-control-request-headers": "content-type",
          },
        });
        // A bucket answers its CORS preflight 200, the media app 204: both empty, both allowed.
        expect(preflight.status).toBe(signsPartUrls(h) ? 200 : 204);
        expect(preflight.text).toBe("");
        expect(preflight.headers.get("access-control-allow-methods") ?? "").toMatch(/\bPUT\b/);
        expect(preflight.headers.get("access-control-allow-origin")).toMatch(
          /^(\*|https:\/\/app\.example\.com)$/,
        );
        expect((preflight.headers.get("access-control-allow-headers") ?? "").toLowerCase()).toMatch(
          /\bcontent-type\b/,
        );
        const put = await putPart(url, parts[2]!.bytes, { origin });
        expect(put.status).toBe(200);
        etagOfReply(put);
        expect(put.headers.get("access-control-allow-origin")).toMatch(/^(\*|https:\/\/app\.example\.com)$/);
        expect((put.headers.get("access-control-expose-headers") ?? "").toLowerCase()).toMatch(/\betag\b/);
        // A refusal is readable by the page too.
        const refused = await putPart(tampered(url), parts[2]!.bytes, { origin });
        expect(refused.status).toBe(signsPartUrls(h) ? 403 : 401);
        expect(refused.headers.get("access-control-allow-origin")).toMatch(
          /^(\*|https:\/\/app\.example\.com)$/,
        );
      });
    });

    describe("GET /v1/uploads/:id (resume)", () => {
      it("after one part: the part with its etag, fresh URLs for the rest, and those URLs work", async () => {
        const h = subject();
        const { owner, asset, upload, parts } = await started(h);
        const createdAt = h.clock.now();
        const first = await sendPart(upload.parts[0]!.url, parts[0]!.bytes);
        h.clock.advance(10 * SECOND);
        const reply = await resume(h, owner, upload.id);
        expect(reply.status).toBe(200);
        expect(reply.body).toStrictEqual({
          upload: {
            id: upload.id,
            asset_id: asset.id,
            status: "created",
            part_size: PART_SIZE,
            part_count: 3,
            size_bytes: FILE_SIZE,
            expires_at: upload.expires_at,
            created_at: createdAt,
            completed_at: null,
            uploaded_parts: [{ number: 1, size: PART_SIZE, etag: first.etag }],
            missing_part_urls: [
              { number: 2, url: expect.any(String) },
              { number: 3, url: expect.any(String) },
            ],
          },
        });
        const [two, three] = reply.body.upload.missing_part_urls;
        const second = await sendPart(two!.url, parts[1]!.bytes);
        const third = await sendPart(three!.url, parts[2]!.bytes);
        expect(await storedParts(h, upload.id)).toEqual(digests(parts));
        const after = expectStatus(await resume(h, owner, upload.id), 200).body.upload;
        expect(after.uploaded_parts).toStrictEqual([
          { number: 1, size: PART_SIZE, etag: first.etag },
          { number: 2, size: PART_SIZE, etag: second.etag },
          { number: 3, size: LAST_PART_SIZE, etag: third.etag },
        ]);
        expect(after.missing_part_urls).toStrictEqual([]);
        expect(after.status).toBe("created");
      });

      it("shows a read key the stored parts but no URLs (an upload URL is a write capability)", async () => {
        const h = subject();
        const { owner, upload, parts } = await started(h);
        const read = await createApiKey(h.api, owner, ["read"]);
        const last = await sendPart(upload.parts[2]!.url, parts[2]!.bytes);
        const reply = expectStatus(await resume(h, { apiKey: read.key }, upload.id), 200);
        expect(reply.body.upload.status).toBe("created");
        expect(reply.body.upload.uploaded_parts).toStrictEqual([
          { number: 3, size: LAST_PART_SIZE, etag: last.etag },
        ]);
        expect(reply.body.upload.missing_part_urls).toStrictEqual([]);
        expect(reply.text).not.toContain("/parts/");
      });
    });

    describe("POST /v1/uploads/:id/complete", () => {
      it("completes (200): the asset is uploaded with size and checksum, once, with one processing job", async () => {
        const h = subject();
        const file = randomPayload(FILE_SIZE);
        const sha256 = sha256OfBytes(file);
        const { owner, asset, upload, parts, tenantId } = await started(h, { file, sha256 });
        const createdAt = h.clock.now();
        const etags = await sendAll(upload, parts);
        h.clock.advance(5 * SECOND);
        const completedAt = h.clock.now();

        const reply = await complete(h, owner, upload.id);
        expect(reply.status).toBe(200);
        expect(reply.body).toStrictEqual({
          upload: {
            id: upload.id,
            asset_id: asset.id,
            status: "completed",
            part_size: PART_SIZE,
            part_count: 3,
            size_bytes: FILE_SIZE,
            expires_at: upload.expires_at,
            created_at: createdAt,
            completed_at: completedAt,
          },
          asset: uploadedAsset(asset, FILE_SIZE, sha256),
        });

        h.clock.advance(5 * SECOND);
        const again = await complete(h, owner, upload.id);
        expect(again.status).toBe(200);
        expect(again.body).toStrictEqual(reply.body);

        expect(await h.backdoor.upload(upload.id)).toMatchObject({
          status: "completed",
          completed_at: completedAt,
        });
        expect(await h.backdoor.asset(asset.id)).toStrictEqual({
          ...uploadedAsset(asset, FILE_SIZE, sha256),
          tenant_id: tenantId,
        });
        const jobs = await processJobsOf(h, asset.id);
        expect(jobs).toHaveLength(1);
        expect(jobs[0]?.data).toMatchObject({ tenant_id: tenantId, asset_id: asset.id });

        // The origin is the whole file, and the parts are gone.
        expect(digestOf(await h.objects.read(originKey(tenantId, asset.id)))).toEqual(digestOf(file));
        expect(await h.objects.exists(originKey(tenantId, asset.id))).toBe(true);
        expect(await h.objects.storedParts(upload.id)).toEqual([]);

        const resumed = expectStatus(await resume(h, owner, upload.id), 200).body.upload;
        expect(resumed).toStrictEqual({
          ...reply.body.upload,
          uploaded_parts: [
            { number: 1, size: PART_SIZE, etag: etags.get(1)!.etag },
            { number: 2, size: PART_SIZE, etag: etags.get(2)!.etag },
            { number: 3, size: LAST_PART_SIZE, etag: etags.get(3)!.etag },
          ] satisfies WireUploadedPart[],
          missing_part_urls: [],
        });

        // The asset's bytes are in: no new upload for it.
        expectError(
          await h.api.post("/v1/uploads", {
            ...credentialOptions(owner),
            json: { asset_id: asset.id, size_bytes: FILE_SIZE },
          }),
          409,
          "upload_in_progress",
        );
        expect(await processJobsOf(h, asset.id)).toHaveLength(1);
      });

      it("checks the client's parts: a wrong etag or sha256 is 400; quoted etags as returned complete", async () => {
        const h = subject();
        const { owner, asset, upload, parts, file } = await started(h);
        const etags = await sendAll(upload, parts);
        const given = parts.map(({ number, bytes }) => ({
          number,
          etag: etags.get(number)!.quoted,
          sha256: sha256OfBytes(bytes),
        }));

        const badEtag = expectError(
          await complete(h, owner, upload.id, {
            parts: given.map((p) => (p.number === 2 ? { number: 2, etag: '"0123456789abcdef"' } : p)),
          }),
          400,
          "invalid_request",
        );
        const mismatched = (body: ErrorBody) =>
          (body.details?.mismatched_parts as Array<{ number: number }> | undefined)?.map((p) => p.number);
        expect(mismatched(badEtag)).toContain(2);
        expect(mismatched(badEtag)).not.toContain(1);

        // A part's sha256 is checked where the store hashes while assembling (not a bucket).
        if (checksAtCompletion(h)) {
          const wrongSha = sha256OfBytes(parts[1]!.bytes); // part 2's hash given for part 1
          const badSha = expectError(
            await complete(h, owner, upload.id, {
              parts: given.map((p) => (p.number === 1 ? { number: 1, sha256: wrongSha } : p)),
            }),
            400,
            "invalid_request",
          );
          expect(mismatched(badSha)).toContain(1);
        }
        expect((await h.backdoor.upload(upload.id))?.status).toBe("created");
        expect((await h.backdoor.asset(asset.id))?.status).toBe("pending");
        expect(await storedParts(h, upload.id)).toEqual(digests(parts));
        expect(await processJobsOf(h, asset.id)).toHaveLength(0);

        const reply = await complete(h, owner, upload.id, { parts: given });
        expect(reply.status).toBe(200);
        expect(reply.body.upload.status).toBe("completed");
        expect(reply.body.asset).toStrictEqual(uploadedAsset(asset, FILE_SIZE, checksumAfter(h, file)));
        // Unquoted etags, as resume lists them, are accepted too (and the session is completed already).
        const unquoted = await complete(h, owner, upload.id, {
          parts: parts.map(({ number }) => ({ number, etag: etags.get(number)!.etag })),
        });
        expect(unquoted.status).toBe(200);
        expect(unquoted.body).toStrictEqual(reply.body);
      });

      it("refuses to complete with a part missing (400 missing_parts [3]), and completes once it is sent", async () => {
        const h = subject();
        const { owner, asset, upload, parts, file } = await started(h);
        await sendAll(upload, parts.slice(0, 2));
        const body = expectError(await complete(h, owner, upload.id), 400, "invalid_request");
        expect(body.details?.missing_parts).toEqual([3]);
        expect((await h.backdoor.upload(upload.id))?.status).toBe("created");
        expect((await h.backdoor.asset(asset.id))?.status).toBe("pending");
        expect(await processJobsOf(h, asset.id)).toHaveLength(0);
        expect(await storedParts(h, upload.id)).toEqual(digests(parts.slice(0, 2)));

        const resumed = expectStatus(await resume(h, owner, upload.id), 200).body.upload;
        expect(resumed.missing_part_urls.map((p) => p.number)).toEqual([3]);
        await sendPart(resumed.missing_part_urls[0]!.url, parts[2]!.bytes);
        const done = expectStatus(await complete(h, owner, upload.id), 200).body;
        expect(done.asset).toStrictEqual(uploadedAsset(asset, FILE_SIZE, checksumAfter(h, file)));
      });

      it("refuses a file whose sha256 differs from the one declared at start (400 sha256_mismatch)", async () => {
        const h = subject();
        const declared = sha256OfBytes(randomPayload(16));
        const { owner, asset, upload, parts, tenantId } = await started(h, { sha256: declared });
        await sendAll(upload, parts);
        if (!checksAtCompletion(h)) {
          // A bucket cannot hash what it joins: the upload completes with the declared sha256,
          // for processing to check (a difference fails the asset with checksum_mismatch).
          const done = expectStatus(await complete(h, owner, upload.id), 200).body;
          expect(done.asset).toStrictEqual(uploadedAsset(asset, FILE_SIZE, declared));
          expect(await processJobsOf(h, asset.id)).toHaveLength(1);
          expect(await h.objects.exists(originKey(tenantId, asset.id))).toBe(true);
          return;
        }
        const body = expectError(await complete(h, owner, upload.id), 400, "invalid_request");
        expect(body.details?.reason).toBe("sha256_mismatch");
        const stored = await h.backdoor.asset(asset.id);
        expect(stored).toMatchObject({ status: "pending", origin_size_bytes: null, checksum_sha256: null });
        expect((await h.backdoor.upload(upload.id))?.status).not.toBe("completed");
        expect(await processJobsOf(h, asset.id)).toHaveLength(0);
        // Nothing of the refused bytes is kept as the asset's origin.
        expect(await h.objects.exists(originKey(tenantId, asset.id))).toBe(false);
        const got = expectStatus(
          await h.api.get<{ asset: WireAsset }>(`/v1/assets/${asset.id}`, credentialOptions(owner)),
          200,
        );
        expect(got.body.asset).toStrictEqual(asset);
        // The client can start over: abort this session, start another.
        expectNoContent(await abort(h, owner, upload.id));
        await startUpload(h.api, owner, { asset_id: asset.id, size_bytes: FILE_SIZE });
      });
    });

    describe("DELETE /v1/uploads/:id (abort)", () => {
      it("aborts (204, again 204): resume says aborted with nothing, complete 409, parts gone, a new start 201", async () => {
        const h = subject();
        const { owner, asset, upload, parts } = await started(h);
        await sendAll(upload, parts.slice(0, 2));
        expect(await storedParts(h, upload.id)).toEqual(digests(parts.slice(0, 2)));

        expectNoContent(await abort(h, owner, upload.id));
        expectNoContent(await abort(h, owner, upload.id));
        expect((await h.backdoor.upload(upload.id))?.status).toBe("aborted");
        expect(await h.objects.storedParts(upload.id)).toEqual([]);

        const resumed = expectStatus(await resume(h, owner, upload.id), 200).body.upload;
        expect(resumed).toMatchObject({
          id: upload.id,
          status: "aborted",
          completed_at: null,
          uploaded_parts: [],
          missing_part_urls: [],
        });
        expectError(await complete(h, owner, upload.id), 409, "upload_in_progress");
        // The old part URLs take nothing more.
        const late = await putPart(upload.parts[2]!.url, parts[2]!.bytes);
        expect(late.status).toBeGreaterThanOrEqual(400);
        expect(await h.objects.storedParts(upload.id)).toEqual([]);
        expect((await h.backdoor.asset(asset.id))?.status).toBe("pending");

        const next = await startUpload(h.api, owner, { asset_id: asset.id, size_bytes: FILE_SIZE });
        expect(next.id).not.toBe(upload.id);
        expect((await h.backdoor.upload(upload.id))?.status).toBe("aborted");
      });

      it("refuses to abort a completed session (409) and keeps it completed", async () => {
        const h = subject();
        const file = randomPayload(LAST_PART_SIZE);
        const { owner, asset, upload, parts } = await started(h, { file });
        expect(upload.part_count).toBe(1);
        await sendAll(upload, parts);
        expectStatus(await complete(h, owner, upload.id), 200);
        expectError(await abort(h, owner, upload.id), 409, "upload_in_progress");
        expect((await h.backdoor.upload(upload.id))?.status).toBe("completed");
        expect((await h.backdoor.asset(asset.id))?.status).toBe("uploaded");
        expect(expectStatus(await resume(h, owner, upload.id), 200).body.upload.status).toBe("completed");
      });

      it("refuses a read key (403) on abort and complete", async () => {
        const h = subject();
        const { owner, upload } = await started(h);
        const read = await createApiKey(h.api, owner, ["read"]);
        expectError(await abort(h, { apiKey: read.key }, upload.id), 403, "forbidden");
        expectError(await complete(h, { apiKey: read.key }, upload.id), 403, "forbidden");
        expect((await h.backdoor.upload(upload.id))?.status).toBe("created");
      });
    });

    describe("expiry", () => {
      it("expires 24 h after the start: resume says expired, complete 409, old URLs 401, a new start 201", async () => {
        const h = subject();
        const base = await fixture(h);
        // An API key: the access token would not outlive the day.
        const key = await createApiKey(h.api, base.owner, ["write"]);
        const writer: Credential = { apiKey: key.key };
        const file = randomPayload(FILE_SIZE);
        const parts = partsOf(file, PART_SIZE);
        const upload = await startUpload(h.api, writer, { asset_id: base.asset.id, size_bytes: FILE_SIZE });
        await sendPart(upload.parts[0]!.url, parts[0]!.bytes);

        h.clock.advance(DAY - SECOND);
        expect(expectStatus(await resume(h, writer, upload.id), 200).body.upload.status).toBe("created");

        h.clock.advance(2 * SECOND);
        const reply = await resume(h, writer, upload.id);
        expect(reply.status).toBe(200);
        expect(reply.body.upload).toMatchObject({
          id: upload.id,
          status: "expired",
          expires_at: upload.expires_at,
          completed_at: null,
          uploaded_parts: [],
          missing_part_urls: [],
        });
        expect(reply.text).not.toContain("/parts/");
        expectError(await complete(h, writer, upload.id), 409, "upload_in_progress");
        const late = await putPart(upload.parts[1]!.url, parts[1]!.bytes);
        // The bucket's URL outlives the session on its own clock, but the upload is aborted under it.
        if (signsPartUrls(h)) expectRefusedByStore(late);
        else expectError(late, 401, "unauthorized");
        expect((await h.objects.storedParts(upload.id)).map((p) => p.number)).not.toContain(2);
        // Aborting an expired session is fine (idempotent), and changes nothing.
        expectNoContent(await abort(h, writer, upload.id));
        expect((await h.backdoor.upload(upload.id))?.status).toBe("expired");
        expect((await h.backdoor.asset(base.asset.id))?.status).toBe("pending");

        const next = await startUpload(h.api, writer, { asset_id: base.asset.id, size_bytes: FILE_SIZE });
        expect(next.id).not.toBe(upload.id);
        expect(next.expires_at).toBe(h.clock.now() + DAY);
      });
    });

    describe("tenancy", () => {
      it("answers 404 for another tenant's upload on GET, DELETE and complete, and for an unknown id", async () => {
        const h = subject();
        const { owner, upload, parts } = await started(h);
        await sendAll(upload, parts);
        const stranger = await fixture(h);
        const notFound = (reply: Reply<unknown>) => expectError(reply, 404, "not_found");
        notFound(await resume(h, stranger.owner, upload.id));
        notFound(await abort(h, stranger.owner, upload.id));
        notFound(await complete(h, stranger.owner, upload.id));
        for (const id of ["upl_doesnotexist00000000", "x"]) {
          notFound(await resume(h, owner, id));
          notFound(await abort(h, owner, id));
          notFound(await complete(h, owner, id));
        }
        // None of it touched the session.
        expect((await h.backdoor.upload(upload.id))?.status).toBe("created");
        expect(await storedParts(h, upload.id)).toEqual(digests(parts));
        expectStatus(await complete(h, owner, upload.id), 200);
      });
    });
  });
};

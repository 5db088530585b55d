import { spawn } from "node:child_process";
import {
  createCipheriv,
  createHash,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  sign,
} from "node:crypto";
import { once } from "node:events";
import { existsSync, readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Storage } from "@google-cloud/storage";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGcsTestServer, type GcsTestServer } from "../src/gcs-test-server/index.js";

// The server is checked against the real client: @google-cloud/storage makes the JSON calls and
// signs the URLs, so a difference between the two fails here rather than against GCS.

const MiB = 1024 * 1024;
let skewMs = 0;
let server: GcsTestServer;
let storage: Storage;

/** Deterministic bytes: an AES-CTR keystream keyed by the seed. */
const seeded = (seed: number, size: number): Buffer =>
  createCipheriv("aes-256-ctr", createHash("sha256").update(String(seed)).digest(), Buffer.alloc(16)).update(
    Buffer.alloc(size),
  );

const md5Hex = (bytes: Uint8Array) => createHash("md5").update(bytes).digest("hex");
/** Megabytes compare by size and hash: deep equality over them takes seconds. */
const digest = (bytes: Uint8Array | undefined) => bytes && { size: bytes.byteLength, md5: md5Hex(bytes) };
const uniqueName = (label: string) => `t/${label}-${randomBytes(6).toString("hex")}`;

/** The bearer headers the SDK's own auth client would send. */
const bearer = async (): Promise<Record<string, string>> => {
  const headers = await storage.authClient.getRequestHeaders();
  return Object.fromEntries(Object.entries(headers as Record<string, string>));
};

const xmlUrl = (name: string, query: string) =>
  `${server.endpoint}/${server.bucket}/${name.split("/").map(encodeURIComponent).join("/")}?${query}`;

const codeOf = (xml: string) => /<Code>([^<]*)<\/Code>/.exec(xml)?.[1];

const initiate = async (name: string, headers: Record<string, string> = {}) => {
  const res = await fetch(xmlUrl(name, "uploads"), {
    method: "POST",
    headers: { ...(await bearer()), "Content-Type": "video/mp4", ...headers },
  });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  const uploadId = /<UploadId>([^<]+)<\/UploadId>/.exec(text)?.[1];
  expect(uploadId).toBeDefined();
  return uploadId!;
};

const partUrl = async (
  name: string,
  uploadId: string,
  partNumber: number,
  action: "write" | "read" = "write",
) => {
  const [url] = await storage
    .bucket(server.bucket)
    .file(name)
    .getSignedUrl({
      version: "v4",
      action,
      expires: Date.now() + 15 * 60_000,
      queryParams: { partNumber: String(partNumber), uploadId },
    });
  return url;
};

const putPart = async (url: string, body: Uint8Array, method = "PUT") =>
  fetch(url, { method, body: method === "GET" || method === "HEAD" ? undefined : body });

const completeBody = (parts: ReadonlyArray<{ number: number; etag: string }>) =>
  `<CompleteMultipartUpload>${parts
    .map((p) => `<Part><PartNumber>${p.number}</PartNumber><ETag>${p.etag}</ETag></Part>`)
    .join("")}</CompleteMultipartUpload>`;

const complete = async (
  name: string,
  uploadId: string,
  parts: ReadonlyArray<{ number: number; etag: string }>,
) =>
  fetch(xmlUrl(name, `uploadId=${encodeURIComponent(uploadId)}`), {
    method: "POST",
    headers: await bearer(),
    body: completeBody(parts),
  });

beforeAll(async () => {
  server = await createGcsTestServer({ now: () => Date.now() + skewMs });
  storage = new Storage({
    apiEndpoint: server.endpoint,
    keyFilename: server.credentialsPath,
    projectId: server.keyFile.project_id,
    useAuthWithCustomEndpoint: true,
  });
  // google-auth-library posts to oauth2.googleapis.com whatever the key's token_uri says; a
  // self-signed JWT bearer (accepted by GCS too) keeps every call on the test server.
  storage.authClient.useJWTAccessWithScope = true;
});

afterAll(async () => {
  await server?.close();
});

describe("gcs-test-server: JSON API through @google-cloud/storage", () => {
  it("stores a simple (multipart/related) upload and a resumable one byte for byte", async () => {
    const simple = seeded(1, 300_001);
    const resumable = seeded(2, 2 * MiB + 17);
    const a = uniqueName("simple");
    const b = uniqueName("resumable");
    await storage
      .bucket(server.bucket)
      .file(a)
      .save(simple, {
        resumable: false,
        contentType: "video/mp4",
        metadata: { metadata: { asset: "ast_1" } },
      });
    // `save({ resumable: true })` starts its session without credentials on a custom endpoint
    // (the SDK drops useAuthWithCustomEndpoint there); createResumableUpload keeps them.
    const fileB = storage.bucket(server.bucket).file(b);
    const [uri] = await fileB.createResumableUpload({ metadata: { contentType: "text/plain" } });
    await fileB.save(resumable, { uri, resumable: true, chunkSize: 1 * MiB });

    expect(digest(await server.backdoor.read(a))).toEqual(digest(simple));
    expect(digest(await server.backdoor.read(b))).toEqual(digest(resumable));
    const [described] = await server.backdoor.objects(a);
    expect(described).toMatchObject({
      name: a,
      size: simple.length,
      contentType: "video/mp4",
      metadata: { asset: "ast_1" },
      md5Hash: createHash("md5").update(simple).digest("base64"),
    });
    expect(await server.backdoor.objects(b)).toMatchObject([
      { size: resumable.length, contentType: "text/plain" },
    ]);
    expect(server.backdoor.resumableSessions()).toBe(0);
    const [metadata] = await storage.bucket(server.bucket).file(a).getMetadata();
    expect(metadata).toMatchObject({ name: a, size: String(simple.length), contentType: "video/mp4" });
  });

  it("reads whole objects (checksums validated by the SDK) and byte ranges", async () => {
    const bytes = seeded(3, 1 * MiB + 5);
    const name = uniqueName("ranges");
    await server.backdoor.write(name, bytes, "video/mp4");
    const file = storage.bucket(server.bucket).file(name);
    const [whole] = await file.download();
    expect(digest(whole)).toEqual(digest(bytes));
    const [middle] = await file.download({ start: 1000, end: 1999 });
    expect(middle).toEqual(bytes.subarray(1000, 2000));
    const [tail] = await file.download({ start: bytes.length - 10 });
    expect(tail).toEqual(bytes.subarray(bytes.length - 10));

    const res = await fetch(
      `${server.endpoint}/storage/v1/b/${server.bucket}/o/${encodeURIComponent(name)}?alt=media`,
      { headers: { ...(await bearer()), Range: `bytes=${bytes.length}-` } },
    );
    expect(res.status).toBe(416);
    const suffix = await fetch(
      `${server.endpoint}/download/storage/v1/b/${server.bucket}/o/${encodeURIComponent(name)}?alt=media`,
      { headers: { ...(await bearer()), Range: "bytes=-4" } },
    );
    expect(suffix.status).toBe(206);
    expect(suffix.headers.get("content-range")).toBe(
      `bytes ${bytes.length - 4}-${bytes.length - 1}/${bytes.length}`,
    );
    expect(Buffer.from(await suffix.arrayBuffer())).toEqual(bytes.subarray(bytes.length - 4));
  });

  it("lists by prefix in name order, page by page, and deletes", async () => {
    const prefix = `${uniqueName("list")}/`;
    const names = ["c", "a", "b/1", "b/2", "e"].map((n) => `${prefix}${n}`);
    for (const name of names) await server.backdoor.write(name, Buffer.from(name));
    await server.backdoor.write(`${prefix.slice(0, -1)}-sibling`, Buffer.from("x"));
    const bucket = storage.bucket(server.bucket);

    const pages: string[][] = [];
    let query: { pageToken?: string } | null = {};
    while (query) {
      const [files, next]: [Array<{ name: string }>, { pageToken?: string } | null, unknown] =
        await bucket.getFiles({
          prefix,
          maxResults: 2,
          autoPaginate: false,
          ...query,
        });
      pages.push(files.map((f) => f.name));
      query = next;
    }
    expect(pages).toEqual([[`${prefix}a`, `${prefix}b/1`], [`${prefix}b/2`, `${prefix}c`], [`${prefix}e`]]);
    const [all] = await bucket.getFiles({ prefix });
    expect(all.map((f) => f.name)).toEqual([...names].sort());
    const [, , rolledUp] = await bucket.getFiles({ prefix, delimiter: "/", autoPaginate: false });
    expect(rolledUp).toMatchObject({ prefixes: [`${prefix}b/`] });

    await bucket.file(`${prefix}c`).delete();
    await bucket.deleteFiles({ prefix: `${prefix}b/` });
    expect((await server.backdoor.objects(prefix)).map((o) => o.name)).toEqual([`${prefix}a`, `${prefix}e`]);
    const [exists] = await bucket.file(`${prefix}c`).exists();
    expect(exists).toBe(false);
    await expect(bucket.file(`${prefix}c`).delete()).rejects.toMatchObject({ code: 404 });
  });

  it("refuses JSON calls without a bearer (401) and with a forged one", async () => {
    const name = uniqueName("auth");
    await server.backdoor.write(name, Buffer.from("secret"));
    const url = `${server.endpoint}/storage/v1/b/${server.bucket}/o/${encodeURIComponent(name)}?alt=media`;
    const anonymous = await fetch(url);
    expect(anonymous.status).toBe(401);
    expect(await anonymous.json()).toMatchObject({ error: { code: 401, errors: [{ reason: "required" }] } });

    const forged = await fetch(url, { headers: { Authorization: "Bearer ya29.made-up" } });
    expect(forged.status).toBe(401);
    expect(await forged.json()).toMatchObject({ error: { code: 401, message: "Invalid Credentials" } });

    // The SDK against a custom endpoint sends no credentials unless told to.
    const careless = new Storage({ apiEndpoint: server.endpoint, keyFilename: server.credentialsPath });
    await expect(careless.bucket(server.bucket).file(name).download()).rejects.toMatchObject({ code: 401 });
  });

  it("keeps an object that ifGenerationMatch=0 would overwrite (412), and composes objects", async () => {
    const name = uniqueName("precondition");
    const file = storage.bucket(server.bucket).file(name);
    await file.save(Buffer.from("first"), { resumable: false, preconditionOpts: { ifGenerationMatch: 0 } });
    await expect(
      file.save(Buffer.from("second"), { resumable: false, preconditionOpts: { ifGenerationMatch: 0 } }),
    ).rejects.toMatchObject({ code: 412 });
    expect((await server.backdoor.read(name))?.toString()).toBe("first");

    const other = uniqueName("precondition");
    await server.backdoor.write(other, Buffer.from("+more"));
    const joined = uniqueName("composed");
    await storage.bucket(server.bucket).combine([name, other], joined);
    expect((await server.backdoor.read(joined))?.toString()).toBe("first+more");
    expect(await server.backdoor.objects(joined)).toMatchObject([{ size: 10, componentCount: 2 }]);
    const [downloaded] = await storage.bucket(server.bucket).file(joined).download();
    expect(downloaded.toString()).toBe("first+more");
  });

  it("answers 501 naming a call it does not implement", async () => {
    const res = await fetch(`${server.endpoint}/storage/v1/b/${server.bucket}/o?matchGlob=**.ts`, {
      headers: await bearer(),
    });
    expect(res.status).toBe(501);
    expect(JSON.stringify(await res.json())).toContain("matchGlob");
    const xml = await fetch(xmlUrl("x", "acl"), { headers: await bearer() });
    expect(xml.status).toBe(501);
    expect(codeOf(await xml.text())).toBe("NotImplemented");
  });
});

describe("gcs-test-server: the token endpoint", () => {
  const jwt = (key: KeyObject, claims: Record<string, unknown>, kid = server.keyFile.private_key_id) => {
    const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
    const unsigned = `${part({ alg: "RS256", typ: "JWT", kid })}.${part(claims)}`;
    return `${unsigned}.${sign("RSA-SHA256", Buffer.from(unsigned), key).toString("base64url")}`;
  };
  const claims = () => {
    const iat = Math.floor(Date.now() / 1000);
    return {
      iss: server.keyFile.client_email,
      scope: "https://www.googleapis.com/auth/devstorage.full_control",
      aud: server.keyFile.token_uri,
      iat,
      exp: iat + 3600,
    };
  };
  const exchange = (assertion: string) =>
    fetch(server.keyFile.token_uri, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer",
        assertion,
      }).toString(),
    });

  it("gives an access token for a JWT signed with the key, which then authorizes calls", async () => {
    const { createPrivateKey } = await import("node:crypto");
    const res = await exchange(jwt(createPrivateKey(server.keyFile.private_key), claims()));
    expect(res.status).toBe(200);
    const body = (await res.json()) as { access_token: string; token_type: string; expires_in: number };
    expect(body).toMatchObject({ token_type: "Bearer", expires_in: expect.any(Number) });
    const list = await fetch(`${server.endpoint}/storage/v1/b/${server.bucket}/o?prefix=none/`, {
      headers: { Authorization: `Bearer ${body.access_token}` },
    });
    expect(list.status).toBe(200);
    expect(await list.json()).toEqual({ kind: "storage#objects" });
  });

  it("refuses a JWT signed with another key", async () => {
    const other = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey;
    const res = await exchange(jwt(other, claims()));
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "invalid_grant", error_description: "Invalid JWT Signature." });
    // Nor is such a JWT good as a self-signed bearer.
    const selfSigned = jwt(other, { ...claims(), sub: server.keyFile.client_email, aud: undefined });
    const list = await fetch(`${server.endpoint}/storage/v1/b/${server.bucket}/o`, {
      headers: { Authorization: `Bearer ${selfSigned}` },
    });
    expect(list.status).toBe(401);
  });
});

describe("gcs-test-server: XML multipart upload with V4-signed part URLs", () => {
  it("accepts signed part PUTs, lists them, and completes the object from the parts in order", async () => {
    const name = uniqueName("mpu");
    const filesBefore = server.backdoor.files();
    const uploadId = await initiate(name, { "x-goog-meta-upload": "upl_1" });
    expect(server.backdoor.uploads().find((u) => u.uploadId === uploadId)).toMatchObject({
      name,
      contentType: "video/mp4",
      metadata: { upload: "upl_1" },
      parts: [],
    });
    const bodies = [seeded(10, 5 * MiB), seeded(11, 5 * MiB + 3), seeded(12, 1234)];
    // Sent out of order, as clients in parallel do.
    const etags = new Map<number, string>();
    for (const number of [2, 3, 1]) {
      const res = await putPart(await partUrl(name, uploadId, number), bodies[number - 1]!);
      expect(res.status, await res.clone().text()).toBe(200);
      etags.set(number, res.headers.get("etag")!);
    }
    expect(etags.get(1)).toBe(`"${md5Hex(bodies[0]!)}"`);
    expect(digest(await server.backdoor.readPart(uploadId, 2))).toEqual(digest(bodies[1]));

    const list = await fetch(xmlUrl(name, `uploadId=${encodeURIComponent(uploadId)}`), {
      headers: await bearer(),
    });
    const listed = await list.text();
    expect(list.status).toBe(200);
    expect([...listed.matchAll(/<PartNumber>(\d+)<\/PartNumber>/g)].map((m) => Number(m[1]))).toEqual([
      1, 2, 3,
    ]);
    expect([...listed.matchAll(/<Size>(\d+)<\/Size>/g)].map((m) => Number(m[1]))).toEqual(
      bodies.map((b) => b.length),
    );

    const done = await complete(
      name,
      uploadId,
      [1, 2, 3].map((number) => ({ number, etag: etags.get(number)! })),
    );
    expect(done.status, await done.clone().text()).toBe(200);
    expect(await done.text()).toContain(`<Key>${name}</Key>`);
    const whole = Buffer.concat(bodies);
    expect(digest(await server.backdoor.read(name))).toEqual(digest(whole));
    const [object] = await server.backdoor.objects(name);
    expect(object).toMatchObject({
      size: whole.length,
      contentType: "video/mp4",
      metadata: { upload: "upl_1" },
      componentCount: 3,
    });
    expect(object?.md5Hash).toBeUndefined();
    expect(server.backdoor.uploads().some((u) => u.uploadId === uploadId)).toBe(false);
    // The SDK validates the composite object's CRC32C on a whole read.
    const [downloaded] = await storage.bucket(server.bucket).file(name).download();
    expect(md5Hex(downloaded)).toBe(md5Hex(whole));
    expect(server.backdoor.files()).toBe(filesBefore + 3);
  });

  it("refuses tampered, expired, wrong-method, wrong-part and wrong-upload URLs as GCS does", async () => {
    const name = uniqueName("refusals");
    const uploadId = await initiate(name);
    const otherUpload = await initiate(name);
    const body = seeded(20, 1000);
    const url2 = await partUrl(name, uploadId, 2);

    const tampered = new URL(url2);
    const signature = tampered.searchParams.get("X-Goog-Signature")!;
    tampered.searchParams.set(
      "X-Goog-Signature",
      `${signature.slice(0, -1)}${signature.endsWith("0") ? "1" : "0"}`,
    );
    const refusedTampered = await putPart(tampered.href, body);
    expect(refusedTampered.status).toBe(403);
    const tamperedXml = await refusedTampered.text();
    expect(codeOf(tamperedXml)).toBe("SignatureDoesNotMatch");
    expect(tamperedXml).toContain("<StringToSign>GOOG4-RSA-SHA256");

    const wrongMethod = await putPart(url2, body, "GET");
    expect(wrongMethod.status).toBe(403);
    expect(codeOf(await wrongMethod.text())).toBe("SignatureDoesNotMatch");

    const wrongPart = new URL(url2);
    wrongPart.searchParams.set("partNumber", "3");
    const refusedPart = await putPart(wrongPart.href, body);
    expect(refusedPart.status).toBe(403);
    expect(codeOf(await refusedPart.text())).toBe("SignatureDoesNotMatch");

    const wrongUpload = new URL(url2);
    wrongUpload.searchParams.set("uploadId", otherUpload);
    const refusedUpload = await putPart(wrongUpload.href, body);
    expect(refusedUpload.status).toBe(403);
    expect(codeOf(await refusedUpload.text())).toBe("SignatureDoesNotMatch");

    const anonymous = await putPart(
      xmlUrl(name, `partNumber=2&uploadId=${encodeURIComponent(uploadId)}`),
      body,
    );
    expect(anonymous.status).toBe(403);
    expect(codeOf(await anonymous.text())).toBe("AccessDenied");

    skewMs = 16 * 60_000;
    try {
      const expired = await putPart(url2, body);
      expect(expired.status).toBe(400);
      expect(codeOf(await expired.text())).toBe("ExpiredToken");
    } finally {
      skewMs = 0;
    }

    // None of the refused bodies was stored; the genuine URL still works.
    expect(server.backdoor.uploads().find((u) => u.uploadId === uploadId)?.parts).toEqual([]);
    expect(server.backdoor.uploads().find((u) => u.uploadId === otherUpload)?.parts).toEqual([]);
    const accepted = await putPart(url2, body);
    expect(accepted.status).toBe(200);
    expect(server.backdoor.uploads().find((u) => u.uploadId === uploadId)?.parts).toEqual([
      { number: 2, size: body.length, etag: `"${md5Hex(body)}"` },
    ]);
  });

  it("checks a signed Content-Length against the body sent", async () => {
    const name = uniqueName("sized");
    const uploadId = await initiate(name);
    const [url] = await storage
      .bucket(server.bucket)
      .file(name)
      .getSignedUrl({
        version: "v4",
        action: "write",
        expires: Date.now() + 60_000,
        extensionHeaders: { "content-length": "1000" },
        queryParams: { partNumber: "1", uploadId },
      });
    const shorter = await putPart(url, seeded(60, 999));
    expect(shorter.status).toBe(403);
    expect(codeOf(await shorter.text())).toBe("SignatureDoesNotMatch");
    const exact = await putPart(url, seeded(60, 1000));
    expect(exact.status).toBe(200);
    expect(
      server.backdoor
        .calls()
        .filter((c) => c.query.includes(encodeURIComponent(uploadId)) && c.method === "PUT"),
    ).toMatchObject([
      { auth: "none", status: 403 },
      { auth: "signed", status: 200 },
    ]);
  });

  it("refuses a complete with parts out of order, an unknown ETag, or a small middle part", async () => {
    const name = uniqueName("complete-refusals");
    const uploadId = await initiate(name);
    const small = seeded(30, 1000);
    const etags: string[] = [];
    for (const number of [1, 2]) {
      const res = await putPart(await partUrl(name, uploadId, number), small);
      etags.push(res.headers.get("etag")!);
    }
    const disorder = await complete(name, uploadId, [
      { number: 2, etag: etags[1]! },
      { number: 1, etag: etags[0]! },
    ]);
    expect(disorder.status).toBe(400);
    expect(codeOf(await disorder.text())).toBe("InvalidPartOrder");

    const unknown = await complete(name, uploadId, [
      { number: 1, etag: etags[0]! },
      { number: 2, etag: `"${"0".repeat(32)}"` },
    ]);
    expect(unknown.status).toBe(400);
    expect(codeOf(await unknown.text())).toBe("InvalidPart");

    const tooSmall = await complete(name, uploadId, [
      { number: 1, etag: etags[0]! },
      { number: 2, etag: etags[1]! },
    ]);
    expect(tooSmall.status).toBe(400);
    expect(codeOf(await tooSmall.text())).toBe("EntityTooSmall");
    expect(await server.backdoor.objects(name)).toEqual([]);
    expect(server.backdoor.uploads().find((u) => u.uploadId === uploadId)?.parts).toHaveLength(2);

    const missing = await complete(name, "no-such-upload", [{ number: 1, etag: etags[0]! }]);
    expect(missing.status).toBe(404);
    expect(codeOf(await missing.text())).toBe("NoSuchUpload");
  });

  it("aborts an upload: its parts are gone from the bucket and from disk", async () => {
    const name = uniqueName("abort");
    const filesBefore = server.backdoor.files();
    const uploadId = await initiate(name);
    for (const number of [1, 2])
      await putPart(await partUrl(name, uploadId, number), seeded(40 + number, 4096));
    expect(server.backdoor.files()).toBe(filesBefore + 2);
    const aborted = await fetch(xmlUrl(name, `uploadId=${encodeURIComponent(uploadId)}`), {
      method: "DELETE",
      headers: await bearer(),
    });
    expect(aborted.status).toBe(204);
    expect(server.backdoor.uploads().some((u) => u.uploadId === uploadId)).toBe(false);
    expect(server.backdoor.files()).toBe(filesBefore);
    const late = await putPart(await partUrl(name, uploadId, 3), seeded(43, 10));
    expect(late.status).toBe(404);
    expect(codeOf(await late.text())).toBe("NoSuchUpload");
    expect(server.backdoor.files()).toBe(filesBefore);
  });

  it("serves a V4-signed GET with a range, as a delivery redirect would", async () => {
    const name = uniqueName("signed-get");
    const bytes = seeded(50, 70_000);
    await server.backdoor.write(name, bytes, "video/mp2t");
    const [url] = await storage
      .bucket(server.bucket)
      .file(name)
      .getSignedUrl({ version: "v4", action: "read", expires: Date.now() + 5 * 60_000 });
    const res = await fetch(url, { headers: { Range: "bytes=100-199" } });
    expect(res.status).toBe(206);
    expect(res.headers.get("content-type")).toBe("video/mp2t");
    expect(Buffer.from(await res.arrayBuffer())).toEqual(bytes.subarray(100, 200));
    const head = await fetch(url, { method: "HEAD" });
    expect(head.status).toBe(403);
  });
});

describe("gcs-test-server: what clients get wrong", () => {
  it("answers malformed requests with a 4xx in GCS's shape, never a 5xx", async () => {
    const name = uniqueName("malformed");
    const uploadId = await initiate(name);
    const auth = await bearer();
    const base = `${server.endpoint}/storage/v1/b/${server.bucket}/o`;
    const attempts: Array<[string, RequestInit]> = [
      [`${base}/%E0%A4%A`, { headers: auth }],
      [`${base}?maxResults=-1`, { headers: auth }],
      [`${base}?pageToken=%%%`, { headers: auth }],
      [`${base}`, { headers: { Authorization: "Bearer a.b.c" } }],
      [`${base}`, { headers: { Authorization: "Basic Zm9vOmJhcg==" } }],
      [
        `${server.endpoint}/upload/storage/v1/b/${server.bucket}/o?uploadType=multipart&name=x`,
        {
          method: "POST",
          headers: { ...auth, "Content-Type": "multipart/related; boundary=b" },
          body: "--b\r\nnope",
        },
      ],
      [
        `${server.endpoint}/upload/storage/v1/b/${server.bucket}/o?uploadType=resumable&name=x`,
        { method: "POST", headers: { ...auth, "Content-Type": "application/json" }, body: "{not json" },
      ],
      [
        `${server.endpoint}/upload/storage/v1/b/${server.bucket}/o?uploadType=resumable&upload_id=nope`,
        { method: "PUT", body: "x" },
      ],
      [
        xmlUrl(name, `uploadId=${encodeURIComponent(uploadId)}`),
        { method: "POST", headers: auth, body: "<Complete>" },
      ],
      [
        xmlUrl(name, `uploadId=${encodeURIComponent(uploadId)}`),
        { method: "POST", headers: auth, body: completeBody([]) },
      ],
      [
        xmlUrl(name, `partNumber=0&uploadId=${encodeURIComponent(uploadId)}`),
        { method: "PUT", headers: auth, body: "x" },
      ],
      [
        xmlUrl(name, `partNumber=10001&uploadId=${encodeURIComponent(uploadId)}`),
        { method: "PUT", headers: auth, body: "x" },
      ],
      [
        xmlUrl(name, `partNumber=1&uploadId=${encodeURIComponent(uploadId)}`),
        { method: "PUT", headers: { ...auth, "Content-MD5": "AAAAAAAAAAAAAAAAAAAAAA==" }, body: "x" },
      ],
      [xmlUrl(name, "X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Date=yesterday"), {}],
      [
        xmlUrl(
          name,
          "X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=a%2F20200101%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20200101T000000Z&X-Goog-Expires=999999&X-Goog-SignedHeaders=host&X-Goog-Signature=zz",
        ),
        {},
      ],
      [`${server.endpoint}/other-bucket/x`, { headers: auth }],
      [server.keyFile.token_uri, { method: "POST", body: "grant_type=password" }],
      [
        server.keyFile.token_uri,
        {
          method: "POST",
          body: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=x.y.z",
        },
      ],
    ];
    for (const [url, init] of attempts) {
      const res = await fetch(url, init);
      const text = await res.text();
      expect({ url, status: res.status >= 400 && res.status < 500 }).toEqual({ url, status: true });
      expect(text.startsWith("{") || text.startsWith("<?xml"), `${url}: ${text}`).toBe(true);
    }
    expect(server.backdoor.uploads().find((u) => u.uploadId === uploadId)?.parts).toEqual([]);
  });

  it("survives a client that hangs up in the middle of a part, leaving nothing on disk", async () => {
    const name = uniqueName("hangup");
    const uploadId = await initiate(name);
    const filesBefore = server.backdoor.files();
    const url = new URL(await partUrl(name, uploadId, 1));
    const { request } = await import("node:http");
    await new Promise<void>((resolve) => {
      const req = request(url, { method: "PUT", headers: { "Content-Length": String(8 * MiB) } });
      req.on("error", () => resolve());
      req.write(seeded(70, 1 * MiB), () => setImmediate(() => req.destroy()));
      req.on("close", () => resolve());
    });
    // The server notices the hang-up asynchronously: wait (bounded) until the partial file is gone.
    for (let i = 0; i < 200 && server.backdoor.files() !== filesBefore; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(server.backdoor.files()).toBe(filesBefore);
    expect(server.backdoor.uploads().find((u) => u.uploadId === uploadId)?.parts).toEqual([]);
    const retry = await putPart(await partUrl(name, uploadId, 1), seeded(70, 1000));
    expect(retry.status).toBe(200);
  });
});

describe("gcs-test-server: the CLI", () => {
  it("prints one JSON line once listening, serves, and cleans up on SIGTERM", async () => {
    const bin = fileURLToPath(new URL("../bin/gcs-test-server.mjs", import.meta.url));
    const child = spawn(process.execPath, [bin, "--port", "0", "--bucket", "cli-bucket"], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      const lines = createInterface({ input: child.stdout });
      const [first] = (await once(lines, "line")) as [string];
      const printed = JSON.parse(first) as { endpoint: string; bucket: string; credentials: string };
      expect(printed).toEqual({
        endpoint: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
        bucket: "cli-bucket",
        credentials: expect.any(String),
        hmac_access_id: expect.stringMatching(/^GOOG1E[0-9A-Z]+$/),
        hmac_secret: expect.any(String),
      });
      const key = JSON.parse(readFileSync(printed.credentials, "utf8"));
      expect(key).toMatchObject({ type: "service_account", token_uri: `${printed.endpoint}/token` });

      const cli = new Storage({
        apiEndpoint: printed.endpoint,
        keyFilename: printed.credentials,
        useAuthWithCustomEndpoint: true,
      });
      cli.authClient.useJWTAccessWithScope = true;
      await cli.bucket("cli-bucket").file("hello.txt").save("hello", { resumable: false });
      const [bytes] = await cli.bucket("cli-bucket").file("hello.txt").download();
      expect(bytes.toString()).toBe("hello");
      expect((await fetch(`${printed.endpoint}/storage/v1/b/cli-bucket/o`)).status).toBe(401);

      child.kill("SIGTERM");
      const [code] = await once(child, "exit");
      expect(code).toBe(0);
      expect(existsSync(printed.credentials)).toBe(false);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  }, 120_000);
});

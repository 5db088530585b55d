import { createPrivateKey, type KeyObject, sign } from "node:crypto";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { promisify } from "node:util";
import { type File, Storage, type StorageOptions } from "@google-cloud/storage";
import {
  type ByteStream,
  isValidRange,
  type MultipartRef,
  NotFound,
  type ObjectStore,
  StorageError,
  type StoredObject,
  type StoredPart,
} from "@vod/core";
import { Effect, Option } from "effect";
import { type HmacKey, hmacSigner, signedUrls, type V4Signer } from "./v4.js";
import { completeBody, elements, text } from "./xml.js";

export interface GcsObjectStoreConfig {
  readonly bucket: string;
  /** Prepended to every key (`vod/` keeps the objects of one deployment apart); default none. */
  readonly prefix?: string | undefined;
  /**
   * The JSON and XML APIs' base URL, for a test server; default Google's. Its clients
   * authenticate with self-signed JWTs (a test server has no OAuth token endpoint).
   */
  readonly apiEndpoint?: string | undefined;
  /** A service account key file; default Application Default Credentials. */
  readonly keyFilename?: string | undefined;
  /** A service account key's fields; default Application Default Credentials. */
  readonly credentials?: StorageOptions["credentials"];
  readonly projectId?: string | undefined;
  /**
   * Segments: `proxy` (the media app streams them) or `redirect` (to a signed GET URL of the
   * bucket: the store then has `deliveryUrl`).
   */
  readonly delivery: "proxy" | "redirect";
  /**
   * The service account's HMAC key: URLs are then signed with it (`GOOG4-HMAC-SHA256`), in
   * microseconds each and with no IAM call. Default none: the service account signs them.
   */
  readonly hmacKey?: HmacKey | undefined;
}

/**
 * Where the bucket upload id of each of the core's uploads is kept: a small object under a name
 * no key of the core has (keys are plain segments; this one starts with a dot).
 */
const MARKERS = ".multipart/";
const ASSEMBLED_TYPE = "application/octet-stream";
/** Custom metadata on an assembled object: the upload that made it, for a repeated completion. */
const UPLOAD_META = "vod-upload-id";
/** Deletes of one `deletePrefix` in flight at once. */
const DELETE_CONCURRENCY = 8;
const UPLOAD_IDS_CACHED = 10_000;

interface Marker {
  readonly gcsUploadId: string;
  readonly key: string;
}

const statusOf = (e: unknown): number | undefined => {
  if (typeof e !== "object" || e === null) return undefined;
  const code = (e as { code?: unknown }).code;
  if (typeof code === "number") return code;
  const status = (e as { response?: { status?: unknown } }).response?.status;
  return typeof status === "number" ? status : undefined;
};

const storageError = (what: string) => (cause: unknown) =>
  cause instanceof StorageError
    ? cause
    : new StorageError({
        message: `${what}: ${cause instanceof Error ? cause.message : String(cause)}`,
        cause,
      });

const attempt = <A>(what: string, run: () => Promise<A>): Effect.Effect<A, StorageError> =>
  Effect.tryPromise({ try: run, catch: storageError(what) });

/** An XML API answer the store did not expect, as a StorageError naming GCS's error code. */
const unexpected = (what: string, status: number, body: string) =>
  new StorageError({ message: `${what}: ${status} ${text(body, "Code") ?? body.slice(0, 200)}` });

const readAll = async (body: ByteStream | Uint8Array) => {
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const chunks: Uint8Array[] = [];
  for await (const chunk of body) chunks.push(chunk);
  return Buffer.concat(chunks);
};

/** Signatures in flight at once without an HMAC key: the thread pool's, or IAM signBlob calls. */
const RSA_CONCURRENCY = 8;
/** Lifetime of a delivery URL is the caller's; V4 allows at most seven days. */
const SEVEN_DAYS_S = 604_800;

const mapConcurrent = async <A, B>(
  items: ReadonlyArray<A>,
  concurrency: number,
  f: (item: A) => Promise<B>,
): Promise<B[]> => {
  const out = new Array<B>(items.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) out[i] = await f(items[i]!);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  return out;
};

/**
 * Signing with the service account, once its identity is known (fetched once, then reused): a
 * key file's RSA key is parsed once and signs on libuv's thread pool, never on the event loop
 * (the SDK parsed the PEM again for every URL and signed on the main thread); without a key
 * (Cloud Run's service account) each signature is an IAM signBlob call, as the SDK makes it.
 */
const serviceAccountSigner = (auth: Storage["authClient"]) => {
  const signAsync = promisify(sign);
  let identity: Promise<{ email: string; key: KeyObject | undefined }> | undefined;
  const identify = () => {
    identity ??= (async () => {
      const credentials = await auth.getCredentials();
      const pem = ((await auth.getClient()) as { key?: unknown }).key;
      const universe = await auth.getUniverseDomain();
      if (!credentials.client_email) throw new Error("the credentials name no service account email");
      return {
        email: credentials.client_email,
        key:
          typeof pem === "string" && pem !== "" && universe === "googleapis.com"
            ? createPrivateKey(pem)
            : undefined,
      };
    })();
    identity.catch(() => {
      identity = undefined;
    });
    return identity;
  };
  return async (): Promise<V4Signer> => {
    const { email, key } = await identify();
    return {
      algorithm: "GOOG4-RSA-SHA256",
      credential: email,
      sign: (strings) =>
        mapConcurrent(strings, RSA_CONCURRENCY, async (s) =>
          key
            ? (await signAsync("RSA-SHA256", Buffer.from(s), key)).toString("hex")
            : Buffer.from(await auth.sign(s), "base64").toString("hex"),
        ),
    };
  };
};

/**
 * The ObjectStore port on a Google Cloud Storage bucket. Multipart uploads are the XML API's:
 * the client PUTs each part on a V4-signed URL (`partUploadUrls`; signed with the HMAC key when
 * there is one, else the service account's key, or IAM signBlob where there is none), resume lists the
 * upload's parts, complete sends the part list, abort aborts. GCS hashes no part with sha256, so
 * an assembled object's sha256 is null (processing checks the declared one). With `redirect`
 * delivery, segments are served from signed GET URLs (`deliveryUrl`).
 */
export const gcsObjectStore = (
  config: GcsObjectStoreConfig,
): ObjectStore & {
  readonly partUploadUrls: NonNullable<ObjectStore["partUploadUrls"]>;
} => {
  const storage = new Storage({
    ...(config.apiEndpoint ? { apiEndpoint: config.apiEndpoint, useAuthWithCustomEndpoint: true } : {}),
    ...(config.keyFilename ? { keyFilename: config.keyFilename } : {}),
    ...(config.credentials ? { credentials: config.credentials } : {}),
    ...(config.projectId ? { projectId: config.projectId } : {}),
  });
  // A test server has no OAuth token endpoint (google-auth-library posts to Google's whatever
  // the key file says): self-signed JWTs, which Google accepts too, need none.
  if (config.apiEndpoint) storage.authClient.useJWTAccessWithScope = true;
  const hmac = config.hmacKey ? hmacSigner(config.hmacKey) : undefined;
  const serviceAccount = serviceAccountSigner(storage.authClient);
  const signer = async () => hmac ?? (await serviceAccount());
  const bucket = storage.bucket(config.bucket);
  const prefix = config.prefix ?? "";
  /** The XML API shares the JSON API's host (storage.googleapis.com), path style. */
  const xmlBase = storage.apiEndpoint.replace(/\/+$/, "");

  const nameOf = (key: string) => {
    if (key === "" || key.startsWith(MARKERS))
      throw new StorageError({ message: `refused key ${JSON.stringify(key)}` });
    return `${prefix}${key}`;
  };
  const markerOf = (uploadId: string) => {
    if (uploadId === "" || uploadId.includes("/"))
      throw new StorageError({ message: `refused upload id ${JSON.stringify(uploadId)}` });
    return bucket.file(`${prefix}${MARKERS}${uploadId}`);
  };
  const fileOf = (key: string): File => bucket.file(nameOf(key));
  const xmlUrl = (name: string, query: string) =>
    `${xmlBase}/${encodeURIComponent(config.bucket)}/${name.split("/").map(encodeURIComponent).join("/")}?${query}`;

  /** One XML API call, authenticated as the SDK's own calls are; every status is the caller's. */
  const xml = async (
    method: string,
    url: string,
    options: { body?: string; headers?: Record<string, string> } = {},
  ) => {
    const reply = await storage.authClient.request<string>({
      url,
      method: method as "GET",
      responseType: "text",
      validateStatus: () => true,
      ...(options.headers ? { headers: options.headers } : {}),
      ...(options.body !== undefined ? { data: options.body } : {}),
    });
    return {
      status: reply.status,
      body: typeof reply.data === "string" ? reply.data : String(reply.data ?? ""),
    };
  };

  // The bucket's upload id of each core upload, as its marker says; bounded, refilled on demand.
  const uploadIds = new Map<string, Marker>();
  const remember = (uploadId: string, marker: Marker) => {
    if (uploadIds.size >= UPLOAD_IDS_CACHED) uploadIds.clear();
    uploadIds.set(uploadId, marker);
  };
  const markerFor = async (ref: MultipartRef): Promise<Marker | undefined> => {
    const cached = uploadIds.get(ref.uploadId);
    if (cached) return cached;
    try {
      const [bytes] = await markerOf(ref.uploadId).download();
      const marker = JSON.parse(bytes.toString("utf8")) as Marker;
      remember(ref.uploadId, marker);
      return marker;
    } catch (e) {
      if (statusOf(e) === 404) return undefined;
      throw e;
    }
  };

  const abortGcs = async (ref: MultipartRef, marker: Marker) => {
    const reply = await xml(
      "DELETE",
      xmlUrl(nameOf(marker.key), `uploadId=${encodeURIComponent(marker.gcsUploadId)}`),
    );
    if (reply.status >= 300 && reply.status !== 404)
      throw unexpected(`aborting upload ${ref.uploadId}`, reply.status, reply.body);
  };

  /** Every part of the bucket's upload (pages of 1,000), or undefined when it is gone. */
  const gcsParts = async (ref: MultipartRef, marker: Marker) => {
    const parts: StoredPart[] = [];
    let after = 0;
    for (;;) {
      const query = `uploadId=${encodeURIComponent(marker.gcsUploadId)}&part-number-marker=${after}`;
      const reply = await xml("GET", xmlUrl(nameOf(marker.key), query));
      if (reply.status === 404) return undefined;
      if (reply.status !== 200)
        throw unexpected(`listing parts of upload ${ref.uploadId}`, reply.status, reply.body);
      for (const part of elements(reply.body, "Part"))
        parts.push({
          number: Number(text(part, "PartNumber")),
          size: Number(text(part, "Size")),
          etag: (text(part, "ETag") ?? "").replace(/^"(.*)"$/, "$1"),
          sha256: null,
        });
      if (text(reply.body, "IsTruncated") !== "true") break;
      after = Number(text(reply.body, "NextPartNumberMarker"));
    }
    return parts.sort((a, b) => a.number - b.number);
  };

  /** An object assembled by this upload, if there is one: what a repeated completion answers. */
  const assembledBy = async (ref: MultipartRef) => {
    try {
      const [meta] = await fileOf(ref.key).getMetadata();
      return meta.metadata?.[UPLOAD_META] === ref.uploadId
        ? { size: Number(meta.size), sha256: null }
        : undefined;
    } catch (e) {
      if (statusOf(e) === 404) return undefined;
      throw e;
    }
  };

  const describe = (key: string, meta: { size?: string | number; contentType?: string }): StoredObject => ({
    key,
    size: Number(meta.size ?? 0),
    contentType: meta.contentType ?? ASSEMBLED_TYPE,
  });

  const listed = async (keyPrefix: string) => {
    const [files] = await bucket.getFiles({ prefix: `${prefix}${keyPrefix}`, autoPaginate: true });
    return files
      .map((f) => ({ key: f.name.slice(prefix.length), file: f }))
      .filter(({ key }) => !key.startsWith(MARKERS))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  };

  /** Signed URLs of one object, all dated now; valid until `expiresAt` (ms). */
  const sign = async (
    name: string,
    method: "GET" | "PUT",
    expiresAt: number,
    requests: ReadonlyArray<{ query?: Record<string, string>; headers?: Record<string, string> }>,
  ) => {
    const now = Date.now();
    const expiresSeconds = Math.min(SEVEN_DAYS_S, Math.max(1, Math.floor((expiresAt - now) / 1000)));
    return signedUrls(
      { endpoint: xmlBase, bucket: config.bucket, name, method, now, expiresSeconds },
      requests,
      await signer(),
    );
  };

  const store: ObjectStore & { readonly partUploadUrls: NonNullable<ObjectStore["partUploadUrls"]> } = {
    createMultipart: (ref) =>
      attempt(`creating upload ${ref.uploadId}`, async () => {
        if (await markerFor(ref)) return;
        const reply = await xml("POST", xmlUrl(nameOf(ref.key), "uploads"), {
          headers: { "content-type": ASSEMBLED_TYPE, [`x-goog-meta-${UPLOAD_META}`]: ref.uploadId },
        });
        const gcsUploadId = text(reply.body, "UploadId");
        if (reply.status !== 200 || !gcsUploadId)
          throw unexpected(`creating upload ${ref.uploadId}`, reply.status, reply.body);
        const marker: Marker = { gcsUploadId, key: ref.key };
        try {
          await markerOf(ref.uploadId).save(JSON.stringify(marker), {
            resumable: false,
            contentType: "application/json",
            preconditionOpts: { ifGenerationMatch: 0 },
          });
        } catch (e) {
          // Created at the same time by another call: that one's upload stands, ours goes.
          if (statusOf(e) !== 412) throw e;
          await abortGcs(ref, marker);
          uploadIds.delete(ref.uploadId);
          return;
        }
        remember(ref.uploadId, marker);
      }),

    listParts: (ref) =>
      attempt(`listing parts of upload ${ref.uploadId}`, async () => {
        const marker = await markerFor(ref);
        return (marker && (await gcsParts(ref, marker))) ?? [];
      }),

    completeMultipart: (ref, numbers) =>
      attempt(`completing upload ${ref.uploadId}`, async () => {
        const marker = await markerFor(ref);
        if (marker) {
          // Gone from the bucket: completed before (the marker outlived a crash) or aborted.
          const stored = await gcsParts(ref, marker);
          if (stored) {
            const byNumber = new Map(stored.map((p) => [p.number, p]));
            const chosen = numbers.map((number) => {
              const part = byNumber.get(number);
              if (!part)
                throw new StorageError({ message: `part ${number} of upload ${ref.uploadId} is not stored` });
              return part;
            });
            const reply = await xml(
              "POST",
              xmlUrl(nameOf(ref.key), `uploadId=${encodeURIComponent(marker.gcsUploadId)}`),
              { body: completeBody(chosen), headers: { "content-type": "application/xml" } },
            );
            if (reply.status !== 200 && reply.status !== 404)
              throw unexpected(`completing upload ${ref.uploadId}`, reply.status, reply.body);
          }
          // The object is what answers from now on: the marker has done its work.
          await markerOf(ref.uploadId).delete({ ignoreNotFound: true });
          uploadIds.delete(ref.uploadId);
        }
        const done = await assembledBy(ref);
        if (!done) throw new StorageError({ message: `upload ${ref.uploadId} is not open` });
        return done;
      }),

    abortMultipart: (ref) =>
      attempt(`aborting upload ${ref.uploadId}`, async () => {
        const marker = await markerFor(ref);
        if (!marker) return;
        await abortGcs(ref, marker);
        await markerOf(ref.uploadId).delete({ ignoreNotFound: true });
        uploadIds.delete(ref.uploadId);
      }),

    partUploadUrls: (ref, parts, expiresAt) =>
      attempt(`signing part URLs of upload ${ref.uploadId}`, async () => {
        if (parts.length === 0) return [];
        const marker = await markerFor(ref);
        if (!marker) throw new StorageError({ message: `upload ${ref.uploadId} is not open` });
        return sign(
          nameOf(marker.key),
          "PUT",
          expiresAt,
          parts.map((part) => ({
            query: { partNumber: String(part.number), uploadId: marker.gcsUploadId },
            // Signed, so a body of any other size is refused by the bucket itself.
            headers: { "content-length": String(part.size) },
          })),
        );
      }),

    put: (key, body, contentType) =>
      attempt(`writing ${key}`, async () => {
        const file = fileOf(key);
        // Small files (playlists, posters) in one request; streams in one too, never buffered.
        if (body instanceof Uint8Array) {
          await file.save(await readAll(body), { resumable: false, contentType });
          return;
        }
        await pipeline(Readable.from(body), file.createWriteStream({ resumable: false, contentType }));
      }),

    get: (key, range) =>
      Effect.gen(function* () {
        if (range && !isValidRange(range))
          return yield* Effect.fail(
            new StorageError({ message: `invalid range ${range.start}-${range.end} of ${key}` }),
          );
        const name = yield* Effect.try({ try: () => nameOf(key), catch: storageError(`reading ${key}`) });
        const reply = yield* attempt(`reading ${key}`, () =>
          storage.authClient.request<Readable>({
            url: `${xmlBase}/storage/v1/b/${encodeURIComponent(config.bucket)}/o/${encodeURIComponent(name)}?alt=media`,
            method: "GET",
            responseType: "stream",
            validateStatus: () => true,
            ...(range ? { headers: { range: `bytes=${range.start}-${range.end}` } } : {}),
          }),
        );
        if (reply.status === 404) {
          reply.data.resume();
          return yield* Effect.fail(new NotFound({ message: `no object at ${key}` }));
        }
        if (reply.status !== 200 && reply.status !== 206) {
          reply.data.resume();
          return yield* Effect.fail(new StorageError({ message: `reading ${key}: ${reply.status}` }));
        }
        return reply.data as ByteStream;
      }),

    head: (key) =>
      attempt(`reading ${key}`, async () => {
        try {
          const [meta] = await fileOf(key).getMetadata();
          return Option.some(describe(key, meta));
        } catch (e) {
          if (statusOf(e) === 404) return Option.none();
          throw e;
        }
      }),

    deletePrefix: (keyPrefix) =>
      attempt(`deleting ${keyPrefix}`, async () => {
        const queue = (await listed(keyPrefix)).map(({ file }) => file);
        const worker = async () => {
          for (let file = queue.pop(); file; file = queue.pop()) await file.delete({ ignoreNotFound: true });
        };
        await Promise.all(Array.from({ length: DELETE_CONCURRENCY }, worker));
      }),
  };

  if (config.delivery === "redirect")
    return {
      ...store,
      deliveryUrl: (key, expiresAt) =>
        attempt(`signing a URL of ${key}`, async () => (await sign(nameOf(key), "GET", expiresAt, [{}]))[0]!),
    };
  return store;
};

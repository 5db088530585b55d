import { createPublicKey, generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { Bucket, partEtag } from "./bucket.js";
import { crc32cBase64 } from "./crc32c.js";
import { type GcsTestCall, handle, type ServerState } from "./server.js";

export type { GcsTestAuth, GcsTestCall } from "./server.js";

export interface GcsTestServerOptions {
  /** The one bucket the server holds; default `vod-test-bucket`. */
  readonly bucket?: string;
  /** Default 0: a free port. */
  readonly port?: number;
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** The server's clock in ms (signed-URL expiry, token lifetimes); default `Date.now`. */
  readonly now?: () => number;
  /** Every part but the last must be this big at complete; default 5 MiB, as GCS. */
  readonly minPartSize?: number;
  /** Largest part body accepted; default 5 GiB, as GCS. */
  readonly maxPartSize?: number;
  readonly projectId?: string;
}

/** A service-account JSON key, as the Google Cloud console downloads it. */
export interface ServiceAccountKeyFile {
  readonly type: "service_account";
  readonly project_id: string;
  readonly private_key_id: string;
  readonly private_key: string;
  readonly client_email: string;
  readonly client_id: string;
  readonly auth_uri: string;
  readonly token_uri: string;
  readonly universe_domain: "googleapis.com";
}

export interface GcsTestObject {
  readonly name: string;
  readonly size: number;
  readonly contentType: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly generation: string;
  /** Base64, as GCS reports it. */
  readonly crc32c: string;
  /** Base64; absent for objects assembled from parts (multipart complete, compose). */
  readonly md5Hash?: string;
  readonly componentCount?: number;
}

export interface GcsTestUpload {
  readonly uploadId: string;
  readonly name: string;
  readonly contentType: string;
  /** The `x-goog-meta-*` headers of the initiate call, without the prefix. */
  readonly metadata: Readonly<Record<string, string>>;
  readonly parts: ReadonlyArray<{ readonly number: number; readonly size: number; readonly etag: string }>;
}

/** Reads and counts what the bucket really holds, around the protocol. */
export interface GcsTestBackdoor {
  /** Objects whose name starts with `prefix` (default all), by name ascending. */
  objects(prefix?: string): Promise<ReadonlyArray<GcsTestObject>>;
  /** The object's bytes, or undefined when there is none. */
  read(name: string): Promise<Buffer | undefined>;
  /** Multipart uploads in progress (initiated, not completed or aborted). */
  uploads(): ReadonlyArray<GcsTestUpload>;
  /** A stored part's bytes, or undefined. */
  readPart(uploadId: string, number: number): Promise<Buffer | undefined>;
  /** Every stored part body of the upload, by number ascending; [] once completed or aborted. */
  partBodies(uploadId: string): Promise<ReadonlyArray<{ readonly number: number; readonly bytes: Buffer }>>;
  /** Puts an object directly (fixtures), replacing any at `name`. */
  write(name: string, bytes: Uint8Array, contentType?: string): Promise<void>;
  /** Resumable upload sessions not yet finished. */
  resumableSessions(): number;
  /** Byte files on disk: objects' and parts' segments. Zero leaks means this drops back. */
  files(): number;
  /** The requests served so far (the last 2000), oldest first. */
  calls(): ReadonlyArray<GcsTestCall>;
}

export interface GcsTestServer {
  /** `http://127.0.0.1:<port>`: the value for the SDK's `apiEndpoint`. */
  readonly endpoint: string;
  readonly bucket: string;
  /** Path of the service-account key file the server accepts (GOOGLE_APPLICATION_CREDENTIALS). */
  readonly credentialsPath: string;
  readonly keyFile: ServiceAccountKeyFile;
  /** An HMAC key of the service account, as `gcloud storage hmac create` gives one. */
  readonly hmacKey: { readonly accessId: string; readonly secret: string };
  readonly backdoor: GcsTestBackdoor;
  /** Stops listening and deletes the key file and every stored byte. Safe to call twice. */
  close(): Promise<void>;
}

const listen = (server: Server, port: number, host: string): Promise<AddressInfo> =>
  new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve(server.address() as AddressInfo);
    });
  });

/**
 * A small, strict GCS-protocol server: the JSON API object calls and the XML API multipart upload
 * that the GCS adapter makes, V4 signed URLs checked with the service account's public key or its
 * HMAC key (`hmacKey`), bearer
 * tokens required. A call it does not implement answers 501 naming the call.
 */
export const createGcsTestServer = async (options: GcsTestServerOptions = {}): Promise<GcsTestServer> => {
  const bucketName = options.bucket ?? "vod-test-bucket";
  const projectId = options.projectId ?? "vod-test-project";
  const dir = await mkdtemp(join(tmpdir(), "gcs-test-server-"));
  const dataDir = join(dir, "objects");
  await mkdir(dataDir);
  const bucket = new Bucket(bucketName, dataDir);
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const clientEmail = `gcs-test-server@${projectId}.iam.gserviceaccount.com`;
  const privateKeyId = randomBytes(20).toString("hex");
  let endpoint = "";
  const hmacKey = {
    accessId: `GOOG1E${randomBytes(27).toString("hex").toUpperCase()}`.slice(0, 61),
    secret: randomBytes(30).toString("base64"),
  };
  const state: ServerState = {
    bucket,
    clientEmail,
    privateKeyId,
    publicKey: createPublicKey(publicKey.export({ type: "spki", format: "pem" })),
    hmacKeys: new Map([[hmacKey.accessId, hmacKey.secret]]),
    tokenUri: () => `${endpoint}/token`,
    now: options.now ?? Date.now,
    minPartSize: options.minPartSize ?? 5 * 1024 * 1024,
    maxPartSize: options.maxPartSize ?? 5 * 1024 ** 3,
    tokens: new Map(),
    calls: [],
  };
  const server = createServer((req, res) => {
    void handle(state, req, res);
  });
  // Part bodies of hundreds of MiB take longer than node's default request timeout on a busy machine.
  server.requestTimeout = 0;
  const address = await listen(server, options.port ?? 0, options.host ?? "127.0.0.1");
  endpoint = `http://${address.address}:${address.port}`;
  const keyFile: ServiceAccountKeyFile = {
    type: "service_account",
    project_id: projectId,
    private_key_id: privateKeyId,
    private_key: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    client_email: clientEmail,
    client_id: String(BigInt(`0x${randomBytes(8).toString("hex")}`)),
    auth_uri: "https://accounts.google.com/o/oauth2/auth",
    token_uri: `${endpoint}/token`,
    universe_domain: "googleapis.com",
  };
  const credentialsPath = join(dir, "service-account.json");
  await writeFile(credentialsPath, JSON.stringify(keyFile, null, 2), { mode: 0o600 });

  const describe = async (name: string): Promise<GcsTestObject> => {
    const object = bucket.objects.get(name)!;
    return {
      name: object.name,
      size: object.size,
      contentType: object.contentType,
      metadata: object.metadata,
      generation: object.generation,
      crc32c: crc32cBase64(await bucket.crc32c(object)),
      ...(object.md5 ? { md5Hash: object.md5.toString("base64") } : {}),
      ...(object.componentCount !== undefined ? { componentCount: object.componentCount } : {}),
    };
  };

  const backdoor: GcsTestBackdoor = {
    objects: async (prefix = "") => {
      const names = [...bucket.objects.keys()]
        .filter((name) => name.startsWith(prefix))
        .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      const described: GcsTestObject[] = [];
      for (const name of names) described.push(await describe(name));
      return described;
    },
    read: async (name) => {
      const object = bucket.objects.get(name);
      return object ? bucket.readAll(object) : undefined;
    },
    uploads: () =>
      [...bucket.uploads.values()].map((upload) => ({
        uploadId: upload.id,
        name: upload.name,
        contentType: upload.contentType,
        metadata: upload.metadata,
        parts: [...upload.parts.values()]
          .sort((a, b) => a.number - b.number)
          .map((part) => ({ number: part.number, size: part.size, etag: partEtag(part) })),
      })),
    readPart: async (uploadId, number) => {
      const part = bucket.uploads.get(uploadId)?.parts.get(number);
      return part ? bucket.readAll({ segments: [part.segment], size: part.size }) : undefined;
    },
    partBodies: async (uploadId) => {
      const upload = bucket.uploads.get(uploadId);
      if (!upload) return [];
      const parts = [...upload.parts.values()].sort((a, b) => a.number - b.number);
      const bodies: Array<{ number: number; bytes: Buffer }> = [];
      for (const part of parts) {
        bodies.push({
          number: part.number,
          bytes: await bucket.readAll({ segments: [part.segment], size: part.size }),
        });
      }
      return bodies;
    },
    write: async (name, bytes, contentType = "application/octet-stream") => {
      const written = await bucket.write(Readable.from([Buffer.from(bytes)]));
      await bucket.put({
        name,
        size: written.segment.size,
        contentType,
        metadata: {},
        generation: bucket.nextGeneration(),
        md5: written.md5,
        segments: [written.segment],
        created: new Date(state.now()),
      });
    },
    resumableSessions: () => bucket.sessions.size,
    files: () => bucket.diskUsage().files,
    calls: () => [...state.calls],
  };

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await bucket.close();
      await rm(dir, { recursive: true, force: true });
    })();
    return closing;
  };

  return { endpoint, bucket: bucketName, credentialsPath, keyFile, hmacKey, backdoor, close };
};

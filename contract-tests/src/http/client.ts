import { createHash, randomBytes, randomInt, randomUUID } from "node:crypto";
import type { TelemetryEvent } from "@vod/core";
import type { FakeGoogle, SmtpTestServer } from "@vod/test-services";
import { afterAll, beforeAll, expect } from "vitest";
import type { StorageBackdoor } from "../backdoor.js";
import type { ObjectStoreBackdoor } from "../object-store.js";
import { hostUnderTest } from "./exchanges.js";

/** The clock the host under test reads: it moves only when a test moves it. */
export interface ManualClockLike {
  now(): number;
  advance(ms: number): void;
}

/** A running host over one adapter set, with a backdoor into the storage it was given. */
export interface HttpSubject {
  /** Where the API answers, without a trailing slash. */
  readonly baseUrl: string;
  readonly backdoor: StorageBackdoor;
  /** What the host's object store holds (uploaded parts, assembled origins), read beside it. */
  readonly objects: ObjectStoreBackdoor;
  /** The telemetry events the host's sink stored for a playback session, in the order stored. */
  telemetryEvents(sessionId: string): Promise<ReadonlyArray<TelemetryEvent>>;
  readonly clock: ManualClockLike;
  /** The identity provider the host trusts (its client id and certificate URL). */
  readonly google: FakeGoogle;
  /** The SMTP server the host sends account mail to (VOD_SMTP_URL). */
  readonly mail: SmtpTestServer;
  /**
   * The host's object store, where it differs from the media app's default: a bucket signs its
   * own part URLs (refusing with its own 4xx, not the spec's JSON) and cannot hash what it
   * assembles (a declared sha256 is then checked by processing, not at completion).
   */
  readonly objectStore?: { readonly signsPartUrls: boolean; readonly checksAtCompletion: boolean };
  cleanup(): Promise<void>;
}

/**
 * Starts a fresh host; `env` adds environment variables (e.g. low rate limits) to its config.
 * A host runs no processing job unless `env` sets VOD_WORKER_CONCURRENCY: completed uploads stay
 * queued, for the backdoor to read. With a worker it processes with a fake media processor (a
 * tiny HLS set, encrypted assets named by their key id), so that assets become ready in moments.
 */
export type MakeHttpSubject = (env?: Record<string, string>) => Promise<HttpSubject>;

// ---------------------------------------------------------------------------------------------
// Wire shapes, as a client sees them.

export interface WireUser {
  id: string;
  tenant_id: string;
  email: string;
  email_verified: boolean;
  name: string | null;
  role: "owner" | "admin" | "member";
  created_at: number;
}

export interface WireTenant {
  id: string;
  slug: string;
  name: string;
  plan: string;
  status: string;
  created_at: number;
}

export interface WireTokens {
  access_token: string;
  refresh_token: string;
  token_type: string;
  expires_in: number;
}

export interface SignedUp extends WireTokens {
  user: WireUser;
  tenant: WireTenant;
}

export interface SignedIn extends WireTokens {
  user: WireUser;
}

export interface GoogleSignedIn extends SignedIn {
  created: boolean;
}

export interface MeBody {
  auth: { kind: string; role?: string; key_id?: string; scopes?: string[] };
  user?: WireUser;
  tenant: WireTenant;
}

export interface CreatedApiKey {
  id: string;
  name: string;
  prefix: string;
  scopes: string[];
  created_at: number;
  key: string;
}

export interface ListedApiKey {
  id: string;
  name: string;
  prefix: string;
  scopes: string[];
  last_used_at: number | null;
  expires_at: number | null;
  revoked_at: number | null;
  created_at: number;
}

export interface WireAsset {
  id: string;
  title: string;
  status: string;
  failure_code: string | null;
  source_width: number | null;
  source_height: number | null;
  source_fps: number | null;
  source_codec: string | null;
  source_duration_ms: number | null;
  source_bitrate_kbps: number | null;
  origin_size_bytes: number | null;
  checksum_sha256: string | null;
  drm_enabled: boolean;
  visibility: string;
  published_at: number | null;
  renditions: WireRendition[];
  ready_at: number | null;
  mp4_support: "none" | "standard";
  static_renditions: WireStaticRendition[];
  created_at: number;
}

export interface WireStaticRendition {
  name: "high.mp4" | "low.mp4" | "audio.m4a";
  status: "preparing" | "ready" | "failed";
  size_bytes: number | null;
}

export interface WireRendition {
  name: string;
  width: number;
  height: number;
  bitrate_kbps: number;
  status: "pending" | "ready" | "failed";
}

export interface AssetPage {
  data: WireAsset[];
  next_cursor: string | null;
}

export interface WirePartUrl {
  number: number;
  url: string;
}

/** The start response's upload: the session and one URL per part, nothing else. */
export interface StartedUpload {
  id: string;
  asset_id: string;
  part_size: number;
  part_count: number;
  size_bytes: number;
  expires_at: number;
  parts: WirePartUrl[];
}

export type WireUploadStatus = "created" | "completed" | "aborted" | "expired";

/** An upload session as the complete response shows it. */
export interface WireUploadSession {
  id: string;
  asset_id: string;
  status: WireUploadStatus;
  part_size: number;
  part_count: number;
  size_bytes: number;
  expires_at: number;
  created_at: number;
  completed_at: number | null;
}

export interface WireUploadedPart {
  number: number;
  size: number;
  etag: string;
}

/** The resume response's upload. */
export interface ResumedUpload extends WireUploadSession {
  uploaded_parts: WireUploadedPart[];
  missing_part_urls: WirePartUrl[];
}

export interface CompletedUpload {
  upload: WireUploadSession;
  asset: WireAsset;
}

export interface FieldIssue {
  path: Array<string | number>;
  message: string;
}

export interface ErrorBody {
  error: string;
  code: string;
  message: string;
  details?: { fields?: FieldIssue[]; retry_after?: number; [key: string]: unknown };
}

// ---------------------------------------------------------------------------------------------
// Requests.

export interface RequestOptions {
  /** Sent as JSON with Content-Type application/json. */
  readonly json?: unknown;
  /** Sent as it is, with `contentType`. */
  readonly raw?: string;
  readonly contentType?: string;
  readonly bearer?: string;
  readonly apiKey?: string;
  /** Sent as X-Forwarded-For (the hosts under test trust one proxy hop: this is the client IP). */
  readonly ip?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

export interface Reply<T> {
  readonly status: number;
  readonly headers: Headers;
  /** The parsed JSON body; undefined when the body is empty. */
  readonly body: T;
  readonly text: string;
}

/** A credential for the authenticated helpers: a user's access token or an API key. */
export type Credential = { readonly bearer: string } | { readonly apiKey: string };

export const httpClient = (baseUrl: string) => {
  const request = async <T = ErrorBody>(
    method: string,
    path: string,
    options: RequestOptions = {},
  ): Promise<Reply<T>> => {
    const headers: Record<string, string> = { accept: "application/json", ...options.headers };
    let body: string | undefined;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      headers["content-type"] = "application/json";
    }
    if (options.raw !== undefined) {
      body = options.raw;
      if (options.contentType !== undefined) headers["content-type"] = options.contentType;
    }
    if (options.bearer !== undefined) headers.authorization = `Bearer ${options.bearer}`;
    if (options.apiKey !== undefined) headers["x-api-key"] = options.apiKey;
    if (options.ip !== undefined) headers["x-forwarded-for"] = options.ip;
    const response = await fetch(`${baseUrl}${path}`, { method, headers, body });
    const text = await response.text();
    let parsed: unknown;
    if (text.length > 0) {
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new Error(
          `${method} ${path} answered ${response.status} with a body that is not JSON: ${text}`,
        );
      }
    }
    return { status: response.status, headers: response.headers, body: parsed as T, text };
  };
  return {
    request,
    get: <T = ErrorBody>(path: string, options?: RequestOptions) => request<T>("GET", path, options),
    post: <T = ErrorBody>(path: string, options?: RequestOptions) => request<T>("POST", path, options),
    del: <T = ErrorBody>(path: string, options?: RequestOptions) => request<T>("DELETE", path, options),
  };
};

export type HttpClient = ReturnType<typeof httpClient>;

/** Fails with the status and body when the reply is not the expected status (clear fixture errors). */
export const expectStatus = <T>(reply: Reply<T>, status: number): Reply<T> => {
  if (reply.status !== status)
    throw new Error(`expected HTTP ${status}, got ${reply.status}: ${reply.text || "(empty body)"}`);
  return reply;
};

/** An error reply of the spec's part 7: status, `error` equal to `code`, a message, JSON. */
export const expectError = (reply: Reply<unknown>, status: number, code: string): ErrorBody => {
  const body = reply.body as ErrorBody | undefined;
  expect({ status: reply.status, code: body?.code }).toEqual({ status, code });
  if (body === undefined) throw new Error(`HTTP ${status} came without a body`);
  expect(reply.headers.get("content-type")).toMatch(/^application\/json\b/);
  expect(body.error).toBe(code);
  expect(typeof body.message).toBe("string");
  expect(body.message.length).toBeGreaterThan(0);
  const keys = Object.keys(body).sort();
  expect(keys).toEqual(
    body.details === undefined ? ["code", "error", "message"] : ["code", "details", "error", "message"],
  );
  if (body.details !== undefined) {
    expect(typeof body.details).toBe("object");
    expect(body.details).not.toBeNull();
    expect(Array.isArray(body.details)).toBe(false);
  }
  return body;
};

/** A 400 invalid_request whose details.fields name exactly `paths` (in any order). */
export const expectInvalidFields = (
  reply: Reply<unknown>,
  paths: ReadonlyArray<ReadonlyArray<string | number>>,
): FieldIssue[] => {
  const body = expectError(reply, 400, "invalid_request");
  const fields = body.details?.fields;
  expect(Array.isArray(fields)).toBe(true);
  for (const field of fields ?? []) {
    expect(Array.isArray(field.path)).toBe(true);
    expect(typeof field.message).toBe("string");
  }
  expect((fields ?? []).map((f) => f.path)).toEqual(expect.arrayContaining(paths.map((p) => [...p])));
  expect(fields).toHaveLength(paths.length);
  return fields ?? [];
};

/** 204 with nothing in the body. */
export const expectNoContent = (reply: Reply<unknown>): void => {
  expect(reply.status).toBe(204);
  expect(reply.text).toBe("");
};

/** 401 unauthorized, with a Bearer challenge. */
export const expectUnauthorized = (reply: Reply<unknown>): ErrorBody => {
  const body = expectError(reply, 401, "unauthorized");
  expect(reply.headers.get("www-authenticate")).toMatch(/^Bearer\b/);
  return body;
};

// ---------------------------------------------------------------------------------------------
// Fixtures: every test makes its own.

/** A private address no other test uses, for the per-IP auth bucket. */
export const randomIp = (): string => `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}`;

export const uniqueEmail = (): string => `u-${randomUUID()}@example.com`;

export const sha256Hex = (value: string): string => createHash("sha256").update(value).digest("hex");

export const DEFAULT_PASSWORD = "correct horse battery staple";

/** The claims of an access token (a compact JWT), read without verifying it. */
export const accessClaims = (token: string): Record<string, unknown> => {
  const payload = token.split(".")[1];
  if (payload === undefined) throw new Error(`not a compact JWT: ${token}`);
  return JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as Record<string, unknown>;
};

/** The refresh session (token family) an access token belongs to. */
export const sessionIdOf = (accessToken: string): string => {
  const sid = accessClaims(accessToken).sid;
  if (typeof sid !== "string") throw new Error("access token carries no session id (sid)");
  return sid;
};

export interface Account extends SignedUp {
  readonly email: string;
  readonly password: string;
}

export const credentialOptions = (credential: Credential): RequestOptions =>
  "bearer" in credential ? { bearer: credential.bearer } : { apiKey: credential.apiKey };

export const signUp = async (
  api: HttpClient,
  input: { email?: string; password?: string; name?: string; tenantName?: string } = {},
): Promise<Account> => {
  const email = input.email ?? uniqueEmail();
  const password = input.password ?? DEFAULT_PASSWORD;
  const reply = expectStatus(
    await api.post<SignedUp>("/v1/auth/signup", {
      json: { ...input, email, password },
      ip: randomIp(),
    }),
    201,
  );
  return { ...reply.body, email, password };
};

export const logIn = async (api: HttpClient, email: string, password: string): Promise<SignedIn> =>
  expectStatus(await api.post<SignedIn>("/v1/auth/login", { json: { email, password }, ip: randomIp() }), 200)
    .body;

export const createApiKey = async (
  api: HttpClient,
  credential: Credential,
  scopes: ReadonlyArray<string>,
  name = `key-${randomUUID().slice(0, 8)}`,
): Promise<CreatedApiKey> =>
  expectStatus(
    await api.post<CreatedApiKey>("/v1/api-keys", {
      ...credentialOptions(credential),
      json: { name, scopes },
    }),
    201,
  ).body;

export const createAsset = async (
  api: HttpClient,
  credential: Credential,
  input: { title?: string; drm?: boolean } = {},
): Promise<WireAsset> =>
  expectStatus(
    await api.post<{ asset: WireAsset }>("/v1/assets", { ...credentialOptions(credential), json: input }),
    201,
  ).body.asset;

/** POST /v1/uploads, expecting 201: the started session with its part URLs. */
export const startUpload = async (
  api: HttpClient,
  credential: Credential,
  input: { asset_id: string; size_bytes: number; sha256?: string },
): Promise<StartedUpload> =>
  expectStatus(
    await api.post<{ upload: StartedUpload }>("/v1/uploads", {
      ...credentialOptions(credential),
      json: input,
    }),
    201,
  ).body.upload;

export const KiB = 1024;
export const MiB = 1024 * KiB;

/** `size` random bytes (incompressible, and different in every test). */
export const randomPayload = (size: number): Uint8Array => new Uint8Array(randomBytes(size));

export const sha256OfBytes = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex");

/** Large byte arrays compare by size and hash: deep equality over megabytes takes seconds. */
export const digestOf = (
  bytes: Uint8Array | undefined,
): { readonly size: number; readonly sha256: string } | undefined =>
  bytes && { size: bytes.byteLength, sha256: sha256OfBytes(bytes) };

/** `file` cut into parts of `partSize` bytes (the last one shorter), numbered from 1. */
export const partsOf = (
  file: Uint8Array,
  partSize: number,
): Array<{ readonly number: number; readonly bytes: Uint8Array }> =>
  Array.from({ length: Math.ceil(file.byteLength / partSize) }, (_, i) => ({
    number: i + 1,
    bytes: file.subarray(i * partSize, (i + 1) * partSize),
  }));

/**
 * A raw request to an absolute URL (a part upload URL, as the service gave it): the body as
 * bytes, the reply's JSON parsed when it is JSON.
 */
export const sendTo = async <T = ErrorBody | undefined>(
  method: string,
  url: string,
  options: { readonly body?: Uint8Array; readonly headers?: Readonly<Record<string, string>> } = {},
): Promise<Reply<T>> => {
  const response = await fetch(url, { method, headers: { ...options.headers }, body: options.body });
  const text = await response.text();
  const json = /^application\/json\b/.test(response.headers.get("content-type") ?? "");
  let parsed: unknown;
  if (text.length > 0 && json) parsed = JSON.parse(text);
  return { status: response.status, headers: response.headers, body: parsed as T, text };
};

/** PUT of one part's bytes on its upload URL. */
export const putPart = (
  url: string,
  bytes: Uint8Array,
  headers: Readonly<Record<string, string>> = {},
): Promise<Reply<ErrorBody | undefined>> =>
  sendTo("PUT", url, { body: bytes, headers: { "content-type": "application/octet-stream", ...headers } });

/** The ETag header of a successful part PUT, checked to be a quoted etag, and its value unquoted. */
export const etagOfReply = (reply: Reply<unknown>): { readonly quoted: string; readonly etag: string } => {
  const quoted = reply.headers.get("etag");
  expect(quoted).toMatch(/^"[^"\s]+"$/);
  return { quoted: quoted ?? "", etag: (quoted ?? "").slice(1, -1) };
};

// ---------------------------------------------------------------------------------------------
// Hosts.

export interface Harness extends HttpSubject {
  readonly api: HttpClient;
}

const harness = (subject: HttpSubject): Harness => {
  hostUnderTest(subject.baseUrl);
  return { ...subject, api: httpClient(subject.baseUrl) };
};

/** One host for the enclosing describe block, started before its first test. */
export const sharedSubject = (
  makeSubject: MakeHttpSubject,
  env?: Record<string, string>,
): (() => Harness) => {
  let current: Harness | undefined;
  beforeAll(async () => {
    current = harness(await makeSubject(env));
  });
  afterAll(async () => {
    await current?.cleanup();
  });
  return () => {
    if (current === undefined) throw new Error("the host of this describe block has not started");
    return current;
  };
};

/** A host of the test's own (special environment), cleaned up however the test ends. */
export const withSubject = async <A>(
  makeSubject: MakeHttpSubject,
  env: Record<string, string>,
  run: (h: Harness) => Promise<A>,
): Promise<A> => {
  const subject = await makeSubject(env);
  try {
    return await run(harness(subject));
  } finally {
    await subject.cleanup();
  }
};

export const SECOND = 1_000;
export const MINUTE = 60 * SECOND;
export const DAY = 24 * 60 * MINUTE;

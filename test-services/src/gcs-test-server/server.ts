import { createHash, type KeyObject, randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { BodyTooLarge, type Bucket, partEtag, type ResumableSession, type StoredObject } from "./bucket.js";
import { crc32cBase64 } from "./crc32c.js";
import { boundaryOf, MalformedMultipart, readRelated } from "./multipart-related.js";
import {
  isV4Param,
  parseQuery,
  type QueryPairs,
  type V4Refusal,
  verifyRs256Jwt,
  verifyV4,
} from "./signing.js";
import { MalformedXml, parseCompleteBody, type XmlElement, xmlDocument, xmlError } from "./xml.js";

/** What the request handler needs from the server around it. */
export interface ServerState {
  readonly bucket: Bucket;
  readonly clientEmail: string;
  readonly privateKeyId: string;
  readonly publicKey: KeyObject;
  /** HMAC keys of the service account: secrets by access id. */
  readonly hmacKeys: ReadonlyMap<string, string>;
  readonly tokenUri: () => string;
  readonly now: () => number;
  readonly minPartSize: number;
  readonly maxPartSize: number;
  /** Access tokens handed out by POST /token, with their expiry (ms). */
  readonly tokens: Map<string, number>;
  readonly calls: GcsTestCall[];
}

export type GcsTestAuth = "bearer" | "signed" | "session" | "none";

/** One request as the server saw it, for tests that check how the adapter talked to the bucket. */
export interface GcsTestCall {
  readonly method: string;
  readonly path: string;
  readonly query: string;
  readonly auth: GcsTestAuth;
  readonly status: number;
}

const MAX_CALLS = 2000;
const MAX_SMALL_BODY = 1024 * 1024;
const MAX_OBJECT_SIZE = 5 * 1024 ** 4;
const STORAGE_SCOPES = [
  "https://www.googleapis.com/auth/devstorage.full_control",
  "https://www.googleapis.com/auth/devstorage.read_write",
  "https://www.googleapis.com/auth/devstorage.read_only",
  "https://www.googleapis.com/auth/cloud-platform",
];

class Refused extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
    readonly contentType: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(body);
  }
}

const jsonRefusal = (status: number, reason: string, message: string, extra: Record<string, string> = {}) =>
  new Refused(
    status,
    JSON.stringify({
      error: { code: status, message, errors: [{ message, domain: "global", reason, ...extra }] },
    }),
    "application/json; charset=UTF-8",
  );

const xmlRefusal = (status: number, code: string, message: string, extra: ReadonlyArray<XmlElement> = []) =>
  new Refused(status, xmlError(code, message, extra), "application/xml; charset=UTF-8");

const notImplemented = (style: "json" | "xml", what: string) =>
  style === "json"
    ? jsonRefusal(501, "notImplemented", `gcs-test-server does not implement ${what}`)
    : xmlRefusal(501, "NotImplemented", `gcs-test-server does not implement ${what}`);

interface Call {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly method: string;
  readonly rawPath: string;
  readonly rawQuery: string;
  readonly query: QueryPairs;
  auth: GcsTestAuth;
}

const param = (call: Call, name: string): string | undefined => call.query.find(([key]) => key === name)?.[1];

/** Refuses (501) any query parameter outside `allowed`: the adapter must not lean on one unchecked. */
const onlyParams = (call: Call, style: "json" | "xml", allowed: ReadonlyArray<string>) => {
  const unknown = call.query
    .map(([name]) => name)
    .filter((name) => !allowed.includes(name) && !(style === "xml" && isV4Param(name)));
  if (unknown.length > 0) {
    throw notImplemented(
      style,
      `${call.method} ${call.rawPath} with query parameter(s) ${unknown.join(", ")}`,
    );
  }
};

const JSON_COMMON = ["alt", "prettyPrint", "projection", "userProject", "fields"];

const readSmallBody = async (req: IncomingMessage, style: "json" | "xml"): Promise<Buffer> => {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_SMALL_BODY) {
      throw style === "json"
        ? jsonRefusal(413, "uploadTooLarge", "Request body larger than this call accepts.")
        : xmlRefusal(413, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed object size.");
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
};

const isoTime = (date: Date) => date.toISOString();

const encodeObjectName = (name: string) => encodeURIComponent(name);

const objectResource = (state: ServerState, origin: string, object: StoredObject, crc32c: number) => {
  const bucket = state.bucket.name;
  const path = `${bucket}/o/${encodeObjectName(object.name)}`;
  return {
    kind: "storage#object",
    id: `${bucket}/${object.name}/${object.generation}`,
    selfLink: `${origin}/storage/v1/b/${path}`,
    mediaLink: `${origin}/download/storage/v1/b/${path}?generation=${object.generation}&alt=media`,
    name: object.name,
    bucket,
    generation: object.generation,
    metageneration: "1",
    contentType: object.contentType,
    storageClass: "STANDARD",
    size: String(object.size),
    ...(object.md5 ? { md5Hash: object.md5.toString("base64") } : {}),
    crc32c: crc32cBase64(crc32c),
    etag: Buffer.from(object.generation).toString("base64"),
    timeCreated: isoTime(object.created),
    updated: isoTime(object.created),
    timeStorageClassUpdated: isoTime(object.created),
    ...(Object.keys(object.metadata).length > 0 ? { metadata: object.metadata } : {}),
    ...(object.componentCount !== undefined ? { componentCount: object.componentCount } : {}),
  };
};

/** The object's JSON resource, with its CRC32C (computed now if it never was). */
const resourceOf = async (state: ServerState, call: Call, object: StoredObject) =>
  objectResource(state, origin(call), object, await state.bucket.crc32c(object));

const xGoogHash = (md5: Buffer | undefined, crc32c: number | undefined) =>
  [
    ...(crc32c !== undefined ? [`crc32c=${crc32cBase64(crc32c)}`] : []),
    ...(md5 ? [`md5=${md5.toString("base64")}`] : []),
  ].join(",");

const objectEtag = (object: StoredObject) =>
  object.md5 ? `"${object.md5.toString("hex")}"` : `"${object.generation}-${object.componentCount ?? 1}"`;

/** `bytes=a-b`, `bytes=a-`, `bytes=-n` against `size`: the inclusive range, "unsatisfiable", or none. */
const parseRange = (
  header: string | undefined,
  size: number,
): { start: number; end: number } | "unsatisfiable" | undefined => {
  if (header === undefined) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) return undefined;
  if (m[1] === "") {
    const suffix = Number(m[2]);
    if (suffix === 0 || size === 0) return "unsatisfiable";
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (m[2] !== "" && Number(m[2]) < start) return undefined;
  if (start >= size) return "unsatisfiable";
  return { start, end };
};

const headerText = (req: IncomingMessage, name: string): string | undefined => {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(",") : value;
};

/** `x-goog-meta-*` request headers, as the object's custom metadata. */
const metaHeaders = (req: IncomingMessage): Record<string, string> => {
  const metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (name.startsWith("x-goog-meta-") && value !== undefined) {
      metadata[name.slice("x-goog-meta-".length)] = Array.isArray(value) ? value.join(",") : value;
    }
  }
  return metadata;
};

/**
 * Checks the digests a client declared (`Content-MD5`, `x-goog-hash`, or the metadata's `md5Hash`
 * and `crc32c`) against the bytes that arrived; the CRC32C is computed only when one was declared.
 */
const declaredDigestsMatch = async (
  req: IncomingMessage,
  md5: Buffer,
  crc32c: () => Promise<number>,
  fields: { readonly md5Hash?: string; readonly crc32c?: string } = {},
): Promise<boolean> => {
  const declared: Array<["md5" | "crc32c", string]> = [];
  const contentMd5 = headerText(req, "content-md5");
  if (contentMd5 !== undefined) declared.push(["md5", contentMd5]);
  if (fields.md5Hash !== undefined) declared.push(["md5", fields.md5Hash]);
  if (fields.crc32c !== undefined) declared.push(["crc32c", fields.crc32c]);
  for (const pair of (headerText(req, "x-goog-hash") ?? "").split(",")) {
    const at = pair.indexOf("=");
    const kind = pair.slice(0, at).trim();
    if (at > 0 && (kind === "md5" || kind === "crc32c")) declared.push([kind, pair.slice(at + 1).trim()]);
  }
  for (const [kind, value] of declared) {
    const actual = kind === "md5" ? md5.toString("base64") : crc32cBase64(await crc32c());
    if (value !== actual) return false;
  }
  return true;
};

// ---------------------------------------------------------------- authentication

type BearerCheck = "ok" | "missing" | "invalid";

const checkBearer = (state: ServerState, req: IncomingMessage): BearerCheck => {
  const header = headerText(req, "authorization");
  if (header === undefined) return "missing";
  const m = /^Bearer\s+(\S+)$/i.exec(header);
  if (!m) return "invalid";
  const token = m[1]!;
  const now = state.now();
  const expiry = state.tokens.get(token);
  if (expiry !== undefined) return expiry > now ? "ok" : "invalid";
  // A self-signed JWT (google-auth-library's JWTAccess): the service account signs its own bearer.
  const jwt = verifyRs256Jwt(token, state.publicKey);
  if (!jwt) return "invalid";
  const { header: h, claims } = jwt;
  const nowSeconds = now / 1000;
  const scopes = typeof claims.scope === "string" ? claims.scope.split(" ") : [];
  const ok =
    claims.iss === state.clientEmail &&
    claims.sub === state.clientEmail &&
    (h.kid === undefined || h.kid === state.privateKeyId) &&
    typeof claims.exp === "number" &&
    typeof claims.iat === "number" &&
    claims.exp > nowSeconds &&
    claims.iat <= nowSeconds + 300 &&
    claims.exp - claims.iat <= 3600 &&
    (scopes.some((scope) => STORAGE_SCOPES.includes(scope)) || typeof claims.aud === "string");
  return ok ? "ok" : "invalid";
};

const requireBearerJson = (state: ServerState, call: Call, permission: string) => {
  const check = checkBearer(state, call.req);
  if (check === "ok") {
    call.auth = "bearer";
    return;
  }
  const where = { locationType: "header", location: "Authorization" };
  throw check === "missing"
    ? jsonRefusal(
        401,
        "required",
        `Anonymous caller does not have ${permission} access to the Google Cloud Storage bucket. Permission '${permission}' denied on resource (or it may not exist).`,
        where,
      )
    : jsonRefusal(401, "authError", "Invalid Credentials", where);
};

const v4Refusal = (refusal: V4Refusal): Refused => {
  switch (refusal.kind) {
    case "malformed":
      return xmlRefusal(400, "MalformedSecurityHeader", "Your request has a malformed header.", [
        ["ParameterName", refusal.parameter],
        ["Details", refusal.details],
      ]);
    case "expired":
      return xmlRefusal(400, "ExpiredToken", "Invalid argument.", [
        [
          "Details",
          `The provided token has expired. Request signature expired at: ${refusal.expiredAt.toISOString()}`,
        ],
      ]);
    case "not_yet_valid":
      return xmlRefusal(400, "ExpiredToken", "Invalid argument.", [
        ["Details", `Request is not yet valid. It becomes valid at: ${refusal.validFrom.toISOString()}`],
      ]);
    case "mismatch":
      return xmlRefusal(403, "SignatureDoesNotMatch", "Access denied.", [
        [
          "Details",
          "The request signature we calculated does not match the signature you provided. Check your Google secret key and signing method.",
        ],
        ["StringToSign", refusal.stringToSign],
        ["CanonicalRequest", refusal.canonicalRequest],
      ]);
  }
};

/** XML calls: a V4-signed URL when the query carries one, else an OAuth bearer. */
const requireXmlAuth = (state: ServerState, call: Call, permission: string) => {
  if (call.query.some(([name]) => isV4Param(name))) {
    const refusal = verifyV4(
      { method: call.method, rawPath: call.rawPath, query: call.query, headers: call.req.headers },
      { clientEmail: state.clientEmail, publicKey: state.publicKey, hmacKeys: state.hmacKeys },
      state.now(),
    );
    if (refusal) throw v4Refusal(refusal);
    call.auth = "signed";
    return;
  }
  const check = checkBearer(state, call.req);
  if (check === "ok") {
    call.auth = "bearer";
    return;
  }
  throw check === "missing"
    ? xmlRefusal(403, "AccessDenied", "Access denied.", [
        [
          "Details",
          `Anonymous caller does not have ${permission} access to the Google Cloud Storage object.`,
        ],
      ])
    : xmlRefusal(401, "AuthenticationRequired", "Authentication required.");
};

// ---------------------------------------------------------------- token endpoint

const tokenEndpoint = async (state: ServerState, call: Call) => {
  if (call.method !== "POST") throw notImplemented("json", `${call.method} /token`);
  const body = new URLSearchParams((await readSmallBody(call.req, "json")).toString("utf8"));
  const oauthError = (status: number, error: string, description: string) =>
    new Refused(
      status,
      JSON.stringify({ error, error_description: description }),
      "application/json; charset=utf-8",
    );
  if (body.get("grant_type") !== "urn:ietf:params:oauth:grant-type:jwt-bearer") {
    throw oauthError(400, "unsupported_grant_type", `Invalid grant_type: ${body.get("grant_type") ?? ""}`);
  }
  const jwt = verifyRs256Jwt(body.get("assertion") ?? "", state.publicKey);
  if (!jwt) throw oauthError(400, "invalid_grant", "Invalid JWT Signature.");
  const { header, claims } = jwt;
  const now = state.now() / 1000;
  if (claims.iss !== state.clientEmail || (header.kid !== undefined && header.kid !== state.privateKeyId)) {
    throw oauthError(400, "invalid_grant", "Invalid grant: account not found");
  }
  if (
    typeof claims.exp !== "number" ||
    typeof claims.iat !== "number" ||
    claims.exp <= now ||
    claims.iat > now + 300 ||
    claims.exp - claims.iat > 3600
  ) {
    throw oauthError(
      400,
      "invalid_grant",
      "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.",
    );
  }
  if (claims.aud !== state.tokenUri() && claims.aud !== "https://oauth2.googleapis.com/token") {
    throw oauthError(400, "invalid_grant", "Invalid JWT: audience is not the token endpoint.");
  }
  const scopes = typeof claims.scope === "string" ? claims.scope.split(" ") : [];
  if (!scopes.some((scope) => STORAGE_SCOPES.includes(scope))) {
    throw oauthError(400, "invalid_scope", "No Cloud Storage scope was requested.");
  }
  const token = `ya29.test-${randomBytes(24).toString("base64url")}`;
  state.tokens.set(token, state.now() + 3600_000);
  send(
    call,
    200,
    "application/json; charset=utf-8",
    JSON.stringify({ access_token: token, expires_in: 3599, token_type: "Bearer" }),
  );
};

// ---------------------------------------------------------------- responses

const send = (
  call: Call,
  status: number,
  contentType: string | undefined,
  body: string | Buffer = "",
  headers: Record<string, string> = {},
) => {
  const res = call.res;
  const payload = typeof body === "string" ? Buffer.from(body) : body;
  res.writeHead(status, {
    ...(contentType ? { "Content-Type": contentType } : {}),
    "Content-Length": String(payload.length),
    ...headers,
  });
  res.end(payload);
};

const sendJson = (call: Call, status: number, value: unknown, headers: Record<string, string> = {}) =>
  send(call, status, "application/json; charset=UTF-8", JSON.stringify(value), headers);

const sendXml = (call: Call, status: number, document: string) =>
  send(call, status, "application/xml; charset=UTF-8", document);

/** Streams the object (or its range) with the headers GCS sends on media reads. */
const sendObject = async (state: ServerState, call: Call, object: StoredObject, style: "json" | "xml") => {
  const range = parseRange(headerText(call.req, "range"), object.size);
  if (range === "unsatisfiable") {
    throw style === "json"
      ? jsonRefusal(416, "requestedRangeNotSatisfiable", "Request range not satisfiable")
      : xmlRefusal(416, "InvalidRange", "The requested range cannot be satisfied.", [
          ["Details", `bytes=${headerText(call.req, "range") ?? ""}`],
        ]);
  }
  const start = range?.start ?? 0;
  const end = range?.end ?? object.size - 1;
  const headers: Record<string, string> = {
    "Content-Type": object.contentType,
    "Content-Length": String(end - start + 1),
    "Accept-Ranges": "bytes",
    ETag: objectEtag(object),
    "Last-Modified": object.created.toUTCString(),
    "x-goog-generation": object.generation,
    "x-goog-metageneration": "1",
    "x-goog-stored-content-encoding": "identity",
    "x-goog-stored-content-length": String(object.size),
    "x-goog-storage-class": "STANDARD",
    "x-goog-hash": xGoogHash(object.md5, await state.bucket.crc32c(object)),
  };
  for (const [name, value] of Object.entries(object.metadata)) headers[`x-goog-meta-${name}`] = value;
  if (range) headers["Content-Range"] = `bytes ${start}-${end}/${object.size}`;
  call.res.writeHead(range ? 206 : 200, headers);
  if (call.method === "HEAD" || object.size === 0) {
    call.res.end();
    return;
  }
  for await (const chunk of state.bucket.read(object, start, end)) {
    if (!call.res.write(chunk)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          call.res.off("drain", done);
          call.res.off("close", done);
          resolve();
        };
        call.res.on("drain", done);
        call.res.on("close", done);
      });
      if (call.res.destroyed) return;
    }
  }
  call.res.end();
};

// ---------------------------------------------------------------- JSON API

const noSuchObject = (state: ServerState, name: string) =>
  jsonRefusal(404, "notFound", `No such object: ${state.bucket.name}/${name}`);

const preconditionFailed = () =>
  jsonRefusal(412, "conditionNotMet", "At least one of the pre-conditions you specified did not hold.", {
    locationType: "header",
    location: "If-Match",
  });

/** `ifGenerationMatch`: "0" means "no object yet", any other value the current generation. */
const checkGenerationMatch = (state: ServerState, name: string, wanted: string | undefined) => {
  if (wanted === undefined) return;
  const current = state.bucket.objects.get(name);
  if (wanted === "0" ? current !== undefined : current?.generation !== wanted) throw preconditionFailed();
};

const decodeSegment = (segment: string, style: "json" | "xml"): string => {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw style === "json"
      ? jsonRefusal(400, "invalid", "Invalid object name encoding.")
      : xmlRefusal(400, "InvalidURI", "Couldn't parse the specified URI.");
  }
};

const validObjectName = (name: string, style: "json" | "xml") => {
  if (name === "" || Buffer.byteLength(name) > 1024 || /[\r\n]/.test(name) || name === "." || name === "..") {
    throw style === "json"
      ? jsonRefusal(400, "invalid", `Invalid object name: ${JSON.stringify(name)}`)
      : xmlRefusal(400, "InvalidObjectName", "The specified object name is not valid.");
  }
};

/** Object metadata fields a write may carry; any other field is refused (501) rather than ignored. */
const objectFields = (
  state: ServerState,
  value: unknown,
): {
  name?: string;
  contentType?: string;
  metadata: Record<string, string>;
  md5Hash?: string;
  crc32c?: string;
} => {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw jsonRefusal(400, "invalid", "Object metadata must be a JSON object.");
  }
  const fields = value as Record<string, unknown>;
  const known = ["name", "bucket", "contentType", "metadata", "md5Hash", "crc32c"];
  const unknown = Object.keys(fields).filter((key) => !known.includes(key));
  if (unknown.length > 0) throw notImplemented("json", `object metadata field(s) ${unknown.join(", ")}`);
  if (fields.bucket !== undefined && fields.bucket !== state.bucket.name) {
    throw jsonRefusal(400, "invalid", "The bucket in the metadata is not the bucket of the request.");
  }
  const metadata: Record<string, string> = {};
  if (fields.metadata !== undefined && fields.metadata !== null) {
    if (typeof fields.metadata !== "object" || Array.isArray(fields.metadata)) {
      throw jsonRefusal(400, "invalid", "metadata must be an object of strings.");
    }
    for (const [key, entry] of Object.entries(fields.metadata as Record<string, unknown>)) {
      if (typeof entry !== "string") throw jsonRefusal(400, "invalid", `metadata.${key} must be a string.`);
      metadata[key] = entry;
    }
  }
  for (const key of ["name", "contentType", "md5Hash", "crc32c"] as const) {
    if (fields[key] !== undefined && typeof fields[key] !== "string") {
      throw jsonRefusal(400, "invalid", `${key} must be a string.`);
    }
  }
  return {
    name: fields.name as string | undefined,
    contentType: fields.contentType as string | undefined,
    metadata,
    md5Hash: fields.md5Hash as string | undefined,
    crc32c: fields.crc32c as string | undefined,
  };
};

const origin = (call: Call) => `http://${call.req.headers.host ?? "127.0.0.1"}`;

const listObjects = async (state: ServerState, call: Call) => {
  onlyParams(call, "json", [
    ...JSON_COMMON,
    "prefix",
    "delimiter",
    "maxResults",
    "pageToken",
    "startOffset",
    "endOffset",
    "includeTrailingDelimiter",
    "versions",
  ]);
  if (param(call, "versions") === "true") throw notImplemented("json", "listing object versions");
  const prefix = param(call, "prefix") ?? "";
  const delimiter = param(call, "delimiter");
  const maxText = param(call, "maxResults");
  const max = maxText === undefined ? 1000 : Number(maxText);
  if (!Number.isInteger(max) || max < 1) throw jsonRefusal(400, "invalid", "Invalid maxResults.");
  const pageSize = Math.min(max, 1000);
  const startOffset = param(call, "startOffset");
  const endOffset = param(call, "endOffset");
  const tokenText = param(call, "pageToken");
  let after: string | undefined;
  if (tokenText !== undefined && tokenText !== "") {
    const decoded = Buffer.from(tokenText, "base64url").toString("utf8");
    if (!decoded.startsWith("after:")) throw jsonRefusal(400, "invalid", "Invalid pageToken.");
    after = decoded.slice("after:".length);
  }
  const names = [...state.bucket.objects.keys()]
    .filter(
      (name) =>
        name.startsWith(prefix) &&
        (startOffset === undefined || name >= startOffset) &&
        (endOffset === undefined || name < endOffset),
    )
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  // With a delimiter, a name past the prefix that holds the delimiter rolls up into a prefix entry.
  const entries: Array<{ key: string; object?: StoredObject }> = [];
  const seenPrefixes = new Set<string>();
  for (const name of names) {
    if (delimiter) {
      const at = name.indexOf(delimiter, prefix.length);
      if (at >= 0) {
        const rolled = name.slice(0, at + delimiter.length);
        if (!seenPrefixes.has(rolled)) {
          seenPrefixes.add(rolled);
          entries.push({ key: rolled });
        }
        continue;
      }
    }
    entries.push({ key: name, object: state.bucket.objects.get(name)! });
  }
  const remaining = after === undefined ? entries : entries.filter((entry) => entry.key > after!);
  const page = remaining.slice(0, pageSize);
  const items = [];
  for (const entry of page) if (entry.object) items.push(await resourceOf(state, call, entry.object));
  const prefixes = page.flatMap((entry) => (entry.object ? [] : [entry.key]));
  const last = page.at(-1);
  sendJson(call, 200, {
    kind: "storage#objects",
    ...(remaining.length > pageSize && last
      ? { nextPageToken: Buffer.from(`after:${last.key}`).toString("base64url") }
      : {}),
    ...(prefixes.length > 0 ? { prefixes } : {}),
    ...(items.length > 0 ? { items } : {}),
  });
};

const findObject = (state: ServerState, call: Call, name: string): StoredObject => {
  const object = state.bucket.objects.get(name);
  const generation = param(call, "generation");
  if (!object || (generation !== undefined && generation !== object.generation))
    throw noSuchObject(state, name);
  return object;
};

const objectCall = async (state: ServerState, call: Call, name: string, media: boolean) => {
  switch (call.method) {
    case "GET": {
      onlyParams(call, "json", [...JSON_COMMON, "generation", "ifGenerationMatch", "ifMetagenerationMatch"]);
      requireBearerJson(state, call, "storage.objects.get");
      const object = findObject(state, call, name);
      const ifGeneration = param(call, "ifGenerationMatch");
      if (ifGeneration !== undefined && ifGeneration !== object.generation) throw preconditionFailed();
      const ifMeta = param(call, "ifMetagenerationMatch");
      if (ifMeta !== undefined && ifMeta !== "1") throw preconditionFailed();
      const alt = param(call, "alt") ?? "json";
      if (media || alt === "media") return sendObject(state, call, object, "json");
      if (alt !== "json") throw jsonRefusal(400, "invalidParameter", `Invalid alt: ${alt}`);
      return sendJson(call, 200, await resourceOf(state, call, object));
    }
    case "DELETE": {
      if (media) break;
      // bucket.deleteFiles({ prefix }) passes its query on to each delete; GCS ignores it there.
      onlyParams(call, "json", [...JSON_COMMON, "generation", "ifGenerationMatch", "prefix"]);
      requireBearerJson(state, call, "storage.objects.delete");
      findObject(state, call, name);
      checkGenerationMatch(state, name, param(call, "ifGenerationMatch"));
      await state.bucket.delete(name);
      return send(call, 204, undefined);
    }
  }
  throw notImplemented("json", `${call.method} on an object`);
};

const compose = async (state: ServerState, call: Call, name: string) => {
  onlyParams(call, "json", [...JSON_COMMON, "ifGenerationMatch"]);
  requireBearerJson(state, call, "storage.objects.create");
  let body: unknown;
  try {
    body = JSON.parse((await readSmallBody(call.req, "json")).toString("utf8"));
  } catch (error) {
    if (error instanceof Refused) throw error;
    throw jsonRefusal(400, "parseError", "Parse Error");
  }
  const request = body as { sourceObjects?: unknown; destination?: unknown; kind?: unknown };
  const unknown = Object.keys(request ?? {}).filter(
    (key) => !["sourceObjects", "destination", "kind"].includes(key),
  );
  if (unknown.length > 0) throw notImplemented("json", `compose field(s) ${unknown.join(", ")}`);
  const sources = request?.sourceObjects;
  if (!Array.isArray(sources) || sources.length === 0 || sources.length > 32) {
    throw jsonRefusal(400, "invalid", "sourceObjects must list 1 to 32 objects.");
  }
  const destination = objectFields(state, request.destination ?? {});
  const pieces = sources.map((source: unknown) => {
    const entry = source as { name?: unknown; generation?: unknown };
    if (typeof entry?.name !== "string")
      throw jsonRefusal(400, "required", "Each source object needs a name.");
    const object = state.bucket.objects.get(entry.name);
    if (!object || (entry.generation !== undefined && String(entry.generation) !== object.generation)) {
      throw noSuchObject(state, entry.name);
    }
    return object;
  });
  checkGenerationMatch(state, name, param(call, "ifGenerationMatch"));
  const composed = state.bucket.assemble(
    name,
    pieces,
    { contentType: destination.contentType ?? "application/octet-stream", metadata: destination.metadata },
    new Date(state.now()),
  );
  const componentCount = pieces.reduce((sum, piece) => sum + (piece.componentCount ?? 1), 0);
  if (componentCount > 1024) {
    await state.bucket.release(composed.segments);
    throw jsonRefusal(400, "invalid", "The composite object would have more than 1024 components.");
  }
  const object = { ...composed, componentCount };
  await state.bucket.put(object);
  sendJson(call, 200, await resourceOf(state, call, object));
};

/** Writes a whole object from `data`; checks the declared hashes before it replaces anything. */
const storeUpload = async (
  state: ServerState,
  call: Call,
  name: string,
  data: AsyncIterable<Uint8Array> | NodeJS.ReadableStream,
  meta: { contentType: string; metadata: Record<string, string>; md5Hash?: string; crc32c?: string },
) => {
  const written = await state.bucket.write(data, { limit: MAX_OBJECT_SIZE });
  const mismatch = !(await declaredDigestsMatch(
    call.req,
    written.md5,
    () => state.bucket.crc32c({ segments: [written.segment] }),
    meta,
  ));
  try {
    if (mismatch) {
      throw jsonRefusal(
        400,
        "invalid",
        "Provided MD5 hash or CRC32C checksum does not match the uploaded data.",
      );
    }
    checkGenerationMatch(state, name, param(call, "ifGenerationMatch"));
  } catch (error) {
    await state.bucket.release([written.segment]);
    throw error;
  }
  const object: StoredObject = {
    name,
    size: written.segment.size,
    contentType: meta.contentType,
    metadata: meta.metadata,
    generation: state.bucket.nextGeneration(),
    md5: written.md5,
    segments: [written.segment],
    created: new Date(state.now()),
  };
  await state.bucket.put(object);
  sendJson(call, 200, await resourceOf(state, call, object));
};

const UPLOAD_PARAMS = [...JSON_COMMON, "uploadType", "name", "ifGenerationMatch", "predefinedAcl"];

const upload = async (state: ServerState, call: Call) => {
  const uploadId = param(call, "upload_id");
  if (uploadId !== undefined) return resumableChunk(state, call, uploadId);
  if (call.method !== "POST")
    throw notImplemented("json", `${call.method} on the upload endpoint without upload_id`);
  onlyParams(call, "json", UPLOAD_PARAMS);
  requireBearerJson(state, call, "storage.objects.create");
  const acl = param(call, "predefinedAcl");
  if (acl !== undefined && acl !== "private" && acl !== "projectPrivate") {
    throw notImplemented("json", `predefinedAcl=${acl}`);
  }
  const uploadType = param(call, "uploadType");
  switch (uploadType) {
    case "media": {
      const name = param(call, "name");
      if (name === undefined) throw jsonRefusal(400, "required", "Required parameter: name");
      validObjectName(name, "json");
      return storeUpload(state, call, name, call.req, {
        contentType: headerText(call.req, "content-type") ?? "application/octet-stream",
        metadata: {},
      });
    }
    case "multipart": {
      const boundary = boundaryOf(headerText(call.req, "content-type"));
      if (!boundary)
        throw jsonRefusal(400, "badContent", "uploadType=multipart needs a multipart/related body.");
      const related = await readRelated(call.req, boundary);
      const fields = objectFields(state, related.metadata);
      const name = param(call, "name") ?? fields.name;
      if (name === undefined) throw jsonRefusal(400, "required", "Required parameter: name");
      validObjectName(name, "json");
      return storeUpload(state, call, name, related.data, {
        contentType: fields.contentType ?? related.contentType,
        metadata: fields.metadata,
        md5Hash: fields.md5Hash,
        crc32c: fields.crc32c,
      });
    }
    case "resumable": {
      const text = (await readSmallBody(call.req, "json")).toString("utf8");
      let body: unknown = {};
      if (text.trim() !== "") {
        try {
          body = JSON.parse(text);
        } catch {
          throw jsonRefusal(400, "parseError", "Parse Error");
        }
      }
      const fields = objectFields(state, body);
      const name = param(call, "name") ?? fields.name;
      if (name === undefined) throw jsonRefusal(400, "required", "Required parameter: name");
      validObjectName(name, "json");
      checkGenerationMatch(state, name, param(call, "ifGenerationMatch"));
      const id = randomBytes(24).toString("base64url");
      state.bucket.sessions.set(id, {
        id,
        name,
        contentType:
          headerText(call.req, "x-upload-content-type") ?? fields.contentType ?? "application/octet-stream",
        metadata: fields.metadata,
        ...(param(call, "ifGenerationMatch") !== undefined
          ? { ifGenerationMatch: param(call, "ifGenerationMatch") }
          : {}),
        received: [],
        size: 0,
        md5: createHash("md5"),
      });
      const location = `${origin(call)}/upload/storage/v1/b/${state.bucket.name}/o?uploadType=resumable&name=${encodeURIComponent(name)}&upload_id=${id}`;
      return send(call, 200, undefined, "", { Location: location, "X-GUploader-UploadID": id });
    }
    default:
      throw notImplemented("json", `uploadType=${uploadType ?? "(none)"}`);
  }
};

/** `bytes a-b/total`, `bytes a-*` `/total` or `/*`, `bytes *` `/total` or `/*`. */
const parseContentRange = (
  text: string | undefined,
): { start?: number; end?: number; open: boolean; total?: number } | undefined => {
  if (text === undefined) return undefined;
  const m = /^bytes (?:(\d+)-(\d+|\*)|\*)\/(\d+|\*)$/.exec(text.trim());
  if (!m) return undefined;
  return {
    ...(m[1] !== undefined ? { start: Number(m[1]) } : {}),
    ...(m[2] !== undefined && m[2] !== "*" ? { end: Number(m[2]) } : {}),
    open: m[2] === "*",
    ...(m[3] !== "*" ? { total: Number(m[3]) } : {}),
  };
};

const finishSession = async (state: ServerState, call: Call, session: ResumableSession) => {
  state.bucket.sessions.delete(session.id);
  const object: StoredObject = {
    name: session.name,
    size: session.size,
    contentType: session.contentType,
    metadata: session.metadata,
    generation: state.bucket.nextGeneration(),
    md5: session.md5.digest(),
    segments: session.received,
    created: new Date(state.now()),
  };
  if (!(await declaredDigestsMatch(call.req, object.md5!, () => state.bucket.crc32c(object)))) {
    await state.bucket.release(session.received);
    throw jsonRefusal(
      400,
      "invalid",
      "Provided MD5 hash or CRC32C checksum does not match the uploaded data.",
    );
  }
  try {
    checkGenerationMatch(state, session.name, session.ifGenerationMatch);
  } catch (error) {
    await state.bucket.release(session.received);
    throw error;
  }
  await state.bucket.put(object);
  sendJson(call, 200, await resourceOf(state, call, object));
};

const incomplete = (call: Call, session: ResumableSession) =>
  send(call, 308, undefined, "", session.size > 0 ? { Range: `bytes=0-${session.size - 1}` } : {});

/** A PUT (or DELETE) on a resumable session URI: its upload_id is the credential, as in GCS. */
const resumableChunk = async (state: ServerState, call: Call, id: string) => {
  onlyParams(call, "json", [...UPLOAD_PARAMS, "upload_id"]);
  call.auth = "session";
  const session = state.bucket.sessions.get(id);
  if (!session) throw jsonRefusal(404, "notFound", "No such upload session.");
  if (call.method === "DELETE") {
    state.bucket.sessions.delete(id);
    await state.bucket.release(session.received);
    return send(call, 499, "text/plain", "");
  }
  if (call.method !== "PUT") throw notImplemented("json", `${call.method} on a resumable session`);
  const range = parseContentRange(headerText(call.req, "content-range"));
  const contentRangeText = headerText(call.req, "content-range");
  if (contentRangeText !== undefined && !range) {
    throw jsonRefusal(400, "invalid", `Invalid Content-Range: ${contentRangeText}`);
  }
  if (range?.total !== undefined) {
    if (session.total !== undefined && session.total !== range.total) {
      throw jsonRefusal(400, "invalid", "The total size differs from an earlier request's.");
    }
    session.total = range.total;
  }
  if (range && range.start === undefined) {
    // A status query (or a zero-byte final request): `bytes */total` finishes when all arrived.
    if (session.total !== undefined && session.total === session.size)
      return finishSession(state, call, session);
    return incomplete(call, session);
  }
  const start = range?.start ?? 0;
  if (start !== session.size) {
    throw jsonRefusal(
      400,
      "invalid",
      `The chunk starts at ${start}; the session holds ${session.size} bytes.`,
    );
  }
  const limit = range?.end !== undefined ? range.end - start + 1 : MAX_OBJECT_SIZE;
  const md5 = session.md5;
  let written: Awaited<ReturnType<Bucket["write"]>>;
  try {
    written = await state.bucket.write(call.req, { limit, also: (chunk) => md5.update(chunk) });
  } catch (error) {
    // The session's md5 has taken part of this body: it cannot continue consistently.
    state.bucket.sessions.delete(id);
    await state.bucket.release(session.received);
    if (error instanceof BodyTooLarge)
      throw jsonRefusal(400, "invalid", "The body is longer than its Content-Range.");
    throw error;
  }
  if (range?.end !== undefined && written.segment.size !== limit) {
    // The md5 has already taken these bytes; the session cannot continue consistently.
    state.bucket.sessions.delete(id);
    await state.bucket.release([...session.received, written.segment]);
    throw jsonRefusal(
      400,
      "invalid",
      "The body is shorter than its Content-Range; the session is cancelled.",
    );
  }
  session.received.push(written.segment);
  session.size += written.segment.size;
  // Without a Content-Range the single PUT is the whole object; `bytes a-*/*` is the last request too.
  const finished =
    range === undefined || range.open || (session.total !== undefined && session.size >= session.total);
  if (session.total !== undefined && session.size > session.total) {
    state.bucket.sessions.delete(id);
    await state.bucket.release(session.received);
    throw jsonRefusal(400, "invalid", "More bytes arrived than the declared total.");
  }
  if (finished) {
    if (session.total !== undefined && session.size !== session.total) {
      state.bucket.sessions.delete(id);
      await state.bucket.release(session.received);
      throw jsonRefusal(400, "invalid", "The upload ended before the declared total.");
    }
    return finishSession(state, call, session);
  }
  return incomplete(call, session);
};

const jsonApi = async (state: ServerState, call: Call, segments: ReadonlyArray<string>) => {
  // segments: [api ("storage"|"download"|"upload"), "v1", "b", bucket, ...]
  const [api, version, b, bucketName, o, objectSegment, action, ...extra] = segments;
  if (version !== "v1" || b !== "b" || bucketName === undefined || extra.length > 0) {
    throw notImplemented("json", `${call.method} ${call.rawPath}`);
  }
  if (decodeSegment(bucketName, "json") !== state.bucket.name) {
    throw jsonRefusal(404, "notFound", "The specified bucket does not exist.");
  }
  if (o === undefined) {
    if (api === "storage" && call.method === "GET") {
      onlyParams(call, "json", JSON_COMMON);
      requireBearerJson(state, call, "storage.buckets.get");
      return sendJson(call, 200, {
        kind: "storage#bucket",
        id: state.bucket.name,
        name: state.bucket.name,
        location: "US",
        storageClass: "STANDARD",
      });
    }
    throw notImplemented("json", `${call.method} ${call.rawPath}`);
  }
  if (o !== "o") throw notImplemented("json", `${call.method} ${call.rawPath}`);
  if (api === "upload") {
    if (objectSegment !== undefined) throw notImplemented("json", `${call.method} ${call.rawPath}`);
    return upload(state, call);
  }
  if (objectSegment === undefined || objectSegment === "") {
    if (api === "storage" && call.method === "GET") {
      requireBearerJson(state, call, "storage.objects.list");
      return listObjects(state, call);
    }
    throw notImplemented("json", `${call.method} ${call.rawPath}`);
  }
  const name = decodeSegment(objectSegment, "json");
  if (action === "compose" && api === "storage" && call.method === "POST") {
    validObjectName(name, "json");
    return compose(state, call, name);
  }
  if (action !== undefined) throw notImplemented("json", `${call.method} ${call.rawPath}`);
  if (api === "download" && call.method !== "GET")
    throw notImplemented("json", `${call.method} ${call.rawPath}`);
  return objectCall(state, call, name, api === "download");
};

// ---------------------------------------------------------------- XML API

const noSuchUpload = () =>
  xmlRefusal(404, "NoSuchUpload", "The requested upload was not found.", [
    [
      "Details",
      "The specified multipart upload does not exist. The upload ID might be invalid, or it was completed or aborted.",
    ],
  ]);

const uploadOf = (state: ServerState, call: Call, name: string) => {
  const upload = state.bucket.uploads.get(param(call, "uploadId") ?? "");
  if (!upload || upload.name !== name) throw noSuchUpload();
  return upload;
};

/** The permission GCS would name when refusing an anonymous caller this XML call. */
const xmlPermission = (call: Call): string => {
  const multipart = param(call, "uploadId") !== undefined || param(call, "uploads") !== undefined;
  const verb =
    { GET: "get", HEAD: "get", PUT: "create", POST: "create", DELETE: "delete" }[call.method] ?? "get";
  return multipart ? `storage.multipartUploads.${verb === "get" ? "list" : verb}` : `storage.objects.${verb}`;
};

const xmlObjectCall = async (state: ServerState, call: Call, name: string) => {
  const has = (key: string) => param(call, key) !== undefined;
  const { method } = call;
  // The signature covers the whole query, so it is checked before the query is interpreted.
  requireXmlAuth(state, call, xmlPermission(call));
  if (method === "POST" && has("uploads")) {
    onlyParams(call, "xml", ["uploads"]);
    validObjectName(name, "xml");
    const id = `ABPnzm${randomBytes(36).toString("base64url")}`;
    state.bucket.uploads.set(id, {
      id,
      name,
      contentType: headerText(call.req, "content-type") ?? "application/octet-stream",
      metadata: metaHeaders(call.req),
      initiated: new Date(state.now()),
      parts: new Map(),
    });
    await readSmallBody(call.req, "xml");
    return sendXml(
      call,
      200,
      xmlDocument("InitiateMultipartUploadResult", [
        ["Bucket", state.bucket.name],
        ["Key", name],
        ["UploadId", id],
      ]),
    );
  }
  if (method === "PUT" && has("uploadId")) {
    onlyParams(call, "xml", ["uploadId", "partNumber"]);
    const upload = uploadOf(state, call, name);
    const numberText = param(call, "partNumber") ?? "";
    const number = /^\d{1,5}$/.test(numberText) ? Number(numberText) : Number.NaN;
    if (!(number >= 1 && number <= 10_000)) {
      throw xmlRefusal(400, "InvalidArgument", "Invalid argument.", [
        ["Details", "partNumber must be an integer between 1 and 10000."],
      ]);
    }
    let written: Awaited<ReturnType<Bucket["write"]>>;
    try {
      written = await state.bucket.write(call.req, { limit: state.maxPartSize, crc: false });
    } catch (error) {
      if (error instanceof BodyTooLarge) {
        throw xmlRefusal(
          400,
          "EntityTooLarge",
          "Your proposed upload exceeds the maximum allowed object size.",
        );
      }
      throw error;
    }
    const declared = headerText(call.req, "content-length");
    if (
      !(await declaredDigestsMatch(call.req, written.md5, () =>
        state.bucket.crc32c({ segments: [written.segment] }),
      )) ||
      (declared !== undefined && Number(declared) !== written.segment.size)
    ) {
      await state.bucket.release([written.segment]);
      throw xmlRefusal(
        400,
        "BadDigest",
        "The Content-MD5 or x-goog-hash you specified did not match what was received.",
      );
    }
    // The upload may have been completed or aborted while the body streamed in.
    if (state.bucket.uploads.get(upload.id) !== upload) {
      await state.bucket.release([written.segment]);
      throw noSuchUpload();
    }
    const part = {
      number,
      size: written.segment.size,
      md5: written.md5,
      segment: written.segment,
      lastModified: new Date(state.now()),
    };
    const replaced = upload.parts.get(number);
    upload.parts.set(number, part);
    if (replaced) await state.bucket.release([replaced.segment]);
    return send(call, 200, undefined, "", {
      ETag: partEtag(part),
      "x-goog-hash": xGoogHash(part.md5, part.segment.crc32c),
    });
  }
  if (method === "GET" && has("uploadId")) {
    onlyParams(call, "xml", ["uploadId", "max-parts", "part-number-marker"]);
    const upload = uploadOf(state, call, name);
    const maxParts = Math.min(Number(param(call, "max-parts") ?? "1000") || 1000, 1000);
    const marker = Number(param(call, "part-number-marker") ?? "0") || 0;
    const after = [...upload.parts.values()]
      .filter((part) => part.number > marker)
      .sort((a, b) => a.number - b.number);
    const page = after.slice(0, maxParts);
    const truncated = after.length > page.length;
    return sendXml(
      call,
      200,
      xmlDocument("ListPartsResult", [
        ["Bucket", state.bucket.name],
        ["Key", name],
        ["UploadId", upload.id],
        ["StorageClass", "STANDARD"],
        ["PartNumberMarker", marker],
        ["NextPartNumberMarker", page.at(-1)?.number ?? marker],
        ["MaxParts", maxParts],
        ["IsTruncated", truncated],
        ...page.map(
          (part): XmlElement => [
            "Part",
            [
              ["PartNumber", part.number],
              ["LastModified", isoTime(part.lastModified)],
              ["ETag", partEtag(part)],
              ["Size", part.size],
            ],
          ],
        ),
      ]),
    );
  }
  if (method === "POST" && has("uploadId")) {
    onlyParams(call, "xml", ["uploadId"]);
    const upload = uploadOf(state, call, name);
    const body = (await readSmallBody(call.req, "xml")).toString("utf8");
    let listed: ReturnType<typeof parseCompleteBody>;
    try {
      listed = parseCompleteBody(body);
    } catch (error) {
      if (error instanceof MalformedXml) {
        throw xmlRefusal(
          400,
          "MalformedXML",
          "The XML you provided was not well-formed or did not validate.",
          [["Details", error.message]],
        );
      }
      throw error;
    }
    if (state.bucket.uploads.get(upload.id) !== upload) throw noSuchUpload();
    for (let i = 1; i < listed.length; i++) {
      if (listed[i]!.partNumber <= listed[i - 1]!.partNumber) {
        throw xmlRefusal(400, "InvalidPartOrder", "The list of parts was not in ascending order.");
      }
    }
    const unquote = (etag: string) => etag.replace(/^"|"$/g, "");
    const parts = listed.map(({ partNumber, etag }) => {
      const part = upload.parts.get(partNumber);
      if (!part || unquote(etag) !== unquote(partEtag(part))) {
        throw xmlRefusal(400, "InvalidPart", "One or more of the specified parts could not be found.", [
          ["Details", `Part ${partNumber} with ETag ${etag} was not uploaded to this upload.`],
        ]);
      }
      return part;
    });
    parts.forEach((part, i) => {
      if (i < parts.length - 1 && part.size < state.minPartSize) {
        throw xmlRefusal(
          400,
          "EntityTooSmall",
          "Your proposed upload is smaller than the minimum allowed object size.",
          [
            [
              "Details",
              `Part ${part.number} is ${part.size} bytes; every part but the last needs ${state.minPartSize}.`,
            ],
          ],
        );
      }
    });
    const object = state.bucket.assemble(
      name,
      parts.map((part) => ({ segments: [part.segment], size: part.size })),
      upload,
      new Date(state.now()),
    );
    state.bucket.uploads.delete(upload.id);
    // The parts now belong to the object; parts uploaded but not listed are dropped, as in GCS.
    await state.bucket.release([...upload.parts.values()].map((part) => part.segment));
    await state.bucket.put(object);
    const etag = createHash("md5")
      .update(Buffer.concat(parts.map((part) => part.md5)))
      .digest("hex");
    return sendXml(
      call,
      200,
      xmlDocument("CompleteMultipartUploadResult", [
        ["Location", `${origin(call)}/${state.bucket.name}/${encodeURI(name)}`],
        ["Bucket", state.bucket.name],
        ["Key", name],
        ["ETag", `"${etag}-${parts.length}"`],
      ]),
    );
  }
  if (method === "DELETE" && has("uploadId")) {
    onlyParams(call, "xml", ["uploadId"]);
    const upload = uploadOf(state, call, name);
    state.bucket.uploads.delete(upload.id);
    await state.bucket.release([...upload.parts.values()].map((part) => part.segment));
    return send(call, 204, undefined);
  }
  if ((method === "GET" || method === "HEAD") && call.query.every(([key]) => isV4Param(key))) {
    const object = state.bucket.objects.get(name);
    if (!object) {
      if (method === "HEAD") return send(call, 404, undefined);
      throw xmlRefusal(404, "NoSuchKey", "The specified key does not exist.", [
        ["Details", `No such object: ${state.bucket.name}/${name}`],
      ]);
    }
    return sendObject(state, call, object, "xml");
  }
  if (method === "PUT" && call.query.every(([key]) => isV4Param(key))) {
    validObjectName(name, "xml");
    const written = await state.bucket.write(call.req, { limit: MAX_OBJECT_SIZE });
    if (
      !(await declaredDigestsMatch(call.req, written.md5, () =>
        state.bucket.crc32c({ segments: [written.segment] }),
      ))
    ) {
      await state.bucket.release([written.segment]);
      throw xmlRefusal(
        400,
        "BadDigest",
        "The Content-MD5 or x-goog-hash you specified did not match what was received.",
      );
    }
    const object: StoredObject = {
      name,
      size: written.segment.size,
      contentType: headerText(call.req, "content-type") ?? "application/octet-stream",
      metadata: metaHeaders(call.req),
      generation: state.bucket.nextGeneration(),
      md5: written.md5,
      segments: [written.segment],
      created: new Date(state.now()),
    };
    await state.bucket.put(object);
    return send(call, 200, undefined, "", {
      ETag: objectEtag(object),
      "x-goog-hash": xGoogHash(object.md5, written.segment.crc32c),
      "x-goog-generation": object.generation,
    });
  }
  if (method === "DELETE" && call.query.every(([key]) => isV4Param(key))) {
    if (!(await state.bucket.delete(name))) {
      throw xmlRefusal(404, "NoSuchKey", "The specified key does not exist.");
    }
    return send(call, 204, undefined);
  }
  throw notImplemented("xml", `${method} /${state.bucket.name}/${name}?${call.rawQuery}`);
};

const xmlBucketCall = (state: ServerState, call: Call) => {
  requireXmlAuth(state, call, xmlPermission(call));
  if (call.method === "GET" && param(call, "uploads") !== undefined) {
    onlyParams(call, "xml", ["uploads", "prefix"]);
    const prefix = param(call, "prefix") ?? "";
    const uploads = [...state.bucket.uploads.values()]
      .filter((upload) => upload.name.startsWith(prefix))
      .sort((a, b) =>
        a.name < b.name ? -1 : a.name > b.name ? 1 : a.initiated.getTime() - b.initiated.getTime(),
      );
    return sendXml(
      call,
      200,
      xmlDocument("ListMultipartUploadsResult", [
        ["Bucket", state.bucket.name],
        ["Prefix", prefix],
        ["IsTruncated", false],
        ...uploads.map(
          (upload): XmlElement => [
            "Upload",
            [
              ["Key", upload.name],
              ["UploadId", upload.id],
              ["StorageClass", "STANDARD"],
              ["Initiated", isoTime(upload.initiated)],
            ],
          ],
        ),
      ]),
    );
  }
  throw notImplemented("xml", `${call.method} /${state.bucket.name}?${call.rawQuery}`);
};

// ---------------------------------------------------------------- entry

const corsHeaders = (req: IncomingMessage): Record<string, string> =>
  req.headers.origin
    ? {
        "Access-Control-Allow-Origin": req.headers.origin,
        "Access-Control-Expose-Headers": "ETag, x-goog-hash, Content-Range, Content-Length",
        Vary: "Origin",
      }
    : {};

const route = async (state: ServerState, call: Call) => {
  const segments = call.rawPath.split("/").slice(1);
  const [first] = segments;
  if (call.rawPath === "/token") return tokenEndpoint(state, call);
  if (first === "storage" || first === "download" || first === "upload") {
    const rest = first === "storage" ? segments : segments.slice(1);
    if (rest[0] !== "storage") throw notImplemented("json", `${call.method} ${call.rawPath}`);
    return jsonApi(state, call, [first, ...rest.slice(1)]);
  }
  if (first === undefined || first === "") throw notImplemented("xml", `${call.method} / (listing buckets)`);
  if (decodeSegment(first, "xml") !== state.bucket.name) {
    throw xmlRefusal(404, "NoSuchBucket", "The specified bucket does not exist.");
  }
  if (segments.length === 1 || (segments.length === 2 && segments[1] === ""))
    return xmlBucketCall(state, call);
  const name = decodeSegment(segments.slice(1).join("/"), "xml");
  return xmlObjectCall(state, call, name);
};

/** The request handler of the test server. Never throws: every failure leaves as GCS's error shape. */
export const handle = async (
  state: ServerState,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> => {
  const url = req.url ?? "/";
  const at = url.indexOf("?");
  const rawPath = at < 0 ? url : url.slice(0, at);
  const rawQuery = at < 0 ? "" : url.slice(at + 1);
  const call: Call = {
    req,
    res,
    method: req.method ?? "GET",
    rawPath,
    rawQuery,
    query: parseQuery(rawQuery) ?? [],
    auth: "none",
  };
  for (const [name, value] of Object.entries(corsHeaders(req))) res.setHeader(name, value);
  res.on("finish", () => {
    state.calls.push({
      method: call.method,
      path: rawPath,
      query: rawQuery,
      auth: call.auth,
      status: res.statusCode,
    });
    if (state.calls.length > MAX_CALLS) state.calls.splice(0, state.calls.length - MAX_CALLS);
  });
  try {
    if (call.method === "OPTIONS" && req.headers.origin) {
      // Browsers PUT parts straight to the bucket; the deploy docs give the bucket a CORS rule.
      res.writeHead(200, {
        "Access-Control-Allow-Methods": "GET, HEAD, PUT, POST, DELETE",
        "Access-Control-Allow-Headers": headerText(req, "access-control-request-headers") ?? "",
        "Access-Control-Max-Age": "3600",
        "Content-Length": "0",
      });
      res.end();
      return;
    }
    if (parseQuery(rawQuery) === undefined)
      throw xmlRefusal(400, "InvalidURI", "Couldn't parse the specified URI.");
    await route(state, call);
  } catch (error) {
    const refusal =
      error instanceof Refused
        ? error
        : error instanceof MalformedMultipart
          ? jsonRefusal(400, "badContent", error.message)
          : undefined;
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (refusal) {
      res.writeHead(refusal.status, {
        "Content-Type": refusal.contentType,
        "Content-Length": String(Buffer.byteLength(refusal.body)),
        ...refusal.headers,
      });
      res.end(refusal.body);
      return;
    }
    if (req.destroyed || req.errored) {
      res.destroy();
      return;
    }
    const message = error instanceof Error ? error.message : String(error);
    res.writeHead(500, { "Content-Type": "application/xml; charset=UTF-8" });
    res.end(xmlError("InternalError", `gcs-test-server failed: ${message}`));
  }
};

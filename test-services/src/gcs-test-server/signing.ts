import { createHash, createHmac, type KeyObject, timingSafeEqual, verify } from "node:crypto";

/** RFC 3986 unreserved characters stay; everything else is %XX, as GCS's V4 canonical form wants. */
const strictEncode = (text: string): string =>
  encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/** A percent-decoded query: the raw `a=b&c=d` split as sent, each side decoded. */
export type QueryPairs = ReadonlyArray<readonly [string, string]>;

/** `undefined` when the query has bad percent-escapes: nothing would sign it the same way. */
export const parseQuery = (raw: string): QueryPairs | undefined => {
  if (raw === "") return [];
  const pairs: Array<readonly [string, string]> = [];
  for (const piece of raw.split("&")) {
    if (piece === "") continue;
    const at = piece.indexOf("=");
    const name = at < 0 ? piece : piece.slice(0, at);
    const value = at < 0 ? "" : piece.slice(at + 1);
    try {
      // `+` in a query means a space to URLSearchParams and to GCS alike.
      pairs.push([
        decodeURIComponent(name.replace(/\+/g, " ")),
        decodeURIComponent(value.replace(/\+/g, " ")),
      ]);
    } catch {
      return undefined;
    }
  }
  return pairs;
};

/** The V4 fields of a signed URL, once they parse. */
export interface V4Query {
  readonly algorithm: string;
  /** `email`: the service account's, or an HMAC key's access id. */
  readonly credential: { readonly email: string; readonly date: string; readonly scope: string };
  /** `X-Goog-Date` as sent (`YYYYMMDDTHHMMSSZ`) and as milliseconds. */
  readonly date: string;
  readonly dateMs: number;
  readonly expiresSeconds: number;
  readonly signedHeaders: ReadonlyArray<string>;
  readonly signatureHex: string;
}

export type V4Refusal =
  | { readonly kind: "malformed"; readonly parameter: string; readonly details: string }
  | { readonly kind: "expired"; readonly expiredAt: Date }
  | { readonly kind: "not_yet_valid"; readonly validFrom: Date }
  | { readonly kind: "mismatch"; readonly stringToSign: string; readonly canonicalRequest: string };

const V4_PARAMS = [
  "X-Goog-Algorithm",
  "X-Goog-Credential",
  "X-Goog-Date",
  "X-Goog-Expires",
  "X-Goog-SignedHeaders",
  "X-Goog-Signature",
] as const;

export const isV4Param = (name: string): boolean =>
  /^x-goog-(algorithm|credential|date|expires|signedheaders|signature)$/i.test(name);

const SEVEN_DAYS = 604_800;
/** Clocks of signer and server may disagree a little; AWS and GCS both allow some minutes. */
const CLOCK_SKEW_MS = 15 * 60_000;

const parseDate = (text: string): number | undefined => {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(text);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s] = m;
  const ms = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s));
  return Number.isNaN(ms) ? undefined : ms;
};

const parseV4Query = (query: QueryPairs): V4Query | V4Refusal => {
  const get = (name: string) => {
    const found = query.filter(([key]) => key.toLowerCase() === name.toLowerCase());
    return found.length === 1 ? found[0]![1] : undefined;
  };
  for (const name of V4_PARAMS) {
    if (get(name) === undefined) {
      return { kind: "malformed", parameter: name, details: `Missing or repeated ${name} parameter.` };
    }
  }
  const algorithm = get("X-Goog-Algorithm")!;
  if (algorithm !== "GOOG4-RSA-SHA256" && algorithm !== "GOOG4-HMAC-SHA256") {
    return {
      kind: "malformed",
      parameter: "X-Goog-Algorithm",
      details: `Unsupported algorithm ${algorithm}: GOOG4-RSA-SHA256 or GOOG4-HMAC-SHA256.`,
    };
  }
  const date = get("X-Goog-Date")!;
  const dateMs = parseDate(date);
  if (dateMs === undefined) {
    return { kind: "malformed", parameter: "X-Goog-Date", details: `Invalid X-Goog-Date ${date}.` };
  }
  const expiresText = get("X-Goog-Expires")!;
  const expiresSeconds = /^\d{1,7}$/.test(expiresText) ? Number(expiresText) : Number.NaN;
  if (!(expiresSeconds >= 1 && expiresSeconds <= SEVEN_DAYS)) {
    return {
      kind: "malformed",
      parameter: "X-Goog-Expires",
      details: `X-Goog-Expires must be between 1 and ${SEVEN_DAYS} seconds, got ${expiresText}.`,
    };
  }
  const credentialParts = get("X-Goog-Credential")!.split("/");
  if (
    credentialParts.length !== 5 ||
    credentialParts[3] !== "storage" ||
    credentialParts[4] !== "goog4_request" ||
    credentialParts[1] !== date.slice(0, 8) ||
    credentialParts[2] === ""
  ) {
    return {
      kind: "malformed",
      parameter: "X-Goog-Credential",
      details: "X-Goog-Credential must be <email>/<X-Goog-Date's day>/<location>/storage/goog4_request.",
    };
  }
  const signedHeaders = get("X-Goog-SignedHeaders")!.split(";");
  const sorted = [...signedHeaders].sort();
  if (
    !signedHeaders.includes("host") ||
    signedHeaders.some((h, i) => h !== h.toLowerCase() || h === "" || h !== sorted[i])
  ) {
    return {
      kind: "malformed",
      parameter: "X-Goog-SignedHeaders",
      details: "X-Goog-SignedHeaders must be lowercase, sorted, separated by ';', and include host.",
    };
  }
  const signatureHex = get("X-Goog-Signature")!;
  return {
    algorithm,
    credential: {
      email: credentialParts[0]!,
      date: credentialParts[1]!,
      scope: credentialParts.slice(1).join("/"),
    },
    date,
    dateMs,
    expiresSeconds,
    signedHeaders,
    signatureHex,
  };
};

export interface SignedRequest {
  readonly method: string;
  /** The path as sent, still percent-encoded. */
  readonly rawPath: string;
  readonly query: QueryPairs;
  /** Header values by lowercase name (node's `req.headers`). */
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>;
}

/** Decodes each path segment and encodes it again strictly, so `%2f` and `%2F` sign alike. */
const canonicalPath = (rawPath: string): string | undefined => {
  try {
    return rawPath
      .split("/")
      .map((segment) => strictEncode(decodeURIComponent(segment)))
      .join("/");
  } catch {
    return undefined;
  }
};

const canonicalHeaderValue = (name: string, value: string | ReadonlyArray<string> | undefined): string => {
  if (value === undefined) return "";
  const text = typeof value === "string" ? value : value.join(",");
  // The SDK signs `new URL(apiEndpoint).hostname`: the host without its port. GCS listens on 443,
  // where browsers send no port either, so the Host header's port is dropped here too.
  const trimmed = text.trim().replace(/\s{2,}/g, " ");
  return name === "host" ? trimmed.replace(/:\d+$/, "") : trimmed;
};

/** The HMAC signing key of a day, as GCS derives it: "GOOG4" + secret, day, location, service, type. */
const hmacSigningKey = (secret: string, scope: string) => {
  const [day, ...rest] = scope.split("/");
  return rest.reduce(
    (key, part) => createHmac("sha256", key).update(part).digest(),
    createHmac("sha256", `GOOG4${secret}`).update(day!).digest(),
  );
};

/**
 * Checks a V4-signed request as GCS does: fields well formed, not expired, and the signature
 * over the rebuilt string to sign verifies: RSA-SHA256 with the service account's public key, or
 * HMAC-SHA256 with the secret of the HMAC key the credential names.
 * Answers the refusal, or undefined when the request is authentic.
 */
export const verifyV4 = (
  request: SignedRequest,
  keys: {
    readonly clientEmail: string;
    readonly publicKey: KeyObject;
    /** HMAC secrets by access id. */
    readonly hmacKeys: ReadonlyMap<string, string>;
  },
  nowMs: number,
): V4Refusal | undefined => {
  const v4 = parseV4Query(request.query);
  if ("kind" in v4) return v4;
  if (nowMs > v4.dateMs + v4.expiresSeconds * 1000) {
    return { kind: "expired", expiredAt: new Date(v4.dateMs + v4.expiresSeconds * 1000) };
  }
  if (nowMs + CLOCK_SKEW_MS < v4.dateMs) return { kind: "not_yet_valid", validFrom: new Date(v4.dateMs) };

  const path = canonicalPath(request.rawPath) ?? request.rawPath;
  const query = request.query
    .filter(([name]) => name.toLowerCase() !== "x-goog-signature")
    .map(([name, value]) => [strictEncode(name), strictEncode(value)] as const)
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0))
    .map(([name, value]) => `${name}=${value}`)
    .join("&");
  const headers = v4.signedHeaders
    .map((name) => `${name}:${canonicalHeaderValue(name, request.headers[name])}\n`)
    .join("");
  const contentSha256 = v4.signedHeaders.includes("x-goog-content-sha256")
    ? canonicalHeaderValue("x-goog-content-sha256", request.headers["x-goog-content-sha256"])
    : "UNSIGNED-PAYLOAD";
  const canonicalRequest = [
    request.method,
    path,
    query,
    headers,
    v4.signedHeaders.join(";"),
    contentSha256,
  ].join("\n");
  const stringToSign = [
    v4.algorithm,
    v4.date,
    v4.credential.scope,
    createHash("sha256").update(canonicalRequest).digest("hex"),
  ].join("\n");
  const mismatch: V4Refusal = { kind: "mismatch", stringToSign, canonicalRequest };
  if (!/^(?:[0-9a-f]{2})+$/.test(v4.signatureHex)) return mismatch;
  if (v4.algorithm === "GOOG4-HMAC-SHA256") {
    const secret = keys.hmacKeys.get(v4.credential.email);
    if (secret === undefined) return mismatch;
    const expected = createHmac("sha256", hmacSigningKey(secret, v4.credential.scope))
      .update(stringToSign)
      .digest();
    const given = Buffer.from(v4.signatureHex, "hex");
    return given.length === expected.length && timingSafeEqual(given, expected) ? undefined : mismatch;
  }
  if (v4.credential.email !== keys.clientEmail) return mismatch;
  const ok = verify(
    "RSA-SHA256",
    Buffer.from(stringToSign),
    keys.publicKey,
    Buffer.from(v4.signatureHex, "hex"),
  );
  return ok ? undefined : mismatch;
};

const fromBase64Url = (part: string): Buffer | undefined =>
  /^[A-Za-z0-9_-]*$/.test(part) ? Buffer.from(part, "base64url") : undefined;

export interface JwtClaims {
  readonly [claim: string]: unknown;
}

/** An RS256 JWT's header and claims when its signature verifies with `publicKey`, else undefined. */
export const verifyRs256Jwt = (
  token: string,
  publicKey: KeyObject,
): { readonly header: JwtClaims; readonly claims: JwtClaims } | undefined => {
  const pieces = token.split(".");
  if (pieces.length !== 3) return undefined;
  const [h, c, s] = pieces as [string, string, string];
  const headerBytes = fromBase64Url(h);
  const claimBytes = fromBase64Url(c);
  const signature = fromBase64Url(s);
  if (!headerBytes || !claimBytes || !signature) return undefined;
  let header: unknown;
  let claims: unknown;
  try {
    header = JSON.parse(headerBytes.toString("utf8"));
    claims = JSON.parse(claimBytes.toString("utf8"));
  } catch {
    return undefined;
  }
  if (typeof header !== "object" || header === null || typeof claims !== "object" || claims === null) {
    return undefined;
  }
  if ((header as JwtClaims).alg !== "RS256") return undefined;
  if (!verify("RSA-SHA256", Buffer.from(`${h}.${c}`), publicKey, signature)) return undefined;
  return { header: header as JwtClaims, claims: claims as JwtClaims };
};

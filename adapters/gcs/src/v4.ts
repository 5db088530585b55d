import { createHash, createHmac } from "node:crypto";

/** An HMAC key of the service account (Cloud Storage interoperability): access id and secret. */
export interface HmacKey {
  readonly accessId: string;
  readonly secret: string;
}

/**
 * Signs a batch of V4 strings to sign: `GOOG4-HMAC-SHA256` with an HMAC key, or
 * `GOOG4-RSA-SHA256` with the service account's private key (or IAM signBlob). `credential` is
 * the access id or the service account's email.
 */
export interface V4Signer {
  readonly algorithm: "GOOG4-HMAC-SHA256" | "GOOG4-RSA-SHA256";
  readonly credential: string;
  /** Hex signatures, in the order of `stringsToSign`. */
  readonly sign: (stringsToSign: ReadonlyArray<string>, day: string) => Promise<ReadonlyArray<string>>;
}

const SCOPE_TAIL = "auto/storage/goog4_request";

/** The HMAC signing key of a day (`YYYYMMDD`): "GOOG4" + secret, then day, location, service, type. */
const signingKey = (secret: string, day: string) =>
  ["auto", "storage", "goog4_request"].reduce(
    (key, part) => createHmac("sha256", key).update(part).digest(),
    createHmac("sha256", `GOOG4${secret}`).update(day).digest(),
  );

export const hmacSigner = (key: HmacKey): V4Signer => ({
  algorithm: "GOOG4-HMAC-SHA256",
  credential: key.accessId,
  sign: async (stringsToSign, day) => {
    const derived = signingKey(key.secret, day);
    return stringsToSign.map((s) => createHmac("sha256", derived).update(s).digest("hex"));
  },
});

/** RFC 3986 unreserved characters stay; everything else is %XX, as the canonical form wants. */
const strictEncode = (text: string) =>
  encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

export interface V4Request {
  /** Query parameters besides the V4 ones (`partNumber`, `uploadId`). */
  readonly query?: Readonly<Record<string, string>>;
  /** Signed headers besides `host`, lowercase names. */
  readonly headers?: Readonly<Record<string, string>>;
}

/** `YYYYMMDDTHHMMSSZ` */
const stamp = (ms: number) =>
  new Date(ms)
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");

/**
 * V4-signed URLs of one object, path style on `endpoint`, one per request, all dated `now` and
 * valid `expiresSeconds`: the canonical requests are built here, the signatures made by the
 * signer in one batch.
 */
export const signedUrls = async (
  target: {
    readonly endpoint: string;
    readonly bucket: string;
    readonly name: string;
    readonly method: "GET" | "PUT";
    readonly now: number;
    readonly expiresSeconds: number;
  },
  requests: ReadonlyArray<V4Request>,
  signer: V4Signer,
): Promise<ReadonlyArray<string>> => {
  const base = new URL(target.endpoint);
  const path = `/${[target.bucket, ...target.name.split("/")].map(strictEncode).join("/")}`;
  const date = stamp(target.now);
  const day = date.slice(0, 8);
  const scope = `${day}/${SCOPE_TAIL}`;
  const queries: string[] = [];
  const toSign = requests.map((request) => {
    const headers = [["host", base.hostname] as const, ...Object.entries(request.headers ?? {})].sort(
      (a, b) => (a[0] < b[0] ? -1 : 1),
    );
    const signedHeaders = headers.map(([name]) => name).join(";");
    const query: string = [
      ["X-Goog-Algorithm", signer.algorithm] as const,
      ["X-Goog-Credential", `${signer.credential}/${scope}`],
      ["X-Goog-Date", date],
      ["X-Goog-Expires", String(target.expiresSeconds)],
      ["X-Goog-SignedHeaders", signedHeaders],
      ...Object.entries(request.query ?? {}),
    ]
      .map(([name, value]) => [strictEncode(name), strictEncode(value)] as const)
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      .map(([name, value]) => `${name}=${value}`)
      .join("&");
    queries.push(query);
    const canonical = [
      target.method,
      path,
      query,
      headers.map(([name, value]) => `${name}:${value.trim()}\n`).join(""),
      signedHeaders,
      "UNSIGNED-PAYLOAD",
    ].join("\n");
    const hash = createHash("sha256").update(canonical).digest("hex");
    return `${signer.algorithm}\n${date}\n${scope}\n${hash}`;
  });
  const signatures = await signer.sign(toSign, day);
  const origin = `${base.protocol}//${base.host}`;
  return queries.map((query, i) => `${origin}${path}?${query}&X-Goog-Signature=${signatures[i]}`);
};

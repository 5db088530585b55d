import { createHmac, createSecretKey, hash } from "node:crypto";

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
/** URLs signed between two turns of the event loop. */
const SLICE = 500;

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
    const derived = createSecretKey(signingKey(key.secret, day));
    return stringsToSign.map((s) => createHmac("sha256", derived).update(s).digest("hex"));
  },
});

const UNRESERVED = /^[A-Za-z0-9\-._~]*$/;
/** RFC 3986 unreserved characters stay; everything else is %XX, as the canonical form wants. */
const strictEncode = (text: string) =>
  encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

type Pair = readonly [string, string];

/** Where each query parameter and header of a batch's requests goes (names sorted, encoded). */
interface Layout {
  readonly headerNames: ReadonlyArray<string>;
  readonly signedHeaders: string;
  /** `fixed`: the V4 parameters' values, the same for every request; else the request's `key`. */
  readonly query: ReadonlyArray<{
    readonly name: string;
    readonly fixed: string | undefined;
    readonly key: string;
  }>;
}

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
  const credential = `${signer.credential}/${scope}`;
  // The requests of a batch share their parameter and header names (their values differ): where
  // each name goes in the canonical request is worked out once, and a value is encoded only when
  // it has a character to escape.
  const encode = (text: string) => (UNRESERVED.test(text) ? text : strictEncode(text));
  const layouts = new Map<string, Layout>();
  const layoutOf = (query: Readonly<Record<string, string>>, headers: Readonly<Record<string, string>>) => {
    const key = `${Object.keys(query).join("&")}|${Object.keys(headers).join(";")}`;
    const known = layouts.get(key);
    if (known) return known;
    const headerNames = ["host", ...Object.keys(headers)].sort();
    const signedHeaders = headerNames.join(";");
    const v4: ReadonlyArray<Pair> = [
      ["X-Goog-Algorithm", signer.algorithm],
      ["X-Goog-Credential", credential],
      ["X-Goog-Date", date],
      ["X-Goog-Expires", String(target.expiresSeconds)],
      ["X-Goog-SignedHeaders", signedHeaders],
    ];
    const layout: Layout = {
      headerNames,
      signedHeaders,
      query: [
        ...v4.map(([name, value]) => ({ name: encode(name), fixed: encode(value), key: name })),
        ...Object.keys(query).map((name) => ({ name: encode(name), fixed: undefined, key: name })),
      ].sort((a, b) => (a.name < b.name ? -1 : 1)),
    };
    layouts.set(key, layout);
    return layout;
  };
  const canonicalOf = (request: V4Request) => {
    const given = request.query ?? {};
    const headers = request.headers ?? {};
    const layout = layoutOf(given, headers);
    let query = "";
    for (const { name, fixed, key } of layout.query)
      query += `${query === "" ? "" : "&"}${name}=${fixed ?? encode(given[key]!)}`;
    let canonicalHeaders = "";
    for (const name of layout.headerNames)
      canonicalHeaders += `${name}:${name === "host" ? base.hostname : headers[name]!.trim()}\n`;
    const canonical = `${target.method}\n${path}\n${query}\n${canonicalHeaders}\n${layout.signedHeaders}\nUNSIGNED-PAYLOAD`;
    return { query, toSign: `${signer.algorithm}\n${date}\n${scope}\n${hash("sha256", canonical)}` };
  };
  const origin = `${base.protocol}//${base.host}`;
  const urls: string[] = [];
  // In slices, the event loop served between them: 10,000 URLs never hold it for long.
  for (let at = 0; at < requests.length; at += SLICE) {
    if (at > 0) await new Promise((resolve) => setImmediate(resolve));
    const slice = requests.slice(at, at + SLICE).map(canonicalOf);
    const signatures = await signer.sign(
      slice.map((c) => c.toSign),
      day,
    );
    slice.forEach(({ query }, i) => {
      urls.push(`${origin}${path}?${query}&X-Goog-Signature=${signatures[i]}`);
    });
  }
  return urls;
};

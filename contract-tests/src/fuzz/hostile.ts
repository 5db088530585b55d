import { gzipSync } from "node:zlib";
import { Arbitrary, FastCheck as fc } from "effect";
import { encodeInput, type FuzzRoute, fillPath, idFieldsOf } from "./routes.js";
import type { WireRequest } from "./wire.js";
import { idsOf, type TenantWorld } from "./world.js";

/**
 * A request before it is put on the wire: values as the route decodes them (the path parameters
 * unencoded), or raw pieces that replace them.
 */
export interface Draft {
  readonly params: Record<string, string>;
  readonly query: Record<string, unknown>;
  readonly body: unknown;
  readonly headers: Record<string, string>;
  /** Path parameters sent as they are, not percent-encoded. */
  readonly rawParams?: Record<string, string>;
  /** Appended to the query string as it is. */
  readonly rawQuery?: string;
  readonly rawBody?: string | Uint8Array;
  readonly method?: string;
  /** Appended to the path as it is. */
  readonly pathSuffix?: string;
}

/** The tenant the fuzz calls as, and another tenant whose ids it mixes in. */
export interface FuzzContext {
  readonly world: TenantWorld;
  readonly other: TenantWorld;
}

/** Percent-encodes a path segment; a lone surrogate goes out as U+FFFD rather than throwing. */
const encodeSegment = (value: string) => {
  try {
    return encodeURIComponent(value);
  } catch {
    return encodeURIComponent(Buffer.from(value, "utf8").toString("utf8"));
  }
};

const encodeQuery = (query: Record<string, unknown>): string[] =>
  Object.entries(query).flatMap(([key, value]) => {
    const k = encodeSegment(key);
    if (value === undefined) return [];
    if (Array.isArray(value)) return value.map((v) => `${k}=${encodeSegment(String(v))}`);
    if (typeof value === "object" && value !== null)
      return Object.entries(value).map(
        ([sub, v]) => `${k}[${encodeSegment(sub)}]=${encodeSegment(String(v))}`,
      );
    return [`${k}=${encodeSegment(String(value))}`];
  });

export const toWire = (route: FuzzRoute, draft: Draft): WireRequest => {
  const params: Record<string, string> = {};
  for (const [name, value] of Object.entries(draft.params))
    params[name] = name === "path" ? value.split("/").map(encodeSegment).join("/") : encodeSegment(value);
  Object.assign(params, draft.rawParams);
  const query = [...encodeQuery(draft.query), ...(draft.rawQuery ? [draft.rawQuery] : [])];
  const path = `${fillPath(route, params)}${draft.pathSuffix ?? ""}${query.length > 0 ? `?${query.join("&")}` : ""}`;
  const headers: Record<string, string> = { ...draft.headers };
  let body = draft.rawBody;
  if (body === undefined && draft.body !== undefined) {
    if (route.body === "bytes")
      body = typeof draft.body === "string" ? draft.body : JSON.stringify(draft.body);
    else body = JSON.stringify(draft.body);
  }
  if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === "content-type"))
    headers["content-type"] = route.body === "bytes" ? "application/octet-stream" : "application/json";
  return { method: draft.method ?? route.method, path, headers, ...(body === undefined ? {} : { body }) };
};

// ---------------------------------------------------------------------------------------------
// Valid-ish drafts: the route's schema arbitrary, real ids and tokens, a credential it accepts.

const SCOPE_RANK = { read: 0, write: 1, admin: 2 } as const;

/** The credential headers that satisfy the route, as `{ header: value }`. */
export const validCredentials = (route: FuzzRoute, w: TenantWorld): Array<Record<string, string>> => {
  const slot = route.credential;
  switch (slot.kind) {
    case "api": {
      const { scope, kinds } = slot.requirement;
      const out: Array<Record<string, string>> = [];
      if (kinds === undefined || kinds.includes("user")) out.push({ authorization: `Bearer ${w.bearer}` });
      if (kinds === undefined || kinds.includes("api_key"))
        for (const s of ["read", "write", "admin"] as const)
          if (SCOPE_RANK[s] >= SCOPE_RANK[scope]) out.push({ "x-api-key": w.keys[s].key });
      return out;
    }
    case "playback-bearer":
      return [
        { authorization: `Bearer ${w.play.drm.token}` },
        { authorization: `Bearer ${w.play.clear.token}` },
      ];
    case "license-header":
      return [{ "x-vod-license-token": w.play.drm.license }];
    default:
      return [{}];
  }
};

/** Ids the fuzz may name: a live playback session it must not end is left out. */
const fuzzIds = (w: TenantWorld): Record<string, string[]> => ({
  ...idsOf(w),
  session: w.victims.playbackIds,
});

const pick = <A>(values: ReadonlyArray<A>): fc.Arbitrary<A> =>
  values.length === 0 ? fc.constant(undefined as A) : fc.constantFrom(...values);

const setIn = (draft: Draft, location: "params" | "query" | "body", name: string, value: unknown): Draft => {
  const current = draft[location];
  const container = typeof current === "object" && current !== null && !Array.isArray(current) ? current : {};
  return { ...draft, [location]: { ...container, [name]: value } };
};

export const validDraft = (route: FuzzRoute, ctx: FuzzContext): fc.Arbitrary<Draft> => {
  const { world: w, other } = ctx;
  const encode = encodeInput(route);
  const input = Arbitrary.make(route.input).map((v) => encode(v) as Record<string, unknown>);
  const own = fuzzIds(w);
  const theirs = idsOf(other);
  const idFields = idFieldsOf(route);
  const ids = fc.tuple(
    ...idFields.map((f) => {
      const mine = own[f.kind];
      if (mine === undefined)
        throw new Error(`route ${route.id} names ids of kind ${f.kind}, which the fixtures make none of`);
      return fc.oneof(
        { weight: 6, arbitrary: pick(mine) },
        { weight: 1, arbitrary: pick(theirs[f.kind] ?? []) },
        { weight: 1, arbitrary: pick(Object.values(own).flat()) },
        { weight: 2, arbitrary: fc.constant(undefined) },
      );
    }),
  );
  const tokens = w.victims.refreshTokens;
  return fc
    .tuple(input, ids, pick(validCredentials(route, w)), pick(tokens))
    .map(([value, idValues, credential, refresh]) => {
      let draft: Draft = {
        params: (value.params ?? {}) as Record<string, string>,
        query: (value.query ?? {}) as Record<string, unknown>,
        body: value.body,
        headers: { ...credential },
      };
      idFields.forEach((f, i) => {
        const id = idValues[i];
        if (id !== undefined) draft = setIn(draft, f.location, f.name, id);
      });
      if (typeof value.body === "object" && value.body !== null && "refresh_token" in value.body)
        draft = setIn(draft, "body", "refresh_token", refresh);
      switch (route.credential.kind) {
        case "playback-path":
          return {
            ...draft,
            params: {
              token: draft.params.path?.length === 3 ? w.play.drm.token : w.play.clear.token,
              path: w.files[(draft.params.path?.length ?? 0) % w.files.length] ?? "master.m3u8",
            },
          };
        case "playback-body":
          return setIn(
            draft,
            "body",
            "token",
            (draft.body as { token: string }).token.length % 2 ? w.play.clear.token : w.play.drm.token,
          );
        case "license-header": {
          const kids = (draft.body as { kids: string[] }).kids;
          return setIn(draft, "body", "kids", kids.length % 2 ? [w.play.drm.kid, ...kids] : kids);
        }
        case "signed-url": {
          const url = new URL(w.uploads.open.parts[0]?.url ?? "http://x/");
          const [, , , id = "", , number = "1"] = url.pathname.split("/");
          return {
            ...draft,
            params: { id, number },
            query: Object.fromEntries(url.searchParams),
            body: "b".repeat(1_000),
          };
        }
        default:
          return draft;
      }
    });
};

// ---------------------------------------------------------------------------------------------
// Hostile classes: each turns valid-ish drafts into one kind of trouble.

export interface HostileClass {
  readonly name: string;
  readonly arbitrary: (route: FuzzRoute, ctx: FuzzContext) => fc.Arbitrary<WireRequest>;
}

/** The names of the string-valued top-level fields of a draft (params, query, body). */
const stringFields = (route: FuzzRoute, d: Draft): Array<["params" | "query" | "body", string]> => [
  ...Object.keys(d.params).map((k): ["params", string] => ["params", k]),
  ...Object.entries(d.query)
    .filter(([, v]) => typeof v === "string")
    .map(([k]): ["query", string] => ["query", k]),
  ...(route.body === "json" && typeof d.body === "object" && d.body !== null && !Array.isArray(d.body)
    ? Object.entries(d.body)
        .filter(([, v]) => typeof v === "string")
        .map(([k]): ["body", string] => ["body", k])
    : []),
];

/** Replaces one string field of the draft (chosen by `choice`) with `make(old)`; none: `fallback`. */
const replaceString = (
  route: FuzzRoute,
  d: Draft,
  choice: number,
  make: (old: string) => string,
  fallback: (d: Draft) => Draft,
): Draft => {
  const fields = stringFields(route, d);
  const field = fields[choice % Math.max(1, fields.length)];
  if (field === undefined) return fallback(d);
  const [location, name] = field;
  const old = String((d[location] as Record<string, unknown>)[name] ?? "");
  return setIn(d, location, name, make(old));
};

const hostile = (
  name: string,
  mutate: (route: FuzzRoute, ctx: FuzzContext) => fc.Arbitrary<(d: Draft) => Draft>,
): HostileClass => ({
  name,
  arbitrary: (route, ctx) =>
    fc.tuple(validDraft(route, ctx), mutate(route, ctx)).map(([d, f]) => toWire(route, f(d))),
});

const JSON_VALUE = fc.jsonValue({ maxDepth: 2 });
const WRONG_TYPED = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string(), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 }), { maxKeys: 2 }),
  fc.string({ maxLength: 10 }),
);

const BAD_PERCENT = [
  "%ZZ",
  "%E0%A4%A",
  "%",
  "%C0%AF",
  "%FF%FE",
  "%ED%A0%80",
  "%%41",
  "a%2",
  "%u0041",
  "%E0%A4",
  "%F4%90%80%80",
];

const STRANGE_STRINGS = [
  "a".repeat(100_000),
  "é".repeat(5_000),
  "😀".repeat(200),
  "😀".repeat(201),
  "\u202Eevil\u202C",
  "שלום עולם",
  "\ud800",
  "x\udfffy",
  "\uFEFF\u200B\u200D",
  "e\u0301\u0301\u0301",
  "\uFFFF\uFFFE",
  " ",
  "",
  "null",
  "<script>alert(1)</script>",
  "' OR 1=1 --",
  "$" + "{jndi:ldap://x}",
];

const TRAVERSAL = [
  "..",
  "../",
  "../..",
  "..%2F..%2Fetc%2Fpasswd",
  "%2e%2e",
  "%2e%2e%2f",
  ".",
  "..\\..\\x",
  "%5C..%5C",
];

const FILE_NAMES = [
  "master.m3u8%00.ts",
  "master.m3u8%00",
  "../master.m3u8",
  "..%2Fmaster.m3u8",
  "%2e%2e/%2e%2e/etc/passwd",
  "360p/../../../etc/passwd",
  "360p/./playlist.m3u8",
  ".hidden",
  `${"a".repeat(5_000)}.ts`,
  `${"360p/".repeat(500)}seg_1.m4s`,
  "master.m3u8/",
  "360p//seg_1.m4s",
  "%ZZ",
  "%E0%A4%A",
  "m%C3%A9dia.m3u8",
  "%F0%9F%98%80.ts",
  "MASTER.M3U8",
  "master.m3u8;x=1",
  "360p%2Fseg_1.m4s",
  "~",
  "*",
  "%00",
  "master.mpd",
  "360p/seg_999999999999999999999.m4s",
];

/** Headers that are not credentials but still reach the host: ranges, odd ids, long values. */
const ODD_HEADERS: Array<Record<string, string>> = [
  { range: "bytes=999999999-" },
  { range: "bytes=5-1" },
  { range: "bytes=-0" },
  { range: "bytes=0-0,5-6" },
  { range: "bytes=abc" },
  { range: `bytes=0-${"9".repeat(400)}` },
  { range: "bytes=-99999999999999999999" },
  { "x-request-id": "a".repeat(5_000) },
  { "x-request-id": "../../etc" },
  { "x-forwarded-for": "not an ip, 999.1.1.1" },
  { accept: "text/html" },
  { "if-none-match": "*" },
  { "x-long": "v".repeat(8_000) },
  { "transfer-encoding": "chunked" },
  { expect: "100-continue" },
];

const HOSTILE_CREDENTIALS = (route: FuzzRoute, ctx: FuzzContext): fc.Arbitrary<(d: Draft) => Draft> => {
  const { world: w, other } = ctx;
  const forge = (token: string) => `${token.slice(0, -4)}${token.slice(-4) === "AAAA" ? "BBBB" : "AAAA"}`;
  const bearers = [
    "",
    "garbage",
    "a.b.c",
    "v1.",
    "v1.a.b.c",
    forge(w.bearer),
    w.stale.bearer,
    w.victims.refreshTokens[0] ?? "",
    w.keys.admin.key,
    w.play.clear.token,
    forge(w.play.clear.token),
    w.stale.playback,
    w.play.drm.license,
    `v1.${w.bearer}`,
    "x".repeat(5_000),
    other.bearer,
  ];
  const apiKeys = [
    "",
    "garbage",
    forge(w.keys.admin.key),
    w.stale.revokedKey,
    w.bearer,
    w.play.clear.token,
    w.keys.read.key,
    "k".repeat(5_000),
  ];
  const headerSets: Array<Record<string, string>> = [
    {},
    ...bearers.map((b) => ({ authorization: `Bearer ${b}` })),
    ...apiKeys.map((k) => ({ "x-api-key": k })),
    { authorization: "Bearer" },
    { authorization: "Basic dXNlcjpwYXNz" },
    { authorization: `bearer  ${w.bearer} extra` },
    { authorization: `Bearer ${w.bearer}`, "x-api-key": "garbage" },
    { authorization: "Bearer garbage", "x-api-key": w.keys.admin.key },
    { "x-vod-license-token": forge(w.play.drm.license) },
    { "x-vod-license-token": w.play.drm.token },
    { "x-vod-license-token": w.bearer },
  ];
  const playTokens = [
    "",
    "garbage",
    "v1.",
    "v1.a.b.c",
    forge(w.play.clear.token),
    w.stale.playback,
    w.bearer,
    w.play.drm.license,
    other.play.clear.token,
    "v1.".padEnd(5_000, "x"),
  ];
  return fc
    .tuple(fc.constantFrom(...headerSets), fc.constantFrom(...playTokens), fc.nat())
    .map(([headers, token, n]) => (d: Draft) => {
      const base: Draft = { ...d, headers: { ...headers } };
      switch (route.credential.kind) {
        case "playback-path":
          return { ...base, params: { ...d.params, token } };
        case "playback-body":
          return setIn(base, "body", "token", n % 3 === 0 ? n : token);
        case "signed-url": {
          const q = d.query as Record<string, string>;
          const tampered = [
            { ...q, s: forge(String(q.s)) },
            { ...q, t: other.account.tenant.id },
            { ...q, e: "1" },
            { ...q, e: "99999999999999999999" },
            { t: q.t, e: q.e },
            {},
          ];
          return { ...base, query: tampered[n % tampered.length] ?? {} };
        }
        default:
          return base;
      }
    });
};

/**
 * Framing the HTTP client would not send, each a function of the request's head and body. Every
 * variant ends what it sends, so the server never waits for bytes that do not come.
 */
const FRAMINGS: ReadonlyArray<
  (head: { method: string; path: string; headers: string[] }, body: string) => string
> = [
  (h, b) => `${h.method} ${h.path} HTTP/1.1\r\n${h.headers.join("\r\n")}\r\ncontent-length: abc\r\n\r\n${b}`,
  (h, b) =>
    `${h.method} ${h.path} HTTP/1.1\r\n${h.headers.join("\r\n")}\r\ncontent-length: ${b.length}\r\ncontent-length: ${b.length + 1}\r\n\r\n${b}`,
  (h, b) => `${h.method} ${h.path} HTTP/1.1\r\n${h.headers.join("\r\n")}\r\ncontent-length: -1\r\n\r\n${b}`,
  (h, b) =>
    `${h.method} ${h.path} HTTP/1.1\r\n${h.headers.join("\r\n")}\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n${b}\r\n0\r\n\r\n`,
  (h, b) =>
    `${h.method} ${h.path} HTTP/1.1\r\n${h.headers.join("\r\n")}\r\ntransfer-encoding: chunked\r\ncontent-length: ${b.length}\r\n\r\n${b.length.toString(16)}\r\n${b}\r\n0\r\n\r\n`,
  (h, b) =>
    `${h.method} ${h.path} HTTP/1.1\r\n${h.headers.join("\r\n")}\r\ntransfer-encoding: gzip, chunked\r\n\r\n${b.length.toString(16)}\r\n${b}\r\n0\r\n\r\n`,
  (h, b) =>
    `${h.method} ${h.path} HTTP/1.1\r\n${h.headers.join("\r\n")}\r\nx-request-id: a\u0000b\r\ncontent-length: ${b.length}\r\n\r\n${b}`,
  (h, b) =>
    `${h.method} ${h.path}\u0000x HTTP/1.1\r\n${h.headers.join("\r\n")}\r\ncontent-length: ${b.length}\r\n\r\n${b}`,
  (h, b) => `${h.method} ${h.path} HTTP/1.1\n${h.headers.join("\n")}\ncontent-length: ${b.length}\n\n${b}`,
  (h, b) =>
    `${h.method} ${h.path} HTTP/1.1\r\n${h.headers.join("\r\n")}\r\nno colon here\r\ncontent-length: ${b.length}\r\n\r\n${b}`,
  (h, b) =>
    `${h.method} ${h.path} HTTP/1.1\r\n${h.headers.join("\r\n")}\r\nx-folded: a\r\n  b\r\ncontent-length: ${b.length}\r\n\r\n${b}`,
  (h, b) => `G(T ${h.path} HTTP/1.1\r\n${h.headers.join("\r\n")}\r\ncontent-length: ${b.length}\r\n\r\n${b}`,
  (h, b) =>
    `${h.method} ${h.path} HTTP/9.9\r\n${h.headers.join("\r\n")}\r\ncontent-length: ${b.length}\r\n\r\n${b}`,
  (h, b) =>
    `${h.method} ${h.path} HTTP/1.1\r\n${h.headers.join("\r\n")}\r\nx-big: ${"b".repeat(20_000)}\r\ncontent-length: ${b.length}\r\n\r\n${b}`,
  (h, b) =>
    `${h.method} ${h.path}/\u00e9\u00ff HTTP/1.1\r\n${h.headers.join("\r\n")}\r\ncontent-length: ${b.length}\r\n\r\n${b}`,
  (h, b) =>
    `${h.method} ${h.path} HTTP/1.1\r\n${h.headers.join("\r\n")}\r\ncontent-length: ${Math.max(0, b.length - 2)}\r\n\r\n${b}`,
  (h, b) =>
    `${h.method} ${h.path} HTTP/1.1\r\n${h.headers.join("\r\n")}\r\nhost: other\r\ncontent-length: ${b.length}\r\n\r\n${b}`,
  // Absolute-form targets (RFC 9112 3.2.2): one served as its path, one no URL parser takes.
  (h, b) =>
    `${h.method} http://127.0.0.1${h.path} HTTP/1.1\r\n${h.headers.join("\r\n")}\r\ncontent-length: ${b.length}\r\n\r\n${b}`,
  (h, b) =>
    `${h.method} http://[::1${h.path} HTTP/1.1\r\n${h.headers.join("\r\n")}\r\ncontent-length: ${b.length}\r\n\r\n${b}`,
];

/** Every hostile class the fuzz runs on every route. */
export const hostileClasses: ReadonlyArray<HostileClass> = [
  hostile("schema-valid", () => fc.constant((d: Draft) => d)),
  hostile("unknown fields", () =>
    fc
      .tuple(fc.string({ minLength: 1, maxLength: 12 }), JSON_VALUE, fc.boolean())
      .map(([key, value, inQuery]) => (d: Draft) => {
        const named = key === "__proto__" ? "titel" : key;
        // A query value is text: an object is sent as its JSON (one made without a prototype has no toString).
        if (inQuery)
          return setIn(
            d,
            "query",
            named,
            typeof value === "object" && value !== null ? JSON.stringify(value) : String(value),
          );
        return setIn(d, "body", named, value);
      }),
  ),
  hostile("wrong JSON types", (route) =>
    fc
      .tuple(WRONG_TYPED, fc.nat(), fc.integer({ min: 0, max: 4 }))
      .map(([value, choice, how]) => (d: Draft) => {
        if (how === 0) return { ...d, body: value };
        if (how === 1) return { ...d, query: { ...d.query, limit: ["1", "2"], status: { $ne: "x" } } };
        const fields = [
          ...stringFields(route, d),
          ...(typeof d.body === "object" && d.body !== null
            ? Object.keys(d.body).map((k): ["body", string] => ["body", k])
            : []),
        ].filter(([location]) => location === "body");
        const field = fields[choice % Math.max(1, fields.length)];
        return field ? setIn(d, "body", field[1], value) : { ...d, body: { [String(choice)]: value } };
      }),
  ),
  hostile("malformed JSON", () =>
    fc
      .tuple(
        fc.constantFrom(
          "{",
          "}",
          '{"a":}',
          "{'a':1}",
          "[1,2",
          '{"a":1,}',
          "nul",
          "NaN",
          "1e99999",
          '"\\ud800"',
          "\u0000",
          '{"a":"\\x00"}',
          `${"[".repeat(5_000)}${"]".repeat(5_000)}`,
          '{"a":1}{"b":2}',
          "\uFEFF{}",
          "",
        ),
        fc.nat(),
      )
      .map(([text, cut]) => (d: Draft) => {
        const valid = JSON.stringify(d.body ?? {});
        const raw = cut % 3 === 0 ? valid.slice(0, Math.max(1, cut % valid.length)) : text;
        return { ...d, rawBody: raw, headers: { ...d.headers, "content-type": "application/json" } };
      }),
  ),
  hostile("wrong Content-Type", () =>
    fc
      .constantFrom(
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "application/json; charset=utf-16",
        "application/json; charset=latin1",
        "application/json; charset=bogus",
        "application/vnd.api+json",
        "*/*",
        "application/json, text/plain",
        "",
        "text/plain; charset=utf-8",
      )
      .map((contentType) => (d: Draft) => ({
        ...d,
        body: d.body ?? {},
        headers: { ...d.headers, "content-type": contentType },
      })),
  ),
  hostile("Content-Encoding", () =>
    fc
      .tuple(
        fc.constantFrom(
          "gzip",
          "deflate",
          "br",
          "zstd",
          "compress",
          "x-unknown",
          "gzip, deflate",
          "identity",
          "GZIP",
          "gzip, gzip",
        ),
        fc.nat(),
      )
      .map(([encoding, how]) => (d: Draft) => {
        const json = Buffer.from(JSON.stringify(d.body ?? {}));
        const gz = gzipSync(json);
        const bodies = [
          json,
          gz.subarray(0, Math.max(1, gz.length - 5)),
          gz,
          Buffer.from([0x1f, 0x8b, 0, 0]),
        ];
        return {
          ...d,
          rawBody: bodies[how % bodies.length],
          headers: { ...d.headers, "content-encoding": encoding, "content-type": "application/json" },
        };
      }),
  ),
  hostile("NUL characters", (route) =>
    fc.tuple(fc.nat(), fc.nat(), fc.boolean()).map(([choice, at, rawInPath]) => (d: Draft) => {
      if (rawInPath && Object.keys(d.params).length > 0) {
        const name = Object.keys(d.params)[choice % Object.keys(d.params).length] ?? "id";
        return { ...d, rawParams: { [name]: `${encodeSegment(d.params[name] ?? "")}%00` } };
      }
      return replaceString(
        route,
        d,
        choice,
        (old) => `${old.slice(0, at % (old.length + 1))}\u0000${old.slice(at % (old.length + 1))}`,
        (x) => ({ ...x, rawQuery: "q=%00", body: route.body === "json" ? { "\u0000": "\u0000" } : x.body }),
      );
    }),
  ),
  hostile("huge and unicode strings", (route) =>
    fc.tuple(fc.constantFrom(...STRANGE_STRINGS), fc.nat()).map(
      ([value, choice]) =>
        (d: Draft) =>
          replaceString(
            route,
            d,
            choice,
            () => value,
            (x) => ({ ...x, query: { ...x.query, q: value } }),
          ),
    ),
  ),
  hostile("bad percent-encoding", () =>
    fc
      .tuple(fc.constantFrom(...BAD_PERCENT), fc.nat(), fc.integer({ min: 0, max: 2 }))
      .map(([bad, choice, where]) => (d: Draft) => {
        const names = Object.keys(d.params);
        if (where < 2 && names.length > 0) {
          const name = names[choice % names.length] ?? "id";
          return {
            ...d,
            rawParams: { [name]: where === 0 ? bad : `${encodeSegment(d.params[name] ?? "")}${bad}` },
          };
        }
        if (where === 1) return { ...d, pathSuffix: bad };
        return { ...d, rawQuery: `${bad}=${bad}&cursor=${bad}` };
      }),
  ),
  hostile("bad credentials", HOSTILE_CREDENTIALS),
  hostile("long and odd paths", () =>
    fc
      .tuple(
        fc.constantFrom(...TRAVERSAL, "x".repeat(5_000), "%F0%9F%98%80".repeat(500), ""),
        fc.nat(),
        fc.integer({ min: 0, max: 4 }),
      )
      .map(([segment, choice, how]) => (d: Draft) => {
        const names = Object.keys(d.params);
        if (how === 0 && names.length > 0)
          return { ...d, rawParams: { [names[choice % names.length] ?? "id"]: segment } };
        if (how === 1) return { ...d, pathSuffix: `/${segment}` };
        if (how === 2) return { ...d, pathSuffix: "/".repeat(1 + (choice % 3)) };
        if (how === 3) return { ...d, method: ["PATCH", "PUT", "OPTIONS", "DELETE", "TRACE"][choice % 5] };
        return { ...d, pathSuffix: "/a".repeat(1_000) };
      }),
  ),
  hostile("play file names and headers", (route) =>
    fc
      .tuple(fc.constantFrom(...FILE_NAMES), fc.constantFrom(...ODD_HEADERS), fc.boolean())
      .map(([file, headers, both]) => (d: Draft) => {
        const withHeaders = { ...d, headers: { ...d.headers, ...headers } };
        if (route.credential.kind !== "playback-path") return withHeaders;
        return {
          ...(both ? withHeaders : d),
          rawParams: { token: encodeSegment(d.params.token ?? ""), path: file },
        };
      }),
  ),
  {
    name: "broken HTTP framing",
    arbitrary: (route, ctx) =>
      fc.tuple(validDraft(route, ctx), fc.nat()).map(([d, n]): WireRequest => {
        const wire = toWire(route, d);
        const body = wire.body === undefined ? "" : Buffer.from(wire.body).toString("latin1");
        const headers = [
          "host: 127.0.0.1",
          "connection: close",
          ...Object.entries(wire.headers).map(([k, v]) => `${k}: ${v}`),
        ];
        const frame = FRAMINGS[n % FRAMINGS.length] ?? FRAMINGS[0];
        const text = frame ? frame({ method: wire.method, path: wire.path, headers }, body) : "";
        return { ...wire, raw: Buffer.from(text, "latin1") };
      }),
  },
  hostile("oversized bodies", () =>
    fc
      .tuple(fc.integer({ min: 16 * 1024, max: 200 * 1024 }), fc.boolean())
      .map(([size, asJson]) => (d: Draft) => {
        const filler = "z".repeat(size);
        if (!asJson) return { ...d, rawBody: filler };
        const body = typeof d.body === "object" && d.body !== null && !Array.isArray(d.body) ? d.body : {};
        return { ...d, body: { ...body, events: [], filler } };
      }),
  ),
];

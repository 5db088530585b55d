import type { WireReply, WireRequest } from "./wire.js";

/** DECISIONS "HTTP status codes": the status each error code goes out with. */
export const STATUS_OF_CODE: Readonly<Record<string, number>> = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  upload_in_progress: 409,
  conflict: 409,
  payload_too_large: 413,
  rate_limited: 429,
  internal_error: 500,
  storage_error: 503,
  playback_unavailable: 503,
};

/** What an error body must never show (DECISIONS "Hostile input"): stacks, file paths, SQL. */
const LEAKY = [
  /\n\s+at\s/,
  /\bat .*\.(?:ts|js):\d+/,
  /node_modules/,
  /\/(?:work|tmp|home|usr|var)\//,
  /\b(?:SELECT|INSERT INTO|UPDATE .* SET|DELETE FROM)\b/,
  /\brelation "/,
  /renditions\/[\w-]+\//,
  /origins?\/[\w-]+\//,
];

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * What is wrong with `reply` as an answer to a hostile request: a 5xx, an error that is not the
 * spec's JSON (`{error, code, message, details?}`, `error` equal to `code`, the status of the
 * code, `details` an object, and on invalid_request present, its `fields` a list of `{path, message}`), or
 * an error body that shows internals. Empty when the answer is acceptable.
 */
export const problemsOf = (req: WireRequest, reply: WireReply): string[] => {
  const problems: string[] = [];
  if (reply.status >= 500) problems.push(`status ${reply.status}`);
  if (reply.status < 400) return problems;
  // A range past the end of a media file: RFC 9110's 416 with Content-Range, no JSON.
  if (reply.status === 416 && req.path.startsWith("/v1/play/")) {
    if (!/^bytes \*\/\d+$/.test(String(reply.headers["content-range"])))
      problems.push("416 without Content-Range: bytes */size");
    return problems;
  }
  if (!/^application\/json\b/.test(String(reply.headers["content-type"])))
    problems.push(`error content-type ${reply.headers["content-type"] ?? "(none)"}`);
  // HEAD answers carry no body; the status and content type are all there is to check.
  if (req.method === "HEAD") return problems;
  let body: unknown;
  try {
    body = JSON.parse(reply.text);
  } catch {
    problems.push("error body is not JSON");
    return problems;
  }
  if (!isObject(body)) return [...problems, "error body is not a JSON object"];
  const keys = Object.keys(body).filter((k) => !["error", "code", "message", "details"].includes(k));
  if (keys.length > 0) problems.push(`error body has keys beyond the spec: ${keys.join(", ")}`);
  if (typeof body.code !== "string") problems.push("error body has no string code");
  if (body.error !== body.code) problems.push("error differs from code");
  if (typeof body.message !== "string" || body.message.length === 0)
    problems.push("error body has no message");
  const expected = typeof body.code === "string" ? STATUS_OF_CODE[body.code] : undefined;
  if (expected === undefined) problems.push(`unknown error code ${String(body.code)}`);
  else if (expected !== reply.status)
    problems.push(`code ${String(body.code)} sent with status ${reply.status}`);
  if ("details" in body && !isObject(body.details)) problems.push("details is not an object");
  // DECISIONS: invalid_request always carries details; where it names fields, as {path, message}.
  if (body.code === "invalid_request") {
    const fields = isObject(body.details) ? body.details.fields : undefined;
    if (!isObject(body.details)) problems.push("invalid_request without details");
    else if (
      fields !== undefined &&
      !(
        Array.isArray(fields) &&
        fields.every((f) => isObject(f) && Array.isArray(f.path) && typeof f.message === "string")
      )
    )
      problems.push("details.fields is not a list of {path, message}");
  }
  if (body.code === "rate_limited" && !/^\d+$/.test(String(reply.headers["retry-after"])))
    problems.push("rate_limited without an integer Retry-After");
  for (const pattern of LEAKY)
    if (pattern.test(reply.text)) problems.push(`error body shows internals (${pattern})`);
  return problems;
};

const hasNul = (value: unknown): boolean => {
  const pending = [value];
  for (let v = pending.pop(); v !== undefined || pending.length > 0; v = pending.pop()) {
    if (typeof v === "string" && v.includes("\0")) return true;
    if (typeof v === "object" && v !== null)
      for (const [k, item] of Object.entries(v)) {
        if (k.includes("\0")) return true;
        pending.push(item);
      }
  }
  return false;
};

/** What a route's decode refuses, for `catalogRuleProblems`. */
export interface CatalogRules {
  /** The names the route's body schema knows; undefined when it reads no body. */
  readonly bodyFields: ReadonlyArray<string> | undefined;
  /** Whether a NUL in the path or query is refused. */
  readonly nulInPath: boolean;
  /** Whether a NUL in the body is refused (false where the route never reads its body). */
  readonly nulInBody: boolean;
}

/**
 * DECISIONS "Hostile input" for the operation catalog, beyond the shape of errors: a JSON body
 * with a field the route does not know never succeeds (a typo like `titel` must not create an
 * "Untitled" asset), nor does a request with a NUL in any id, query value or body string, unless
 * the route leaves them to its use case (`rules`).
 */
export const catalogRuleProblems = (req: WireRequest, reply: WireReply, rules: CatalogRules): string[] => {
  if (reply.status < 200 || reply.status >= 300 || req.raw) return [];
  let body: unknown;
  try {
    body = typeof req.body === "string" ? JSON.parse(req.body) : undefined;
  } catch {
    body = undefined;
  }
  const problems: string[] = [];
  const { bodyFields } = rules;
  if (bodyFields !== undefined && typeof body === "object" && body !== null && !Array.isArray(body)) {
    const unknown = Object.keys(body).filter((k) => !bodyFields.includes(k));
    if (unknown.length > 0) problems.push(`succeeded with unknown body fields ${JSON.stringify(unknown)}`);
  }
  if ((rules.nulInPath && /%00/i.test(req.path)) || (rules.nulInBody && hasNul(body)))
    problems.push("succeeded with a NUL character in the request");
  return problems;
};

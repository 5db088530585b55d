import {
  errorCode,
  InvalidRequest,
  NotFound,
  PayloadTooLarge,
  type VodError,
  type VodErrorTag,
} from "@vod/core";
import { Cause, Option } from "effect";

/**
 * The one way a request's input becomes `invalid_request`: one `{ path, message }` per failing
 * field (the path relative to body, query or params; empty for the request as a whole) in
 * `details.fields`.
 */
export const invalidInput = (
  message: string,
  fields: ReadonlyArray<{ readonly path: ReadonlyArray<string | number>; readonly message: string }>,
) => new InvalidRequest({ message, details: { fields } });

/**
 * The HTTP status of each tag (DECISIONS, "HTTP status codes"): the one table every answer and
 * the OpenAPI document read.
 */
export const errorStatus: Record<VodErrorTag, number> = {
  InvalidRequest: 400,
  Unauthorized: 401,
  Forbidden: 403,
  NotFound: 404,
  UploadInProgress: 409,
  Conflict: 409,
  PayloadTooLarge: 413,
  RateLimited: 429,
  StorageError: 503,
  PlaybackUnavailable: 503,
  InternalError: 500,
};

export interface ErrorReply {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: { error: string; code: string; message: string; details?: Record<string, unknown> };
}

/** The spec's error body and status of a core error. Internal causes never reach the body. */
export const errorReply = (error: VodError): ErrorReply => {
  const code = errorCode[error._tag];
  const headers: Record<string, string> = {};
  let details: Record<string, unknown> | undefined;
  let message = error.message;
  switch (error._tag) {
    case "RateLimited":
      headers["retry-after"] = String(error.retryAfterSeconds);
      details = { retry_after: error.retryAfterSeconds };
      break;
    case "InvalidRequest":
    case "Conflict":
      details = error.details;
      break;
    case "Unauthorized":
      headers["www-authenticate"] = 'Bearer realm="vod"';
      details = error.details;
      break;
    // An adapter's own words (an object key, a file path, an errno) stay in the log.
    case "StorageError":
      message = "storage is unavailable, retry later";
      break;
    case "InternalError":
      message = "internal error";
      break;
  }
  return {
    status: errorStatus[error._tag],
    headers,
    body: { error: code, code, message, ...(details === undefined ? {} : { details }) },
  };
};

/** A failure of a core Effect: the expected error, or an internal error for a defect. */
export const replyForCause = (cause: Cause.Cause<VodError>): { reply: ErrorReply; defect?: unknown } => {
  const failure = Cause.failureOption(cause);
  if (Option.isSome(failure)) return { reply: errorReply(failure.value) };
  return {
    reply: errorReply({ _tag: "InternalError", message: "internal error" } as VodError),
    defect: Cause.squash(cause),
  };
};

/** The whole request, not one field of it: `details.fields` with the empty path. */
export const wholeRequest = (message: string, detail: string) =>
  invalidInput(message, [{ path: [], message: detail }]);

interface FrameworkError {
  readonly type?: unknown;
  readonly status?: unknown;
  readonly code?: unknown;
  readonly message?: unknown;
}

/**
 * The core error a failure of the framework stands for, when the request caused it: a path
 * parameter's decoding (bad percent-encoding), node's URL parser (a request target that is no
 * URL), body-parser (malformed JSON, a body not in its declared Content-Encoding, an unknown
 * encoding or charset, a body too large or cut short) and Node's HTTP parser (bad
 * Content-Length, bad chunking). `undefined`: not the client's doing, a 500.
 * The framework's own message (which may quote the input or name a zlib internal) is not reused.
 */
export const requestErrorOf = (err: unknown): VodError | undefined => {
  if (typeof err !== "object" || err === null) return undefined;
  const { type, status, code, message } = err as FrameworkError;
  if (err instanceof URIError)
    return wholeRequest("the request path is not valid percent-encoding", "malformed percent-encoding");
  // node's URL parser: an absolute-form request target that is no URL (`http://[::1/x`).
  if (code === "ERR_INVALID_URL")
    return wholeRequest("the request target is not a valid URL", "malformed URL");
  switch (type) {
    case "entity.parse.failed": {
      // V8's message quotes the body (a password, perhaps): only the position is kept.
      const at = typeof message === "string" ? /position (\d+)/.exec(message)?.[1] : undefined;
      return wholeRequest(
        "request body is not valid JSON",
        at ? `malformed JSON at position ${at}` : "malformed JSON",
      );
    }
    case "entity.too.large":
      return new PayloadTooLarge({ message: "request body is too large" });
    case "encoding.unsupported":
      return wholeRequest("unsupported Content-Encoding", "use gzip, deflate, br or none");
    case "charset.unsupported":
      return wholeRequest("unsupported charset", "send JSON as UTF-8");
    case "request.size.invalid":
      return wholeRequest("request body does not match its Content-Length", "wrong Content-Length");
    case "request.aborted":
      return wholeRequest("request body was cut short", "incomplete body");
  }
  // zlib: the body is not in the Content-Encoding it declares (body-parser passes these on as 400s).
  if (typeof code === "string" && /^(Z_|ERR_BROTLI|ERR_ZLIB|ERR_ZSTD)/.test(code))
    return wholeRequest("request body is not in its declared Content-Encoding", "cannot decode the body");
  // Node's HTTP parser: the request is not well-framed HTTP/1.1.
  if (typeof code === "string" && code.startsWith("HPE_"))
    return wholeRequest("malformed HTTP request", "the request is not valid HTTP/1.1");
  if (status === 404) return new NotFound({ message: "not found" });
  if (status === 413) return new PayloadTooLarge({ message: "request body is too large" });
  if (typeof status === "number" && status >= 400 && status < 500)
    return wholeRequest("the request could not be read", "malformed request");
  return undefined;
};

import { errorCode, type VodError, type VodErrorTag } from "@vod/core";
import { Cause, Option } from "effect";

/** The one table from the core's tagged errors to HTTP statuses (DECISIONS, "HTTP status codes"). */
export const statusOf: Record<VodErrorTag, number> = {
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
      details = error.details;
      break;
    case "Unauthorized":
      headers["www-authenticate"] = 'Bearer realm="vod"';
      break;
    case "InternalError":
      message = "internal error";
      break;
  }
  return {
    status: statusOf[error._tag],
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

import { Data } from "effect";

/**
 * One tagged error per code of the spec's part 7, plus `Conflict` and `InternalError`.
 * The core raises these; `@vod/http` answers each with its status and the spec's JSON body.
 */
export class InvalidRequest extends Data.TaggedError("InvalidRequest")<{
  readonly message: string;
  readonly details?: Record<string, unknown>;
}> {}

/** `details.reason` names what a client acts on (`sign_in_too_old`: sign in again). */
export class Unauthorized extends Data.TaggedError("Unauthorized")<{
  readonly message: string;
  readonly details?: Record<string, unknown>;
}> {}

export class Forbidden extends Data.TaggedError("Forbidden")<{ readonly message: string }> {}

export class NotFound extends Data.TaggedError("NotFound")<{ readonly message: string }> {}

export class UploadInProgress extends Data.TaggedError("UploadInProgress")<{ readonly message: string }> {}

/**
 * The spec's "conflict-type error": duplicate email, identity linked elsewhere, and the like.
 * `details.reason` names a conflict a client acts on (`quota_exceeded`).
 */
export class Conflict extends Data.TaggedError("Conflict")<{
  readonly message: string;
  readonly details?: Record<string, unknown>;
}> {}

export class RateLimited extends Data.TaggedError("RateLimited")<{
  readonly message: string;
  readonly retryAfterSeconds: number;
}> {}

export class StorageError extends Data.TaggedError("StorageError")<{
  readonly message: string;
  readonly cause?: unknown;
}> {}

export class PlaybackUnavailable extends Data.TaggedError("PlaybackUnavailable")<{
  readonly message: string;
  readonly cause?: unknown;
}> {}

export class PayloadTooLarge extends Data.TaggedError("PayloadTooLarge")<{ readonly message: string }> {}

export class InternalError extends Data.TaggedError("InternalError")<{
  readonly message: string;
  readonly cause?: unknown;
}> {}

export type VodError =
  | InvalidRequest
  | Unauthorized
  | Forbidden
  | NotFound
  | UploadInProgress
  | Conflict
  | RateLimited
  | StorageError
  | PlaybackUnavailable
  | PayloadTooLarge
  | InternalError;

export type VodErrorTag = VodError["_tag"];

/** The spec's error code of each tag (part 7, and `conflict` / `internal_error` from DECISIONS). */
export const errorCode: Record<VodErrorTag, string> = {
  InvalidRequest: "invalid_request",
  Unauthorized: "unauthorized",
  Forbidden: "forbidden",
  NotFound: "not_found",
  UploadInProgress: "upload_in_progress",
  Conflict: "conflict",
  RateLimited: "rate_limited",
  StorageError: "storage_error",
  PlaybackUnavailable: "playback_unavailable",
  PayloadTooLarge: "payload_too_large",
  InternalError: "internal_error",
};

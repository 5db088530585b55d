import { Cause, Effect, Exit, Option } from "effect";
import { Conflict, errorCode, errorStatus, InvalidRequest, type VodError } from "../errors.js";
import type { IdempotentResponse } from "../ports/repositories.js";
import { sha256Hex } from "../use-cases/support.js";
import type { Vod } from "../vod.js";
import { headerOf, type RawRequest, type Reply } from "./operation.js";

/** How long a key replays its first response (DECISIONS: 24 hours). */
export const IDEMPOTENCY_KEY_LIFETIME_MS = 24 * 60 * 60_000;
/**
 * How long a running first request holds its key: past it, a node that died mid-request no longer
 * blocks the key (409), and a retry runs. Longer than any API request takes.
 */
export const IDEMPOTENCY_LOCK_MS = 5 * 60_000;

export const IDEMPOTENT_REPLAYED_HEADER = "idempotent-replayed";

/** 1 to 255 printable ASCII characters (space to tilde). */
const VALID_KEY = /^[\x20-\x7e]{1,255}$/;

const invalidKey = (message: string) =>
  new InvalidRequest({
    message: `Idempotency-Key ${message}`,
    details: { fields: [{ path: ["headers", "idempotency-key"], message }] },
  });

/**
 * Which first responses a key replays: successes and the client's own errors (4xx), as Stripe
 * does. A 5xx (storage down, a defect) and a 429 say nothing about the request itself: the key is
 * released, and a retry runs the request again.
 */
const replayable = (status: number) => status < 500 && status !== 429;

/** The spec's error body of a use case's error, as the host would send it (4xx only reach here). */
const errorResponse = (error: VodError): IdempotentResponse => {
  const details = error._tag === "InvalidRequest" ? error.details : undefined;
  const code = errorCode[error._tag];
  return {
    status: errorStatus[error._tag],
    body: { error: code, code, message: error.message, ...(details === undefined ? {} : { details }) },
  };
};

const replay = (response: IdempotentResponse): Reply => ({
  status: response.status,
  ...(response.body === null ? {} : { body: response.body }),
  headers: { [IDEMPOTENT_REPLAYED_HEADER]: "true" },
});

/**
 * Runs `work` (an authenticated POST, decoded already) under the request's Idempotency-Key, when it
 * has one: within 24 hours the same tenant, key, method, path and body replay the first response
 * with `Idempotent-Replayed: true`; the key with another request is 400
 * (`details.reason: "idempotency_key_reused"`); the key while its first request runs is 409.
 */
export const idempotent = (
  vod: Vod,
  request: RawRequest,
  call: { readonly tenantId: string; readonly method: string; readonly path: string },
  work: Effect.Effect<Reply, VodError>,
): Effect.Effect<Reply, VodError> => {
  const key = headerOf(request, "idempotency-key");
  if (key === undefined || call.method !== "POST") return work;
  if (!VALID_KEY.test(key)) return Effect.fail(invalidKey("must be 1 to 255 printable ASCII characters"));
  const store = vod.ports.storage.idempotencyKeys;
  const { tenantId } = call;
  // The path as requested (its parameters filled in), the query and the body as decoded JSON:
  // the same request sent again reads the same.
  const fingerprint = sha256Hex(
    JSON.stringify([call.method, call.path, request.params, request.query ?? {}, request.body ?? null]),
  );
  return Effect.gen(function* () {
    const now = vod.ports.clock.now();
    const claim = yield* store.claim(tenantId, key, fingerprint, {
      now,
      lockedUntil: now + IDEMPOTENCY_LOCK_MS,
      expiresAt: now + IDEMPOTENCY_KEY_LIFETIME_MS,
    });
    if (claim._tag !== "Claimed" && claim.fingerprint !== fingerprint)
      return yield* Effect.fail(
        new InvalidRequest({
          message: "this Idempotency-Key was used for another request",
          details: { reason: "idempotency_key_reused" },
        }),
      );
    if (claim._tag === "Running")
      return yield* Effect.fail(
        new Conflict({ message: "a request with this Idempotency-Key is still running" }),
      );
    if (claim._tag === "Done") return replay(claim.response);

    // Every way out settles the key: a response to replay is stored; anything else (a 5xx, a
    // defect, an interruption) releases it. A store failing here leaves the key held until its
    // lock ends; the client still gets the answer its request earned, not a 503 for a done deed.
    const settle = (exit: Exit.Exit<Reply, VodError>) => {
      const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none();
      const response: IdempotentResponse | undefined = Exit.isSuccess(exit)
        ? { status: exit.value.status, body: exit.value.body ?? null }
        : Option.isSome(failure)
          ? errorResponse(failure.value)
          : undefined;
      return Effect.ignore(
        response !== undefined && replayable(response.status)
          ? store.complete(tenantId, key, fingerprint, response)
          : store.release(tenantId, key, fingerprint),
      );
    };
    return yield* Effect.onExit(work, settle);
  });
};

/**
 * Removes Idempotency-Key records past their 24 hours, up to `limit`; run now and then by workers.
 * Claims treat an expired record as absent already: this only keeps the table small.
 */
export const sweepIdempotencyKeys = (vod: Vod, limit = 1_000) =>
  vod.ports.storage.idempotencyKeys.deleteExpired(vod.ports.clock.now(), limit);

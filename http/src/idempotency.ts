import {
  Conflict,
  derivedKey,
  hmacBase64Url,
  type IdempotentResponse,
  InternalError,
  InvalidRequest,
  type Principal,
  type Sealer,
  sealer,
  type TenantId,
  type Vod,
  type VodError,
} from "@vod/core";
import { Cause, Effect, Exit, Option } from "effect";
import { errorReply } from "./errors.js";
import { headerOf, type RawRequest, type Reply } from "./request.js";

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

/**
 * How an Idempotency-Key applies to an authenticated POST of the catalog:
 * - `recorded: false`: never recorded nor replayed, the request runs every time (logout, password
 *   change: a replay would answer 204 and leave the session or the password as it was);
 * - `secrets`: paths of the reply's fields that carry a secret (a full API key, a signing secret),
 *   stored sealed under the master key and opened only on a replay to the same principal.
 */
export type IdempotencyRule =
  | { readonly recorded: false }
  | { readonly recorded?: true; readonly secrets?: ReadonlyArray<ReadonlyArray<string>> };

/** Whose record a key is: another credential of the tenant with the same key is a new request. */
export const idempotencyPrincipal = (principal: Principal): string =>
  principal.kind === "user" ? `user:${principal.user.id}` : `api_key:${principal.keyId}`;

/** The keys a Vod's records are made with, derived once from its master key, each under its label. */
interface RecordKeys {
  /** Fingerprints are HMACs: a body (a password) is not to be found from its record. */
  readonly fingerprint: Uint8Array;
  readonly secrets: Sealer;
}
const recordKeys = new WeakMap<Vod, RecordKeys>();
const recordKeysOf = (vod: Vod): RecordKeys => {
  let keys = recordKeys.get(vod);
  if (keys === undefined) {
    const master = vod.config.drmMasterKey;
    keys = {
      fingerprint: derivedKey(master, "vod idempotency fingerprints v1"),
      secrets: sealer(master, "vod idempotency secrets v1", vod.ports.ids.randomBytes),
    };
    recordKeys.set(vod, keys);
  }
  return keys;
};

/** The body with the string at `path` replaced by `change` of it; the rest shared, not copied. */
const changedAt = (
  body: unknown,
  path: ReadonlyArray<string>,
  change: (value: string) => string,
): unknown => {
  const [head, ...rest] = path;
  if (head === undefined) return typeof body === "string" ? change(body) : body;
  if (typeof body !== "object" || body === null || Array.isArray(body) || !(head in body)) return body;
  return { ...body, [head]: changedAt((body as Record<string, unknown>)[head], rest, change) };
};

const changedSecrets = (
  response: IdempotentResponse,
  paths: ReadonlyArray<ReadonlyArray<string>>,
  change: (value: string) => string,
): IdempotentResponse =>
  paths.length === 0
    ? response
    : { ...response, body: paths.reduce((body, path) => changedAt(body, path, change), response.body) };

/** A use case's error as answered (4xx only reach here). */
const errorResponse = (error: VodError): IdempotentResponse => {
  const { status, body } = errorReply(error);
  return { status, body };
};

const replay = (response: IdempotentResponse): Reply => ({
  status: response.status,
  ...(response.body === null ? {} : { body: response.body }),
  headers: { [IDEMPOTENT_REPLAYED_HEADER]: "true" },
});

/**
 * Runs `work` (an authenticated POST, decoded already) under the request's Idempotency-Key, when it
 * has one and the operation is recorded (`rule`): within 24 hours the same principal, key, method,
 * path and body replay the first response with `Idempotent-Replayed: true`; the key with another
 * request is 400 (`details.reason: "idempotency_key_reused"`); the key while its first request
 * runs is 409.
 */
export const idempotent = (
  vod: Vod,
  request: RawRequest,
  call: {
    readonly tenantId: TenantId;
    /** `idempotencyPrincipal` of the credential. */
    readonly principal: string;
    readonly method: string;
    readonly path: string;
    readonly rule?: IdempotencyRule | undefined;
  },
  work: Effect.Effect<Reply, VodError>,
): Effect.Effect<Reply, VodError> => {
  const key = headerOf(request, "idempotency-key");
  const rule = call.rule;
  if (key === undefined || call.method !== "POST" || rule?.recorded === false) return work;
  if (!VALID_KEY.test(key)) return Effect.fail(invalidKey("must be 1 to 255 printable ASCII characters"));
  const store = vod.ports.storage.idempotencyKeys;
  const { tenantId, principal } = call;
  const keys = recordKeysOf(vod);
  const secretPaths = rule?.secrets ?? [];
  // A sealed secret opens only in the record it was sealed for.
  const context = JSON.stringify([tenantId, principal, key]);
  // The path as requested (its parameters filled in), the query and the body as decoded JSON:
  // the same request sent again reads the same.
  const fingerprint = hmacBase64Url(
    keys.fingerprint,
    JSON.stringify([call.method, call.path, request.params, request.query ?? {}, request.body ?? null]),
  );
  return Effect.gen(function* () {
    const now = vod.ports.clock.now();
    const claim = yield* store.claim(tenantId, principal, key, fingerprint, {
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
    if (claim._tag === "Done") {
      const response = claim.response;
      const opened = yield* Effect.try({
        try: () => changedSecrets(response, secretPaths, (sealed) => keys.secrets.open(sealed, context)),
        catch: (cause) =>
          new InternalError({
            message: "an Idempotency-Key record does not open with the master key",
            cause,
          }),
      });
      return replay(opened);
    }

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
          ? Effect.flatMap(
              Effect.try(() =>
                changedSecrets(response, secretPaths, (secret) => keys.secrets.seal(secret, context)),
              ),
              (sealed) => store.complete(tenantId, principal, key, fingerprint, sealed),
            )
          : store.release(tenantId, principal, key, fingerprint),
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

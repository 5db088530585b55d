import { Effect, Either, Option } from "effect";
import type { VodConfig } from "../config.js";
import { type Asset, canStartUpload, transitionAsset } from "../domain/asset.js";
import type { TenantId, UploadId } from "../domain/ids.js";
import { originKey } from "../domain/object-keys.js";
import { includesScope } from "../domain/scope.js";
import {
  expectedPartSize,
  partCountFor,
  partSizeFor,
  transitionUpload,
  UPLOAD_SESSION_LIFETIME_MS,
  type UploadedPart,
  type UploadSession,
  uploadStatus,
} from "../domain/upload-session.js";
import {
  InternalError,
  InvalidRequest,
  NotFound,
  type StorageError,
  Unauthorized,
  UploadInProgress,
} from "../errors.js";
import type { PartChecksums } from "../ports/media-processor.js";
import type { ByteStream, MultipartRef, ObjectStore } from "../ports/object-store.js";
import type { Requests } from "../schema/index.js";
import type { VodPorts } from "../tokens.js";
import { type Principal, refuseUnlessActive, type TenantIsActive } from "./authenticate.js";
import { constantTimeEqual, hmacBase64Url, orNotFound } from "./support.js";
import { eventRecorder } from "./webhooks.js";

type StartInput = typeof Requests.StartUploadBody.Type;
type CompleteInput = typeof Requests.CompleteUploadBody.Type;

const refOf = (session: UploadSession): MultipartRef => ({
  uploadId: session.id,
  key: originKey(session.tenant_id, session.asset_id),
});

const unquote = (etag: string) =>
  etag
    .trim()
    .replace(/^W\//, "")
    .replace(/^"(.*)"$/, "$1");

const conflict = (message: string) => new UploadInProgress({ message });

/** The fields of a session as the spec's resume and complete responses show them. */
const view = (session: UploadSession, now: number) => ({
  id: session.id,
  asset_id: session.asset_id,
  status: uploadStatus(session, now),
  part_size: session.part_size,
  part_count: session.part_count,
  size_bytes: session.size_bytes,
  expires_at: session.expires_at,
  created_at: session.created_at,
  completed_at: session.completed_at,
});

/**
 * The part sha256s a completed upload kept for processing to check (the store could not), or
 * undefined when there are none.
 */
export const declaredPartSha256 = (
  storage: VodPorts["storage"],
  tenantId: TenantId,
  uploadId: UploadId | undefined,
): Effect.Effect<PartChecksums | undefined, StorageError> =>
  uploadId === undefined
    ? Effect.succeed(undefined)
    : Effect.map(storage.uploads.get(tenantId, uploadId), (found) => {
        if (Option.isNone(found)) return undefined;
        const sha256 = new Map(
          (found.value.completed_parts ?? []).flatMap(({ number, sha256 }) =>
            sha256 === undefined ? [] : [[number, sha256] as const],
          ),
        );
        return sha256.size === 0 ? undefined : { partSize: found.value.part_size, sha256 };
      });

export const makeUploads = (ports: VodPorts, config: VodConfig, tenantIsActive: TenantIsActive) => {
  const { clock, ids, storage } = ports;
  const store: ObjectStore = ports.objectStore;
  const recordEvent = eventRecorder(ports);
  if (!store.partUploadUrls && !store.receivePart)
    throw new Error(
      "the object store must either sign part URLs (partUploadUrls) or receive parts (receivePart)",
    );

  // Part URLs of the media app carry the tenant, the expiry and an HMAC binding both to the
  // upload and part number: a URL is a write capability for exactly one part until it expires.
  const signature = (tenantId: TenantId, uploadId: UploadId, n: number, expiresSec: number) =>
    hmacBase64Url(config.uploadUrlSecret, `part-url\n${tenantId}\n${uploadId}\n${n}\n${expiresSec}`);

  const mediaAppUrl = (session: UploadSession, n: number) => {
    const expiresSec = Math.floor(session.expires_at / 1000);
    return ports.links.partUpload({
      uploadId: session.id,
      number: n,
      tenantId: session.tenant_id,
      expiresSec,
      signature: signature(session.tenant_id, session.id, n, expiresSec),
    });
  };

  // A store signs the whole batch at once (a signing key or credentials fetched once for all).
  const partUrls = (
    session: UploadSession,
    numbers: ReadonlyArray<number>,
  ): Effect.Effect<ReadonlyArray<{ number: number; url: string }>, StorageError> =>
    store.partUploadUrls
      ? Effect.map(
          store.partUploadUrls(
            refOf(session),
            numbers.map((number) => ({ number, size: expectedPartSize(session, number) })),
            session.expires_at,
          ),
          (urls) => numbers.map((number, i) => ({ number, url: urls[i]! })),
        )
      : Effect.succeed(numbers.map((number) => ({ number, url: mediaAppUrl(session, number) })));

  /** A session past its expiry is closed as expired, and its parts removed, when it is next seen. */
  const settleExpiry = (session: UploadSession) =>
    Effect.gen(function* () {
      if (session.status !== "created" || uploadStatus(session, clock.now()) !== "expired") return session;
      yield* storage.uploads.close(session.tenant_id, session.id, "expired");
      yield* store.abortMultipart(refOf(session));
      return { ...session, status: "expired" as const };
    });

  const getSession = (principal: Principal, id: UploadId) =>
    Effect.flatMap(orNotFound("upload")(storage.uploads.get(principal.tenant.id, id)), settleExpiry);

  const start = (principal: Principal, input: StartInput) =>
    Effect.gen(function* () {
      const tenantId = principal.tenant.id;
      const asset = yield* orNotFound("asset")(storage.assets.get(tenantId, input.asset_id));
      if (!canStartUpload(asset))
        return yield* Effect.fail(conflict(`asset is ${asset.status}: its bytes are uploaded already`));
      const open = yield* storage.uploads.findOpen(tenantId, asset.id);
      if (Option.isSome(open) && (yield* settleExpiry(open.value)).status === "created")
        return yield* Effect.fail(conflict("an upload is already in progress for this asset"));
      const now = clock.now();
      const partSize = partSizeFor(input.size_bytes);
      const session: UploadSession = {
        id: ids.id("upload"),
        tenant_id: tenantId,
        asset_id: asset.id,
        status: "created",
        part_size: partSize,
        part_count: partCountFor(input.size_bytes, partSize),
        size_bytes: input.size_bytes,
        sha256: input.sha256 ?? null,
        expires_at: now + UPLOAD_SESSION_LIFETIME_MS,
        created_at: now,
        completed_at: null,
        completed_parts: null,
      };
      yield* store.createMultipart(refOf(session));
      // Two starts at once: the unique open session per asset lets one in.
      yield* Effect.mapError(storage.uploads.insert(session), (e) =>
        e._tag === "Conflict" ? conflict("an upload is already in progress for this asset") : e,
      );
      const parts = yield* partUrls(
        session,
        Array.from({ length: session.part_count }, (_, i) => i + 1),
      );
      const { id, asset_id, part_size, part_count, size_bytes, expires_at } = session;
      return { upload: { id, asset_id, part_size, part_count, size_bytes, expires_at, parts } };
    });

  const resume = (principal: Principal, id: UploadId) =>
    Effect.gen(function* () {
      const session = yield* getSession(principal, id);
      const now = clock.now();
      const status = uploadStatus(session, now);
      let uploaded: ReadonlyArray<UploadedPart> = [];
      let missing: ReadonlyArray<{ number: number; url: string }> = [];
      if (status === "completed")
        uploaded = (session.completed_parts ?? []).map(({ number, size, etag }) => ({ number, size, etag }));
      if (status === "created") {
        const stored = yield* store.listParts(refOf(session));
        uploaded = stored.map(({ number, size, etag }) => ({ number, size, etag }));
        const have = new Set(stored.map((p) => p.number));
        const absent = Array.from({ length: session.part_count }, (_, i) => i + 1).filter(
          (n) => !have.has(n),
        );
        // An upload URL is a write capability: a read-scoped caller sees which parts are missing, not URLs.
        if (includesScope(principal.scope, "write")) missing = yield* partUrls(session, absent);
      }
      return { upload: { ...view(session, now), uploaded_parts: uploaded, missing_part_urls: missing } };
    });

  /** A PUT on a part URL of the media app: the signed URL is the credential. */
  const receivePart = (
    request: {
      uploadId: UploadId;
      number: number;
      tenantId: TenantId;
      expiresSec: number;
      signature: string;
    },
    body: ByteStream,
  ) =>
    Effect.gen(function* () {
      // A store that signs its own part URLs (a bucket) never hands out this route: nothing here.
      const receive = store.receivePart;
      if (!receive)
        return yield* Effect.fail(new NotFound({ message: "parts go to the object store's own URLs" }));
      const now = clock.now();
      const expected = signature(request.tenantId, request.uploadId, request.number, request.expiresSec);
      if (!constantTimeEqual(expected, request.signature) || request.expiresSec * 1000 <= now)
        return yield* Effect.fail(new Unauthorized({ message: "invalid or expired part upload URL" }));
      // A URL handed out before the tenant was suspended is still signed: the tenant is not served.
      yield* refuseUnlessActive(yield* tenantIsActive(request.tenantId));
      const found = yield* storage.uploads.get(request.tenantId, request.uploadId);
      if (Option.isNone(found)) return yield* Effect.fail(new NotFound({ message: "upload not found" }));
      const session = yield* settleExpiry(found.value);
      if (session.status !== "created") return yield* Effect.fail(conflict(`upload is ${session.status}`));
      if (request.number > session.part_count)
        return yield* Effect.fail(
          new InvalidRequest({
            message: `upload has ${session.part_count} parts`,
            details: {
              fields: [{ path: ["number"], message: `must be between 1 and ${session.part_count}` }],
            },
          }),
        );
      const expectedSize = expectedPartSize(session, request.number);
      const part = yield* Effect.catchTag(
        receive(refOf(session), { number: request.number, expectedSize }, body),
        "PartRejected",
        (rejected) =>
          Effect.fail(
            new InvalidRequest({
              message: `part ${request.number} must be exactly ${expectedSize} bytes`,
              details: {
                reason: "wrong_size",
                expected_size: expectedSize,
                received_size: rejected.received,
              },
            }),
          ),
      );
      return { etag: part.etag };
    });

  /** The 400 of a completion whose parts are missing or do not match, from either check. */
  const partsRefused = (
    session: UploadSession,
    missing: ReadonlyArray<number>,
    mismatched: ReadonlyArray<{ number: number; reason: string }>,
  ) =>
    new InvalidRequest({
      message:
        missing.length > 0
          ? `upload is incomplete: ${missing.length} of ${session.part_count} parts missing`
          : "stored parts do not match",
      details: { missing_parts: missing, mismatched_parts: mismatched },
    });
  const SHA256_DIFFERS = "sha256 differs from the stored part";

  /** What the store holds, checked against the session and the client's own list. */
  const verify = (session: UploadSession, claimed: CompleteInput["parts"]) =>
    Effect.gen(function* () {
      const stored = new Map((yield* store.listParts(refOf(session))).map((p) => [p.number, p]));
      const missing: number[] = [];
      const mismatched: Array<{ number: number; reason: string }> = [];
      for (let n = 1; n <= session.part_count; n++) {
        const part = stored.get(n);
        if (!part) missing.push(n);
        else if (part.size !== expectedPartSize(session, n))
          mismatched.push({
            number: n,
            reason: `size ${part.size}, expected ${expectedPartSize(session, n)}`,
          });
      }
      for (const given of claimed ?? []) {
        const part = stored.get(given.number);
        if (given.number > session.part_count)
          mismatched.push({ number: given.number, reason: "no such part" });
        else if (!part)
          continue; // reported as missing
        else if (given.etag !== undefined && unquote(given.etag) !== part.etag)
          mismatched.push({ number: given.number, reason: "etag differs from the stored part" });
        else if (given.sha256 !== undefined && part.sha256 !== null && given.sha256 !== part.sha256)
          mismatched.push({ number: given.number, reason: SHA256_DIFFERS });
      }
      if (missing.length > 0 || mismatched.length > 0)
        return yield* Effect.fail(partsRefused(session, missing, mismatched));
      return [...stored.values()].sort((a, b) => a.number - b.number);
    });

  const completedAnswer = (session: UploadSession) =>
    Effect.map(orNotFound("asset")(storage.assets.get(session.tenant_id, session.asset_id)), (asset) => ({
      upload: view(session, clock.now()),
      asset,
    }));

  const complete = (principal: Principal, id: UploadId, input: CompleteInput) =>
    Effect.gen(function* () {
      const session = yield* getSession(principal, id);
      const now = clock.now();
      const next = transitionUpload(session, { type: "complete" }, now);
      if (Either.isLeft(next)) return yield* Effect.fail(conflict(`upload is ${next.left.from}`));
      if (session.status === "completed") return yield* completedAnswer(session);

      const parts = yield* verify(session, input.parts);
      const ref = refOf(session);
      // A part sha256 the store could not check on receipt is checked while it assembles.
      const unchecked = new Map(
        (input.parts ?? []).flatMap((given) =>
          given.sha256 !== undefined && parts.find((p) => p.number === given.number)?.sha256 === null
            ? [[given.number, given.sha256] as const]
            : [],
        ),
      );
      const assembled = yield* Effect.catchTag(
        store.completeMultipart(
          ref,
          parts.map((p) => p.number),
          { partSha256: unchecked },
        ),
        "PartsMismatched",
        (mismatch) =>
          Effect.fail(
            partsRefused(
              session,
              [],
              mismatch.parts.map(({ number }) => ({ number, reason: SHA256_DIFFERS })),
            ),
          ),
      );
      if (assembled.size !== session.size_bytes)
        return yield* Effect.fail(
          new InternalError({ message: `assembled ${assembled.size} bytes, expected ${session.size_bytes}` }),
        );
      if (session.sha256 !== null && assembled.sha256 !== null && assembled.sha256 !== session.sha256) {
        // The bytes are not the ones declared: nothing of them is kept, the client uploads again.
        // Ids have a fixed length, so no other origin key starts with this one.
        yield* store.deletePrefix(ref.key);
        return yield* Effect.fail(
          new InvalidRequest({
            message: "the uploaded file's sha256 differs from the one declared at start",
            details: { reason: "sha256_mismatch", declared: session.sha256, actual: assembled.sha256 },
          }),
        );
      }
      // Part sha256s nothing could check yet are kept for processing, which reads the bytes.
      const declared = assembled.sha256 === null ? unchecked : new Map<number, string>();
      const completedParts = parts.map(({ number, size, etag }) => {
        const sha256 = declared.get(number);
        return sha256 === undefined ? { number, size, etag } : { number, size, etag, sha256 };
      });
      // Session, asset and processing job commit together: no completed upload without its job.
      const won = yield* storage.transaction((tx) =>
        Effect.gen(function* () {
          if (!(yield* tx.uploads.complete(session.tenant_id, session.id, now, completedParts))) return false;
          const asset = yield* orNotFound("asset")(tx.assets.get(session.tenant_id, session.asset_id));
          const uploaded = transitionAsset(
            asset,
            {
              type: "upload_completed",
              origin_size_bytes: assembled.size,
              checksum_sha256: assembled.sha256 ?? session.sha256,
            },
            now,
          );
          if (Either.isLeft(uploaded))
            return yield* Effect.fail(conflict(`asset is ${asset.status}: its bytes are uploaded already`));
          yield* tx.assets.update(uploaded.right);
          const upload: UploadSession = {
            ...session,
            status: "completed",
            completed_at: now,
            completed_parts: completedParts,
          };
          yield* recordEvent(tx, session.tenant_id, "asset.uploaded", { asset: uploaded.right });
          yield* recordEvent(tx, session.tenant_id, "upload.completed", { upload, asset: uploaded.right });
          yield* tx.jobs.enqueue("process-asset", {
            tenant_id: session.tenant_id,
            asset_id: session.asset_id,
            upload_id: session.id,
          });
          return true;
        }),
      );
      const stored = yield* orNotFound("upload")(storage.uploads.get(session.tenant_id, session.id));
      if (!won && Option.isNone(yield* storage.assets.get(session.tenant_id, session.asset_id))) {
        // The asset was deleted while its bytes were assembled, perhaps after its deletion job
        // ran: what was assembled goes too. No upload can start on a deleted asset.
        yield* store.deletePrefix(ref.key);
        return yield* Effect.fail(new NotFound({ message: "asset not found" }));
      }
      if (!won && stored.status !== "completed")
        return yield* Effect.fail(conflict(`upload is ${stored.status}`));
      return yield* completedAnswer(stored);
    });

  /** Closes the session as aborted and records upload.aborted with it; false when it was not open. */
  const closeAborted = (session: UploadSession) =>
    storage.transaction((tx) =>
      Effect.gen(function* () {
        if (!(yield* tx.uploads.close(session.tenant_id, session.id, "aborted"))) return false;
        const asset = yield* tx.assets.get(session.tenant_id, session.asset_id);
        if (Option.isSome(asset))
          yield* recordEvent(tx, session.tenant_id, "upload.aborted", {
            upload: { ...session, status: "aborted" },
            asset: asset.value,
          });
        return true;
      }),
    );

  const abort = (principal: Principal, id: UploadId) =>
    Effect.gen(function* () {
      const session = yield* getSession(principal, id);
      const next = transitionUpload(session, { type: "abort" }, clock.now());
      if (Either.isLeft(next)) return yield* Effect.fail(conflict(`upload is ${next.left.from}`));
      if (session.status === "created" && !(yield* closeAborted(session))) {
        // Lost a race: whatever the other call did decides the answer.
        const now = yield* orNotFound("upload")(storage.uploads.get(session.tenant_id, session.id));
        if (now.status === "completed") return yield* Effect.fail(conflict("upload is completed"));
      }
      yield* store.abortMultipart(refOf(session));
    });

  /** Closes sessions past their expiry and removes their parts; run now and then by workers. */
  const sweepExpired = (limit = 100) =>
    Effect.gen(function* () {
      const expired = yield* storage.uploads.listExpired(clock.now(), limit);
      yield* Effect.forEach(expired, settleExpiry, { discard: true });
      return expired.length;
    });

  return { start, resume, receivePart, complete, abort, sweepExpired };
};

export type Uploads = ReturnType<typeof makeUploads>;
export type { Asset };

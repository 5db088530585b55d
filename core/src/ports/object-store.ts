import { Data, type Effect, type Option } from "effect";
import type { NotFound, StorageError } from "../errors.js";

/** Bytes as a stream: any async iterable of chunks (a Node stream is one). */
export type ByteStream = AsyncIterable<Uint8Array>;

export interface StoredPart {
  readonly number: number;
  readonly size: number;
  /** Opaque, unquoted. */
  readonly etag: string;
  /**
   * SHA-256 (hex) of the part's bytes where the store knows it on receipt; null where it hashes
   * only while assembling (then `completeMultipart` checks the part sha256 the client gives).
   */
  readonly sha256: string | null;
}

export interface StoredObject {
  readonly key: string;
  readonly size: number;
  readonly contentType: string;
}

export interface AssembledObject {
  readonly size: number;
  /**
   * SHA-256 (hex) of the whole object, or null for a store that cannot hash while assembling (a
   * bucket): a declared sha256 is then checked by processing while it reads the source
   * (`MediaInput.expectedSha256`), and a difference fails the asset with `checksum_mismatch`.
   */
  readonly sha256: string | null;
}

/** A multipart upload as the store knows it: the core's upload id and the key it will become. */
export interface MultipartRef {
  readonly uploadId: string;
  readonly key: string;
}

/** Bytes `start` to `end` of an object, `end` inclusive; a range past the end is cut short. */
export interface ByteRange {
  readonly start: number;
  readonly end: number;
}

/** Whether stores may serve `range`: whole offsets from 0, `end` not before `start`. */
export const isValidRange = (range: ByteRange) =>
  Number.isSafeInteger(range.start) &&
  Number.isSafeInteger(range.end) &&
  range.start >= 0 &&
  range.end >= range.start;

/**
 * Where media bytes live: multipart uploads (parts kept apart until assembled), and plain
 * objects (origin files, renditions, posters). Keys are `/`-separated paths chosen by the core.
 */
export interface ObjectStore {
  /** Prepares a multipart upload; calling it again for the same upload is harmless. */
  createMultipart(ref: MultipartRef): Effect.Effect<void, StorageError>;
  /** Parts stored so far, by number ascending. */
  listParts(ref: MultipartRef): Effect.Effect<ReadonlyArray<StoredPart>, StorageError>;
  /**
   * Joins `parts`, in that order, into the object at `ref.key` and removes the parts.
   * Calling it again after success answers the same object. A store that hashes while
   * assembling checks every sha256 in `expected` against the bytes it joins; on a difference it
   * keeps the parts, stores no object and fails with PartsMismatched. A store that cannot hash
   * (its `AssembledObject.sha256` is null) cannot check them either, and says nothing of them.
   */
  completeMultipart(
    ref: MultipartRef,
    parts: ReadonlyArray<number>,
    expected?: { readonly partSha256?: ReadonlyMap<number, string> },
  ): Effect.Effect<AssembledObject, StorageError | PartsMismatched>;
  /** Removes every stored part; harmless when there are none. */
  abortMultipart(ref: MultipartRef): Effect.Effect<void, StorageError>;

  /** Stores an object whole, replacing any object at the key. */
  put(key: string, body: ByteStream | Uint8Array, contentType: string): Effect.Effect<void, StorageError>;
  /** The object's bytes, optionally a byte range (see `isValidRange`). */
  get(key: string, range?: ByteRange): Effect.Effect<ByteStream, NotFound | StorageError>;
  head(key: string): Effect.Effect<Option.Option<StoredObject>, StorageError>;
  /** Removes every object under `prefix`. */
  deletePrefix(prefix: string): Effect.Effect<void, StorageError>;

  /**
   * Optional: the store takes part PUTs itself, from the client, and signs their URLs (a bucket's
   * signed URLs): the bytes never pass through the host. Each URL, in the order of `parts`, takes
   * a `PUT` of exactly `part.size` raw bytes for that part of that upload until `expiresAt` (ms,
   * in the future; V4 signed URLs have a resolution of a second), answers with the part's `ETag`,
   * and refuses any other method, part, size, or a changed URL. Parts may be sent in parallel,
   * each URL on its own. One call signs them all (up to 10,000), without blocking the event loop.
   * Without it the core hands out URLs of the media app, which pass the bytes to `receivePart`.
   */
  readonly partUploadUrls?: (
    ref: MultipartRef,
    parts: ReadonlyArray<{ readonly number: number; readonly size: number }>,
    expiresAt: number,
  ) => Effect.Effect<ReadonlyArray<string>, StorageError>;
  /**
   * Optional, and required when `partUploadUrls` is absent: stores one part from a stream,
   * refusing it (`wrong_size`) unless it is exactly `expectedSize` bytes. A part sent again
   * replaces the earlier one.
   */
  readonly receivePart?: (
    ref: MultipartRef,
    part: { readonly number: number; readonly expectedSize: number },
    body: ByteStream,
  ) => Effect.Effect<StoredPart, StorageError | PartRejected>;
  /**
   * Optional: a local file path of the object, for tools that read files (ffmpeg). Without it
   * processing reads the object as a stream (`get`) into the processor's own scratch space.
   */
  readonly localPath?: (key: string) => string;
  /**
   * Optional: a URL where anyone holding it can `GET` the object (ranges included) straight from
   * the store until `expiresAt` (ms). With it the media app redirects segment requests there
   * instead of streaming the bytes itself.
   */
  readonly deliveryUrl?: (key: string, expiresAt: number) => Effect.Effect<string, StorageError>;
}

/** A part body refused by `receivePart`: it was not the size the session expects. */
export class PartRejected extends Data.TaggedError("PartRejected")<{
  readonly reason: "wrong_size";
  readonly received: number;
}> {}

/** Parts whose bytes, hashed while assembling, differ from the sha256 the client gave. */
export class PartsMismatched extends Data.TaggedError("PartsMismatched")<{
  readonly parts: ReadonlyArray<{ readonly number: number; readonly sha256: string }>;
}> {}

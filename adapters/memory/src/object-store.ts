import { createHash } from "node:crypto";
import type { AssembledObject, ByteStream, ObjectStore, StoredObject, StoredPart } from "@vod/core";
import { isValidRange, NotFound, PartRejected, PartsMismatched, StorageError } from "@vod/core";
import { Effect, Option } from "effect";

export interface MemoryObject {
  readonly bytes: Uint8Array;
  readonly contentType: string;
  readonly sha256: string;
  /** Set when a multipart upload assembled it, so that completing that upload again answers it. */
  readonly uploadId?: string;
}

export interface MemoryPart {
  readonly bytes: Uint8Array;
  readonly sha256: string;
}

const sha256Hex = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
/** Derived from the content, so that equal bytes always give equal etags. */
const etagOf = (sha256: string) => sha256.slice(0, 32);

const concat = (chunks: ReadonlyArray<Uint8Array>, size: number) => {
  const out = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out;
};

const storageError = (message: string) => (cause: unknown) => new StorageError({ message, cause });

/** Reads a whole body; `limit` stops reading as soon as more than that many bytes arrived. */
const readAll = async (body: ByteStream | Uint8Array, limit = Number.POSITIVE_INFINITY) => {
  if (body instanceof Uint8Array) return { bytes: body.slice(), size: body.byteLength };
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.byteLength;
    if (size > limit) return { bytes: undefined, size };
    chunks.push(chunk.slice());
  }
  return { bytes: concat(chunks, size), size };
};

const stream = (bytes: Uint8Array): ByteStream => ({
  async *[Symbol.asyncIterator]() {
    if (bytes.byteLength > 0) yield bytes;
  },
});

/**
 * The key of a store's objects and parts, which the test-only backdoor reads. Not exported from the
 * package root, so production code reaches them only by the port.
 */
export const memoryObjects: unique symbol = Symbol("memoryObjects");

export type MemoryObjectStore = ObjectStore & {
  readonly receivePart: NonNullable<ObjectStore["receivePart"]>;
  readonly [memoryObjects]: {
    readonly objects: ReadonlyMap<string, MemoryObject>;
    readonly uploads: ReadonlyMap<string, ReadonlyMap<number, MemoryPart>>;
  };
};

/**
 * Objects and multipart uploads in process memory. It takes part bodies itself (`receivePart`),
 * so the core hands out media-app part URLs; it has no local paths.
 */
export const memoryObjectStore = (): MemoryObjectStore => {
  const objects = new Map<string, MemoryObject>();
  const uploads = new Map<string, Map<number, MemoryPart>>();

  const toStored = (key: string, o: MemoryObject): StoredObject => ({
    key,
    size: o.bytes.byteLength,
    contentType: o.contentType,
  });
  const keysUnder = (prefix: string) => [...objects.keys()].filter((k) => k.startsWith(prefix)).sort();

  return {
    createMultipart: (ref) =>
      Effect.sync(() => {
        if (!uploads.has(ref.uploadId)) uploads.set(ref.uploadId, new Map());
      }),

    listParts: (ref) =>
      Effect.sync(() =>
        [...(uploads.get(ref.uploadId) ?? new Map<number, MemoryPart>()).entries()]
          .sort(([a], [b]) => a - b)
          .map(
            ([number, p]): StoredPart => ({
              number,
              size: p.bytes.byteLength,
              etag: etagOf(p.sha256),
              sha256: p.sha256,
            }),
          ),
      ),

    completeMultipart: (ref, numbers, expected) =>
      Effect.suspend((): Effect.Effect<AssembledObject, StorageError | PartsMismatched> => {
        const existing = objects.get(ref.key);
        if (existing?.uploadId === ref.uploadId) {
          uploads.delete(ref.uploadId);
          return Effect.succeed({ size: existing.bytes.byteLength, sha256: existing.sha256 });
        }
        const parts = uploads.get(ref.uploadId);
        const chosen: MemoryPart[] = [];
        for (const n of numbers) {
          const part = parts?.get(n);
          if (!part)
            return Effect.fail(
              new StorageError({ message: `part ${n} of upload ${ref.uploadId} is not stored` }),
            );
          chosen.push(part);
        }
        const mismatched = numbers.flatMap((number, i) => {
          const given = expected?.partSha256?.get(number);
          const actual = chosen[i]!.sha256;
          return given !== undefined && given !== actual ? [{ number, sha256: actual }] : [];
        });
        if (mismatched.length > 0) return Effect.fail(new PartsMismatched({ parts: mismatched }));
        const bytes = concat(
          chosen.map((p) => p.bytes),
          chosen.reduce((n, p) => n + p.bytes.byteLength, 0),
        );
        const sha256 = sha256Hex(bytes);
        objects.set(ref.key, {
          bytes,
          contentType: "application/octet-stream",
          sha256,
          uploadId: ref.uploadId,
        });
        uploads.delete(ref.uploadId);
        return Effect.succeed({ size: bytes.byteLength, sha256 });
      }),

    abortMultipart: (ref) => Effect.sync(() => void uploads.delete(ref.uploadId)),

    receivePart: (ref, part, body) =>
      Effect.tryPromise({
        try: () => readAll(body, part.expectedSize),
        catch: storageError(`receiving part ${part.number} of upload ${ref.uploadId}`),
      }).pipe(
        Effect.flatMap(({ bytes, size }) => {
          if (bytes === undefined || size !== part.expectedSize) {
            return Effect.fail(new PartRejected({ reason: "wrong_size", received: size }));
          }
          const sha256 = sha256Hex(bytes);
          let parts = uploads.get(ref.uploadId);
          if (!parts) {
            parts = new Map();
            uploads.set(ref.uploadId, parts);
          }
          parts.set(part.number, { bytes, sha256 });
          return Effect.succeed<StoredPart>({ number: part.number, size, etag: etagOf(sha256), sha256 });
        }),
      ),

    put: (key, body, contentType) =>
      Effect.tryPromise({ try: () => readAll(body), catch: storageError(`writing ${key}`) }).pipe(
        Effect.flatMap(({ bytes = new Uint8Array() }) =>
          Effect.sync(() => void objects.set(key, { bytes, contentType, sha256: sha256Hex(bytes) })),
        ),
      ),

    get: (key, range) =>
      Effect.suspend((): Effect.Effect<ByteStream, NotFound | StorageError> => {
        const o = objects.get(key);
        if (!o) return Effect.fail(new NotFound({ message: `no object at ${key}` }));
        if (!range) return Effect.succeed(stream(o.bytes.slice()));
        if (!isValidRange(range))
          return Effect.fail(new StorageError({ message: `invalid range ${range.start}-${range.end}` }));
        return Effect.succeed(stream(o.bytes.slice(range.start, range.end + 1)));
      }),

    head: (key) =>
      Effect.sync(() => Option.map(Option.fromNullable(objects.get(key)), (o) => toStored(key, o))),

    deletePrefix: (prefix) =>
      Effect.sync(() => {
        for (const k of keysUnder(prefix)) objects.delete(k);
      }),

    [memoryObjects]: { objects, uploads },
  };
};

import { createHash, randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import {
  type ByteStream,
  type MultipartRef,
  NotFound,
  type ObjectStore,
  PartRejected,
  PartsMismatched,
  StorageError,
  type StoredPart,
} from "@vod/core";
import { Effect, Either, Option } from "effect";
import { afterEach, beforeEach, describe, expect, it, type TestContext } from "vitest";
import { uid } from "./fixtures.js";

/** Reads what an object store really holds, beside the adapter: the map, the disk, the bucket. */
export interface ObjectStoreBackdoor {
  /** The stored object's bytes, or undefined when there is none at `key`. */
  read(key: string): Promise<Uint8Array | undefined>;
  exists(key: string): Promise<boolean>;
  /** Keys of the objects stored under `prefix`, sorted. */
  keysUnder(prefix: string): Promise<ReadonlyArray<string>>;
  /**
   * Every part body the store holds for the upload, by number ascending: stray copies (a
   * refused body, a replaced part) show up here as extra entries.
   */
  storedParts(
    uploadId: string,
  ): Promise<ReadonlyArray<{ readonly number: number; readonly bytes: Uint8Array }>>;
}

/** A backdoor that may not read parts back (a real bucket: GCS has no call for it). */
export type ObjectStoreSubjectBackdoor = Omit<ObjectStoreBackdoor, "storedParts"> &
  Partial<Pick<ObjectStoreBackdoor, "storedParts">>;

export interface ObjectStoreSubject {
  readonly store: ObjectStore;
  readonly backdoor: ObjectStoreSubjectBackdoor;
  readonly cleanup: () => Promise<void>;
}

const KiB = 1024;
const MiB = 1024 * KiB;

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect);
const attempt = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(Effect.either(effect));
const failureOf = async <A, E>(effect: Effect.Effect<A, E>) => {
  const result = await attempt(effect);
  if (Either.isRight(result)) throw new Error("expected a failure, got a success");
  return result.left;
};

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const someBytes = (n: number) => new Uint8Array(randomBytes(n));
const concat = (...parts: ReadonlyArray<Uint8Array>) => new Uint8Array(Buffer.concat(parts));

/** `bytes` as a stream of `size`-byte chunks; `yieldEvery` gives other work a turn between chunks. */
async function* chunks(bytes: Uint8Array, size = 64 * KiB, yieldEvery = false): ByteStream {
  for (let at = 0; at < bytes.byteLength; at += size) {
    if (yieldEvery) await new Promise((resolve) => setImmediate(resolve));
    yield bytes.slice(at, at + size);
  }
}

/** Large byte arrays compare by size and hash: deep equality over megabytes takes seconds. */
const digest = (bytes: Uint8Array | undefined) => bytes && { size: bytes.byteLength, sha256: sha256(bytes) };

const collect = async (stream: ByteStream) => {
  const got: Uint8Array[] = [];
  for await (const chunk of stream) got.push(chunk);
  return concat(...got);
};

const aRef = (): MultipartRef => ({ uploadId: uid("upl"), key: `origins/${uid("tnt")}/${uid("ast")}` });

/** The optional capabilities of the port a store declares; their tests run only where declared. */
export interface ObjectStoreCapabilities {
  readonly receivePart: boolean;
  readonly partUploadUrls: boolean;
  readonly localPath: boolean;
  readonly deliveryUrl: boolean;
  /**
   * Not a method but a promise: `completeMultipart` hashes what it joins (`AssembledObject.sha256`
   * is the object's, and part sha256s are checked), where a bucket cannot (null, unchecked).
   */
  readonly hashesOnAssembly: boolean;
  /**
   * Not a method: the least size of a part that is not the last, at completion (5 MiB on GCS);
   * default none. Tests that complete uploads make their parts at least this big.
   */
  readonly minPartSize?: number;
}

/** A part PUT as a browser sends it: plain fetch, the raw bytes, no credential but the URL's. */
const putTo = (url: string, bytes: Uint8Array, method = "PUT") =>
  fetch(url, { method, ...(method === "GET" || method === "HEAD" ? {} : { body: bytes }) });

const unquote = (etag: string | null) => (etag ?? "").replace(/^"(.*)"$/, "$1");

/**
 * The query parameter of a signed URL that holds the signature: one named so, else the longest
 * value (an HMAC key's credential is longer than its signature).
 */
const signatureParam = (url: URL) =>
  [...url.searchParams.keys()].find((name) => /signature/i.test(name)) ??
  [...url.searchParams.entries()].reduce((a, b) => (b[1].length > a[1].length ? b : a))[0];

/** The URL with one character of its signature changed. */
const tamperedUrl = (url: string) => {
  const u = new URL(url);
  const name = signatureParam(u);
  const value = u.searchParams.get(name)!;
  u.searchParams.set(name, `${value[0] === "a" ? "b" : "a"}${value.slice(1)}`);
  return u.toString();
};

/** `target` carrying the signature of `donor`: a URL signed for one part used for another. */
const withSignatureOf = (target: string, donor: string) => {
  const t = new URL(target);
  const d = new URL(donor);
  const name = signatureParam(d);
  t.searchParams.set(name, d.searchParams.get(name)!);
  return t.toString();
};

const isClientError = (status: number) => status >= 400 && status < 500;

/**
 * A signed URL that expires in about a second, and a wait until it has: signed URLs count whole
 * seconds, and a store cannot sign for a time already past.
 */
const shortLived = async <A>(sign: (expiresAt: number) => Promise<A>) => {
  const expiresAt = Date.now() + 1_000;
  const signed = await sign(expiresAt);
  await new Promise((resolve) =>
    setTimeout(resolve, Math.ceil(expiresAt / 1000) * 1000 + 1_100 - Date.now()),
  );
  return signed;
};

/**
 * The ObjectStore port, checked through the store's backdoor. Multipart uploads run on every
 * store, their parts sent through `receivePart` or, for a store that signs part URLs
 * (`partUploadUrls`), by a plain fetch PUT as a browser would; the refusals of each way run where
 * it is declared, as do local paths (`localPath`) and signed delivery URLs (`deliveryUrl`). A store
 * must have exactly the methods it declares.
 */
export const describeObjectStore = (
  name: string,
  makeSubject: () => Promise<ObjectStoreSubject>,
  capabilities: ObjectStoreCapabilities,
) =>
  describe(`ObjectStore [${name}]`, () => {
    let subject: ObjectStoreSubject;
    let store: ObjectStore;
    let disk: ObjectStoreSubjectBackdoor;
    beforeEach(async () => {
      subject = await makeSubject();
      store = subject.store;
      disk = subject.backdoor;
      const { hashesOnAssembly: _, minPartSize: __, ...methods } = capabilities;
      expect({
        receivePart: !!store.receivePart,
        partUploadUrls: !!store.partUploadUrls,
        localPath: !!store.localPath,
        deliveryUrl: !!store.deliveryUrl,
      }).toEqual(methods);
    });
    afterEach(async () => subject.cleanup());

    const read = async (key: string) => digest(await disk.read(key));
    const fetched = async (key: string, range?: { start: number; end: number }) =>
      digest(await collect(await run(store.get(key, range))));
    /** The part bodies the store holds, as the backdoor reads them; where it cannot, not checked. */
    const expectStoredParts = async (
      uploadId: string,
      expected: ReadonlyArray<{ number: number; size?: number; sha256?: string }>,
    ) => {
      if (!disk.storedParts) return;
      const held = await disk.storedParts(uploadId);
      expect(held.map(({ number, bytes }) => ({ number, ...digest(bytes) }))).toEqual(expected);
    };
    const parts = (...list: ReadonlyArray<readonly [number, Uint8Array]>) =>
      list.map(([number, bytes]) => ({ number, ...digest(bytes) }));

    // Called only from tests registered for the declared capability, which beforeEach checked.
    const receiving = (_ctx: TestContext) => store.receivePart!;
    /** One part's URL, from a batch of one. */
    const signing =
      (_ctx: TestContext) => (ref: MultipartRef, part: { number: number; size: number }, expiresAt: number) =>
        Effect.map(store.partUploadUrls!(ref, [part], expiresAt), (urls) => urls[0]!);
    const localPaths = (_ctx: TestContext) => store.localPath!;
    const delivering = (_ctx: TestContext) => store.deliveryUrl!;
    const inTenMinutes = () => Date.now() + 10 * 60_000;
    /** The whole object's sha256 as `completeMultipart` answers it: null where the store cannot hash. */
    const assembledSha256 = (bytes: Uint8Array) => (capabilities.hashesOnAssembly ? sha256(bytes) : null);
    /** A part that is not the last, of `n` bytes or the store's least part size. */
    const fullPart = (n: number) => someBytes(Math.max(n, capabilities.minPartSize ?? 0));

    /** A part sent the store's way: into `receivePart`, or PUT on a URL the store signed. */
    const sendPart = async (ref: MultipartRef, number: number, bytes: Uint8Array): Promise<StoredPart> => {
      if (store.receivePart)
        return run(
          store.receivePart(ref, { number, expectedSize: bytes.byteLength }, chunks(bytes, 16 * KiB)),
        );
      const [url] = await run(
        store.partUploadUrls!(ref, [{ number, size: bytes.byteLength }], inTenMinutes()),
      );
      if (!url) throw new Error("no URL signed");
      const reply = await putTo(url, bytes);
      if (reply.status !== 200) throw new Error(`part PUT answered ${reply.status}: ${await reply.text()}`);
      return { number, size: bytes.byteLength, etag: unquote(reply.headers.get("etag")), sha256: null };
    };

    describe("multipart uploads", () => {
      it("stores parts sent out of order and lists them by number with size, etag and sha256", async () => {
        const ref = aRef();
        await run(store.createMultipart(ref));
        await run(store.createMultipart(ref));
        const bodies = new Map([
          [1, someBytes(100 * KiB)],
          [2, someBytes(100 * KiB)],
          [3, someBytes(1234)],
        ]);
        const answers: StoredPart[] = [];
        for (const n of [3, 1, 2]) answers.push(await sendPart(ref, n, bodies.get(n)!));
        // A store knows a part's sha256 on receipt, or (sha256 null) only while assembling.
        const knows = answers[0]!.sha256 !== null;
        const hashOf = (n: number) => (knows ? sha256(bodies.get(n)!) : null);
        expect(answers.map((a) => [a.number, a.size, a.sha256])).toEqual([
          [3, 1234, hashOf(3)],
          [1, 100 * KiB, hashOf(1)],
          [2, 100 * KiB, hashOf(2)],
        ]);
        const listed = await run(store.listParts(ref));
        expect(listed).toEqual(
          [1, 2, 3].map((n) => ({
            number: n,
            size: bodies.get(n)!.byteLength,
            etag: answers.find((a) => a.number === n)!.etag,
            sha256: hashOf(n),
          })),
        );
        for (const part of listed) expect(part.etag).toMatch(/^[^"\s]+$/);
        expect(new Set(listed.map((p) => p.etag)).size).toBe(3);
        await expectStoredParts(ref.uploadId, parts(...[1, 2, 3].map((n) => [n, bodies.get(n)!] as const)));
      });

      if (capabilities.hashesOnAssembly)
        it("checks the part sha256 given at completion: on a difference it keeps the parts and stores no object", async () => {
          const ref = aRef();
          await run(store.createMultipart(ref));
          const bodies = [someBytes(100 * KiB), someBytes(100 * KiB), someBytes(300)];
          for (const [i, bytes] of bodies.entries()) await sendPart(ref, i + 1, bytes);
          const listed = await run(store.listParts(ref));
          const wrong = sha256(someBytes(10));
          const mismatch = await failureOf(
            store.completeMultipart(ref, [1, 2, 3], {
              partSha256: new Map([
                [1, sha256(bodies[0]!)],
                [2, wrong],
              ]),
            }),
          );
          expect(mismatch).toBeInstanceOf(PartsMismatched);
          expect(mismatch).toMatchObject({ parts: [{ number: 2, sha256: sha256(bodies[1]!) }] });
          expect(await disk.exists(ref.key)).toBe(false);
          expect(await run(store.listParts(ref))).toEqual(listed);
          await expectStoredParts(ref.uploadId, parts(...bodies.map((b, i) => [i + 1, b] as const)));

          const whole = concat(...bodies);
          const assembled = await run(
            store.completeMultipart(ref, [1, 2, 3], {
              partSha256: new Map(bodies.map((b, i) => [i + 1, sha256(b)])),
            }),
          );
          expect(assembled).toEqual({ size: whole.byteLength, sha256: sha256(whole) });
          expect(await read(ref.key)).toEqual(digest(whole));
          await expectStoredParts(ref.uploadId, []);
        });

      it("replaces a part sent again", async () => {
        const ref = aRef();
        await run(store.createMultipart(ref));
        const first = someBytes(8 * KiB);
        const second = someBytes(8 * KiB);
        const a = await sendPart(ref, 1, first);
        const b = await sendPart(ref, 1, second);
        expect(b.etag).not.toBe(a.etag);
        expect(await run(store.listParts(ref))).toEqual([
          { number: 1, size: 8 * KiB, etag: b.etag, sha256: b.sha256 === null ? null : sha256(second) },
        ]);
        await expectStoredParts(ref.uploadId, parts([1, second]));
      });

      it("stores every part sent at once to one upload", async () => {
        const ref = aRef();
        await run(store.createMultipart(ref));
        const bodies = Array.from({ length: 8 }, (_, i) =>
          i < 7 ? fullPart(64 * KiB + i) : someBytes(64 * KiB),
        );
        await Promise.all(
          bodies.map((bytes, i) =>
            store.receivePart
              ? run(
                  store.receivePart(
                    ref,
                    { number: i + 1, expectedSize: bytes.byteLength },
                    chunks(bytes, 4 * KiB, true),
                  ),
                )
              : sendPart(ref, i + 1, bytes),
          ),
        );
        expect(
          (await run(store.listParts(ref))).map((p) => [
            p.number,
            p.size,
            p.sha256 ?? sha256(bodies[p.number - 1]!),
          ]),
        ).toEqual(bodies.map((bytes, i) => [i + 1, bytes.byteLength, sha256(bytes)]));
        await expectStoredParts(ref.uploadId, parts(...bodies.map((bytes, i) => [i + 1, bytes] as const)));
        const whole = await run(store.completeMultipart(ref, [1, 2, 3, 4, 5, 6, 7, 8]));
        expect(whole).toEqual({
          size: concat(...bodies).byteLength,
          sha256: assembledSha256(concat(...bodies)),
        });
        expect(await read(ref.key)).toEqual(digest(concat(...bodies)));
      });

      it("joins the given parts in order into the object and removes the parts", async () => {
        const ref = aRef();
        await run(store.createMultipart(ref));
        const bodies = [fullPart(200 * KiB), fullPart(200 * KiB), someBytes(777)];
        for (const n of [2, 3, 1]) await sendPart(ref, n, bodies[n - 1]!);
        const whole = concat(...bodies);
        const assembled = await run(store.completeMultipart(ref, [1, 2, 3]));
        expect(assembled).toEqual({ size: whole.byteLength, sha256: assembledSha256(whole) });
        expect(await read(ref.key)).toEqual(digest(whole));
        expect(await fetched(ref.key)).toEqual(digest(whole));
        expect(await run(store.head(ref.key))).toEqual(
          Option.some({ key: ref.key, size: whole.byteLength, contentType: "application/octet-stream" }),
        );
        expect(await run(store.listParts(ref))).toEqual([]);
        await expectStoredParts(ref.uploadId, []);
      });

      it("answers the same object when completed again", async () => {
        const ref = aRef();
        await run(store.createMultipart(ref));
        const bodies = [fullPart(50 * KiB), someBytes(10)];
        for (const [i, bytes] of bodies.entries()) await sendPart(ref, i + 1, bytes);
        const first = await run(store.completeMultipart(ref, [1, 2]));
        const again = await run(store.completeMultipart(ref, [1, 2]));
        expect(again).toEqual(first);
        expect(await read(ref.key)).toEqual(digest(concat(...bodies)));
      });

      it("fails to complete with a part that is not stored, and writes nothing", async () => {
        const ref = aRef();
        await run(store.createMultipart(ref));
        const bytes = someBytes(KiB);
        await sendPart(ref, 1, bytes);
        expect(await failureOf(store.completeMultipart(ref, [1, 2]))).toBeInstanceOf(StorageError);
        expect(await disk.exists(ref.key)).toBe(false);
        await expectStoredParts(ref.uploadId, parts([1, bytes]));
      });

      it("aborts by removing every part, and aborting again is harmless", async () => {
        const ref = aRef();
        await run(store.createMultipart(ref));
        await sendPart(ref, 1, someBytes(KiB));
        await sendPart(ref, 2, someBytes(KiB));
        await run(store.abortMultipart(ref));
        expect(await run(store.listParts(ref))).toEqual([]);
        await expectStoredParts(ref.uploadId, []);
        expect(await disk.exists(ref.key)).toBe(false);
        await run(store.abortMultipart(ref));
        await run(store.abortMultipart(aRef()));
      });
    });

    if (capabilities.receivePart)
      describe("parts received by the store", () => {
        const send = (
          ctx: TestContext,
          ref: MultipartRef,
          number: number,
          bytes: Uint8Array,
          expectedSize?: number,
        ) =>
          receiving(ctx)(
            ref,
            { number, expectedSize: expectedSize ?? bytes.byteLength },
            chunks(bytes, 16 * KiB),
          );

        it("refuses a short part with the count received, and stores nothing", async (ctx) => {
          const ref = aRef();
          await run(store.createMultipart(ref));
          const rejected = await failureOf(send(ctx, ref, 1, someBytes(999), 1000));
          expect(rejected).toBeInstanceOf(PartRejected);
          expect(rejected).toMatchObject({ reason: "wrong_size", received: 999 });
          expect(await run(store.listParts(ref))).toEqual([]);
          await expectStoredParts(ref.uploadId, []);
        });

        it("refuses a long part, and stores nothing", async (ctx) => {
          const ref = aRef();
          await run(store.createMultipart(ref));
          const rejected = await failureOf(send(ctx, ref, 1, someBytes(1001), 1000));
          expect(rejected).toBeInstanceOf(PartRejected);
          expect((rejected as PartRejected).received).toBeGreaterThan(1000);
          expect(await run(store.listParts(ref))).toEqual([]);
          await expectStoredParts(ref.uploadId, []);
        });

        it("stops reading a part as soon as it is too long", async (ctx) => {
          const ref = aRef();
          let pulled = 0;
          let closed = false;
          async function* endless(): ByteStream {
            try {
              for (;;) {
                pulled += 16 * KiB;
                yield someBytes(16 * KiB);
              }
            } finally {
              closed = true;
            }
          }
          const rejected = await failureOf(
            receiving(ctx)(ref, { number: 1, expectedSize: 64 * KiB }, endless()),
          );
          expect(rejected).toBeInstanceOf(PartRejected);
          expect(pulled).toBeLessThan(64 * KiB + 2 * MiB);
          expect(closed).toBe(true);
          await expectStoredParts(ref.uploadId, []);
        });

        it("keeps the earlier copy of a part when a resend is refused", async (ctx) => {
          const ref = aRef();
          const good = someBytes(4 * KiB);
          const stored = await run(send(ctx, ref, 2, good));
          await failureOf(send(ctx, ref, 2, someBytes(3 * KiB), 4 * KiB));
          await failureOf(send(ctx, ref, 2, someBytes(5 * KiB), 4 * KiB));
          expect(await run(store.listParts(ref))).toEqual([stored]);
          await expectStoredParts(ref.uploadId, parts([2, good]));
        });
      });

    if (capabilities.partUploadUrls)
      describe("part URLs signed by the store", () => {
        /** Refused with a 4xx, and nothing of it stored. */
        const expectRefused = async (reply: Response) => {
          expect(isClientError(reply.status), `status ${reply.status}`).toBe(true);
          expect(reply.headers.get("etag")).toBeNull();
        };

        it("takes parts PUT in parallel by plain fetch, each answered with its ETag, and joins them", async () => {
          const ref = aRef();
          await run(store.createMultipart(ref));
          const bodies = [fullPart(300 * KiB), fullPart(300 * KiB), fullPart(300 * KiB), someBytes(99)];
          const urls = await run(
            store.partUploadUrls!(
              ref,
              bodies.map((b, i) => ({ number: i + 1, size: b.byteLength })),
              inTenMinutes(),
            ),
          );
          const replies = await Promise.all(urls.map((url, i) => putTo(url, bodies[i]!)));
          for (const reply of replies) {
            expect(reply.status).toBe(200);
            expect(reply.headers.get("etag")).toMatch(/^"[^"\s]+"$/);
          }
          expect(await run(store.listParts(ref))).toEqual(
            bodies.map((b, i) => ({
              number: i + 1,
              size: b.byteLength,
              etag: unquote(replies[i]!.headers.get("etag")),
              sha256: null,
            })),
          );
          await expectStoredParts(ref.uploadId, parts(...bodies.map((b, i) => [i + 1, b] as const)));
          const whole = concat(...bodies);
          const assembled = await run(store.completeMultipart(ref, [1, 2, 3, 4]));
          expect(assembled).toEqual({ size: whole.byteLength, sha256: assembledSha256(whole) });
          expect(await read(ref.key)).toEqual(digest(whole));
        });

        it("refuses a tampered URL, an expired one, and one signed for another part or upload", async (ctx) => {
          const ref = aRef();
          const other = aRef();
          await run(store.createMultipart(ref));
          await run(store.createMultipart(other));
          const bytes = someBytes(5 * KiB);
          const url = (r: MultipartRef, number: number, expiresAt = inTenMinutes()) =>
            run(signing(ctx)(r, { number, size: bytes.byteLength }, expiresAt));
          const one = await url(ref, 1);
          await expectRefused(await putTo(tamperedUrl(one), bytes));
          await expectRefused(await putTo(await shortLived((at) => url(ref, 1, at)), bytes));
          await expectRefused(await putTo(withSignatureOf(await url(ref, 2), one), bytes));
          await expectRefused(await putTo(withSignatureOf(await url(other, 1), one), bytes));
          expect(await run(store.listParts(ref))).toEqual([]);
          expect(await run(store.listParts(other))).toEqual([]);
          await expectStoredParts(ref.uploadId, []);
          // The untouched URL still works.
          expect((await putTo(one, bytes)).status).toBe(200);
          await expectStoredParts(ref.uploadId, parts([1, bytes]));
        });

        it("refuses another method on a part URL, and a body of another size", async (ctx) => {
          const ref = aRef();
          await run(store.createMultipart(ref));
          const bytes = someBytes(4 * KiB);
          const one = await run(signing(ctx)(ref, { number: 1, size: bytes.byteLength }, inTenMinutes()));
          expect((await putTo(one, bytes)).status).toBe(200);
          for (const method of ["GET", "POST", "DELETE"])
            await expectRefused(await putTo(one, bytes, method));
          await expectRefused(await putTo(one, bytes.subarray(0, bytes.byteLength - 1)));
          await expectRefused(await putTo(one, concat(bytes, someBytes(1))));
          // The part stored before is untouched, and the upload is still open.
          await expectStoredParts(ref.uploadId, parts([1, bytes]));
          expect((await run(store.listParts(ref))).map((p) => [p.number, p.size])).toEqual([[1, 4 * KiB]]);
        });
      });

    describe("objects", () => {
      const prefix = () => `renditions/${uid("ast")}/`;

      it("stores an object from bytes and reads it back with its content type", async () => {
        const key = `${prefix()}poster.jpg`;
        const bytes = someBytes(3000);
        await run(store.put(key, bytes, "image/jpeg"));
        expect(await read(key)).toEqual(digest(bytes));
        expect(await fetched(key)).toEqual(digest(bytes));
        expect(await run(store.head(key))).toEqual(
          Option.some({ key, size: 3000, contentType: "image/jpeg" }),
        );
      });

      it("streams a 5 MiB object in and out, and serves a byte range", async () => {
        const key = `origins/${uid("tnt")}/${uid("ast")}`;
        const bytes = someBytes(5 * MiB);
        await run(store.put(key, chunks(bytes, 64 * KiB), "video/mp4"));
        expect(await read(key)).toEqual(digest(bytes));
        expect(await fetched(key)).toEqual(digest(bytes));
        expect(await run(store.head(key))).toEqual(
          Option.some({ key, size: 5 * MiB, contentType: "video/mp4" }),
        );
        const range = { start: 1_000_000, end: 1_065_535 };
        expect(await fetched(key, range)).toEqual(digest(bytes.slice(1_000_000, 1_065_536)));
        expect(await fetched(key, { start: 5 * MiB - 1, end: 5 * MiB - 1 })).toEqual(digest(bytes.slice(-1)));
        expect(await fetched(key, { start: 0, end: 0 })).toEqual(digest(bytes.slice(0, 1)));
      });

      it("stores an empty object", async () => {
        const key = `${prefix()}empty`;
        await run(store.put(key, new Uint8Array(), "text/plain"));
        expect(await read(key)).toEqual(digest(new Uint8Array()));
        expect(await fetched(key)).toEqual(digest(new Uint8Array()));
        expect(Option.getOrUndefined(await run(store.head(key)))?.size).toBe(0);
      });

      it("replaces an object put again", async () => {
        const key = `${prefix()}master.m3u8`;
        await run(store.put(key, someBytes(5000), "text/plain"));
        const second = someBytes(100);
        await run(store.put(key, chunks(second, 7), "application/vnd.apple.mpegurl"));
        expect(await read(key)).toEqual(digest(second));
        expect(await run(store.head(key))).toEqual(
          Option.some({ key, size: 100, contentType: "application/vnd.apple.mpegurl" }),
        );
      });

      it("keeps the earlier object when the body of a put fails midway", async () => {
        const key = `${prefix()}1.m4s`;
        const earlier = someBytes(2000);
        await run(store.put(key, earlier, "video/mp4"));
        async function* broken(): ByteStream {
          yield someBytes(1000);
          throw new Error("client went away");
        }
        expect(await failureOf(store.put(key, broken(), "video/mp4"))).toBeInstanceOf(StorageError);
        expect(await read(key)).toEqual(digest(earlier));
        expect(await run(store.head(key))).toEqual(
          Option.some({ key, size: 2000, contentType: "video/mp4" }),
        );
        const fresh = `${prefix()}2.m4s`;
        await failureOf(store.put(fresh, broken(), "video/mp4"));
        expect(await disk.exists(fresh)).toBe(false);
      });

      it("does not find what is not there", async () => {
        const key = `${prefix()}missing`;
        expect(await failureOf(store.get(key))).toBeInstanceOf(NotFound);
        expect(await failureOf(store.get(key, { start: 0, end: 10 }))).toBeInstanceOf(NotFound);
        expect(Option.isNone(await run(store.head(key)))).toBe(true);
      });

      it("deletes every object under a prefix and nothing else", async () => {
        const p = prefix();
        const other = `${p.slice(0, -1)}x/kept`;
        for (const key of [`${p}720p/1.m4s`, `${p}720p/2.m4s`, `${p}master.m3u8`, `${p}1080p/1.m4s`, other])
          await run(store.put(key, someBytes(10), "video/mp4"));
        await run(store.deletePrefix(`${p}720p/`));
        expect(await disk.exists(`${p}720p/1.m4s`)).toBe(false);
        expect(await disk.exists(`${p}720p/2.m4s`)).toBe(false);
        expect(await disk.exists(`${p}1080p/1.m4s`)).toBe(true);
        expect(await disk.exists(`${p}master.m3u8`)).toBe(true);
        await run(store.deletePrefix(p));
        expect(await disk.exists(`${p}1080p/1.m4s`)).toBe(false);
        expect(await disk.exists(`${p}master.m3u8`)).toBe(false);
        expect(await disk.exists(other)).toBe(true);
        expect(await failureOf(store.get(`${p}master.m3u8`))).toBeInstanceOf(NotFound);
        await run(store.deletePrefix(p));
        await run(store.put(`${p}720p/1.m4s`, someBytes(3), "video/mp4"));
        expect(await disk.exists(`${p}720p/1.m4s`)).toBe(true);
      });
    });

    if (capabilities.deliveryUrl)
      describe("delivery URLs signed by the store", () => {
        it("serves the object, and a byte range of it, to a plain GET until the URL expires", async (ctx) => {
          const key = `renditions/${uid("ast")}/720p/3.m4s`;
          const bytes = someBytes(300 * KiB);
          await run(store.put(key, bytes, "video/mp4"));
          const url = await run(delivering(ctx)(key, Date.now() + 5 * 60_000));
          const whole = await fetch(url);
          expect(whole.status).toBe(200);
          expect(digest(new Uint8Array(await whole.arrayBuffer()))).toEqual(digest(bytes));
          const part = await fetch(url, { headers: { range: "bytes=1000-1999" } });
          expect(part.status).toBe(206);
          expect(part.headers.get("content-range")).toBe(`bytes 1000-1999/${bytes.byteLength}`);
          expect(digest(new Uint8Array(await part.arrayBuffer()))).toEqual(digest(bytes.slice(1000, 2000)));

          const refused = async (reply: Response) => {
            expect(isClientError(reply.status), `status ${reply.status}`).toBe(true);
            await reply.arrayBuffer();
          };
          await refused(await fetch(tamperedUrl(url)));
          await refused(await fetch(await shortLived((at) => run(delivering(ctx)(key, at)))));
          // A read capability only: it writes and deletes nothing.
          await refused(await putTo(url, someBytes(10)));
          await refused(await fetch(url, { method: "DELETE" }));
          expect(await read(key)).toEqual(digest(bytes));
        });
      });

    if (capabilities.localPath)
      describe("local paths", () => {
        it("gives the path of a file holding the object's bytes", async (ctx) => {
          const localPath = localPaths(ctx);
          const key = `origins/${uid("tnt")}/${uid("ast")}`;
          const bytes = someBytes(10 * KiB);
          await run(store.put(key, bytes, "video/mp4"));
          expect(digest(await readFile(localPath(key)))).toEqual(digest(bytes));
        });

        it("refuses keys and upload ids that could leave the root", async (ctx) => {
          const localPath = localPaths(ctx);
          const bad = [
            "../escape",
            "a/../../escape",
            "/etc/passwd",
            "a/./b",
            "a//b",
            "a/",
            "",
            "a\0b",
            "a\\..\\b",
          ];
          for (const key of bad) {
            expect(await failureOf(store.put(key, someBytes(1), "text/plain")), key).toBeInstanceOf(
              StorageError,
            );
            expect(await failureOf(store.get(key)), key).toBeInstanceOf(StorageError);
            expect(await failureOf(store.head(key)), key).toBeInstanceOf(StorageError);
            expect(() => localPath(key), key).toThrow(StorageError);
            const ref = { uploadId: uid("upl"), key };
            expect(await failureOf(store.completeMultipart(ref, [])), key).toBeInstanceOf(StorageError);
          }
          for (const prefix of ["../", "..", "a/../", "/", "/etc"]) {
            expect(await failureOf(store.deletePrefix(prefix)), prefix).toBeInstanceOf(StorageError);
          }
          for (const uploadId of ["../x", "..", "a/b", ""]) {
            const ref = { uploadId, key: `origins/${uid("tnt")}/${uid("ast")}` };
            expect(await failureOf(store.createMultipart(ref)), uploadId).toBeInstanceOf(StorageError);
            expect(await failureOf(store.abortMultipart(ref)), uploadId).toBeInstanceOf(StorageError);
            expect(await failureOf(store.listParts(ref)), uploadId).toBeInstanceOf(StorageError);
            if (store.receivePart)
              expect(
                await failureOf(store.receivePart(ref, { number: 1, expectedSize: 1 }, chunks(someBytes(1)))),
                uploadId,
              ).toBeInstanceOf(StorageError);
          }
        });
      });
  });

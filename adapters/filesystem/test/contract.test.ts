import { createHash } from "node:crypto";
import { mkdtemp, readdir, rm, truncate } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { filesystemObjectStore } from "@vod/adapter-filesystem";
import { filesystemBackdoor } from "@vod/adapter-filesystem/testing";
import { describeObjectStore, uid } from "@vod/contract-tests";
import type { ByteStream, ObjectStore } from "@vod/core";
import { Effect, Option } from "effect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

const KiB = 1024;
const MiB = 1024 * KiB;
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect);
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** Every file under `dir`, relative, at any depth (the store's dot-files included). */
const filesUnder = async (dir: string) =>
  (await readdir(dir, { recursive: true, withFileTypes: true }))
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)));

const freshRoot = () => mkdtemp(path.join(tmpdir(), "vod-fs-"));

describeObjectStore(
  "filesystem",
  async () => {
    const root = await freshRoot();
    return {
      store: filesystemObjectStore({ root }),
      backdoor: filesystemBackdoor(root),
      cleanup: () => rm(root, { recursive: true, force: true }),
    };
  },
  { receivePart: true, partUploadUrls: false, localPath: true, deliveryUrl: false, hashesOnAssembly: true },
);

describe("filesystem object store", () => {
  let root: string;
  beforeEach(async () => {
    root = await freshRoot();
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  it("receives a 256 MiB part without holding it in memory", async () => {
    const store = filesystemObjectStore({ root });
    const ref = { uploadId: uid("upl"), key: `origins/${uid("tnt")}/${uid("ast")}` };
    const chunk = 64 * KiB;
    const count = (256 * MiB) / chunk;
    const expected = createHash("sha256");
    const before = process.memoryUsage().rss;
    let peak = before;
    // Fresh chunks: a store that kept them would grow by the whole part.
    async function* body(): ByteStream {
      for (let i = 0; i < count; i++) {
        const bytes = Buffer.alloc(chunk, i % 251);
        expected.update(bytes);
        if (i % 64 === 0) peak = Math.max(peak, process.memoryUsage().rss);
        yield bytes;
      }
    }
    const part = await run(store.receivePart(ref, { number: 1, expectedSize: 256 * MiB }, body()));
    peak = Math.max(peak, process.memoryUsage().rss);
    expect(part).toMatchObject({ number: 1, size: 256 * MiB, sha256: null });
    // Assembling streams too, and hashes what it joins.
    const assembled = await run(store.completeMultipart(ref, [1]));
    peak = Math.max(peak, process.memoryUsage().rss);
    expect(assembled).toEqual({ size: 256 * MiB, sha256: expected.digest("hex") });
    expect(peak - before).toBeLessThan(64 * MiB);
  }, 30_000);

  it("shows earlier parts and objects to a new store on the same root", async () => {
    const ref = { uploadId: uid("upl"), key: `origins/${uid("tnt")}/${uid("ast")}` };
    const one = new Uint8Array(3000).fill(1);
    const two = new Uint8Array(500).fill(2);
    const poster = `posters/${uid("ast")}.jpg`;
    const before: ObjectStore = filesystemObjectStore({ root });
    const stored = await run(before.receivePart!(ref, { number: 1, expectedSize: 3000 }, toStream(one)));
    await run(before.put(poster, new Uint8Array([9, 9, 9]), "image/jpeg"));

    const after = filesystemObjectStore({ root });
    expect(await run(after.listParts(ref))).toEqual([stored]);
    expect(Option.getOrThrow(await run(after.head(poster)))).toEqual({
      key: poster,
      size: 3,
      contentType: "image/jpeg",
    });
    await run(after.receivePart(ref, { number: 2, expectedSize: 500 }, toStream(two)));
    const assembled = await run(after.completeMultipart(ref, [1, 2]));
    expect(assembled.sha256).toBe(sha256(new Uint8Array([...one, ...two])));

    const third = filesystemObjectStore({ root });
    expect(await run(third.completeMultipart(ref, [1, 2]))).toEqual(assembled);
    expect(Option.getOrThrow(await run(third.head(ref.key))).contentType).toBe("application/octet-stream");
  });

  it("lists a part cut short on disk (a crash before completion) at its real size, and a resend replaces it", async () => {
    // Parts are not flushed on receipt: after a crash a part file may hold fewer bytes than were
    // acknowledged. The store reports the size on disk, so the core sees a wrong-size part and
    // the client sends it again; nothing short is ever assembled.
    const store = filesystemObjectStore({ root });
    const ref = { uploadId: uid("upl"), key: `origins/${uid("tnt")}/${uid("ast")}` };
    const body = new Uint8Array(64 * KiB).fill(7);
    const first = await run(
      store.receivePart(ref, { number: 1, expectedSize: body.byteLength }, toStream(body)),
    );
    const [file] = (await filesUnder(root)).filter((f) => f.endsWith(".part"));
    await truncate(path.join(root, file!), 1000);
    expect(await run(store.listParts(ref))).toEqual([{ ...first, size: 1000 }]);

    const again = await run(
      store.receivePart(ref, { number: 1, expectedSize: body.byteLength }, toStream(body)),
    );
    expect(again.etag).not.toBe(first.etag);
    expect(await run(store.listParts(ref))).toEqual([again]);
    expect((await filesUnder(root)).filter((f) => f.endsWith(".part"))).toHaveLength(1);
    expect(await run(store.completeMultipart(ref, [1]))).toEqual({
      size: body.byteLength,
      sha256: sha256(body),
    });
  });

  it("leaves no temporary files behind, and no empty directories after deleting", async () => {
    const store = filesystemObjectStore({ root });
    const ref = { uploadId: uid("upl"), key: `origins/${uid("tnt")}/${uid("ast")}` };
    async function* broken(): ByteStream {
      yield new Uint8Array(10);
      throw new Error("client went away");
    }
    await run(Effect.either(store.receivePart(ref, { number: 1, expectedSize: 20 }, broken())));
    await run(
      Effect.either(store.receivePart(ref, { number: 1, expectedSize: 5 }, toStream(new Uint8Array(6)))),
    );
    await run(Effect.either(store.put("renditions/a/1.m4s", broken(), "video/mp4")));
    await run(store.put("renditions/a/720p/2.m4s", new Uint8Array(4), "video/mp4"));
    expect((await filesUnder(root)).filter((f) => f.endsWith(".tmp"))).toEqual([]);
    expect((await filesUnder(root)).sort()).toEqual(
      ["renditions/a/720p/.2.m4s.meta.json", "renditions/a/720p/2.m4s"].sort(),
    );
    await run(store.deletePrefix("renditions/a/"));
    expect(await readdir(path.join(root, "renditions"))).toEqual([]);
  });
});

async function* toStream(bytes: Uint8Array): ByteStream {
  yield bytes;
}

import { createHash, randomBytes } from "node:crypto";
import { createReadStream, type Dirent } from "node:fs";
import {
  type FileHandle,
  mkdir,
  open,
  readdir,
  readFile,
  rename,
  rm,
  rmdir,
  stat,
  writeFile,
} from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import {
  type AssembledObject,
  type ByteStream,
  NotFound,
  type ObjectStore,
  type PartRejected,
  StorageError,
  type StoredObject,
  type StoredPart,
} from "@vod/core";
import { Effect, Option } from "effect";

export interface FilesystemObjectStoreConfig {
  /** Directory that holds every object (at `<root>/<key>`) and the parts of open uploads. */
  readonly root: string;
}

/** The store's own names start with a dot, which no key segment may, so they never meet a key. */
const MULTIPART_DIR = ".multipart";
const ASSEMBLED_TYPE = "application/octet-stream";

/** What an object's sidecar (`.<name>.meta.json` beside it) records. */
interface ObjectMeta {
  readonly contentType: string;
  readonly size: number;
  readonly sha256: string;
  /** The upload that assembled it: completing that upload again answers this object. */
  readonly uploadId?: string;
}

/** A part's pointer file (`<n>.json`): renaming it into place is what makes a part stored. */
interface PartPointer {
  readonly size: number;
  readonly sha256: string;
  readonly file: string;
}

const errno = (e: unknown) =>
  typeof e === "object" && e !== null && "code" in e && typeof e.code === "string" ? e.code : undefined;
const isMissing = (e: unknown) => errno(e) === "ENOENT" || errno(e) === "ENOTDIR";

const failure = (what: string) => (cause: unknown) =>
  cause instanceof StorageError
    ? cause
    : new StorageError({ message: `${what}: ${errno(cause) ?? String(cause)}`, cause });

const attempt = <A>(what: string, run: () => Promise<A>): Effect.Effect<A, StorageError> =>
  Effect.tryPromise({ try: run, catch: failure(what) });

/** Equal bytes give equal etags; the first half of the SHA-256 is plenty to tell parts apart. */
const etagOf = (sha256: string) => sha256.slice(0, 32);
const token = () => randomBytes(8).toString("hex");

const segmentProblem = (s: string) =>
  s === ""
    ? "empty segment"
    : s.startsWith(".")
      ? "segment starts with a dot"
      : /[\0\\/]/.test(s)
        ? "NUL, slash or backslash"
        : undefined;

/** A key is a relative `/`-separated path of plain segments: nothing that could leave the root. */
const keyProblem = (key: string) => {
  if (key === "") return "empty key";
  for (const s of key.split("/")) {
    const problem = segmentProblem(s);
    if (problem) return problem;
  }
  return undefined;
};

/** A prefix is a key, or a key's start: its last segment may be partial or empty. */
const prefixProblem = (prefix: string) => {
  const segments = prefix.split("/");
  const last = segments.pop()!;
  for (const s of segments) {
    const problem = segmentProblem(s);
    if (problem) return problem;
  }
  return last === "" ? undefined : segmentProblem(last);
};

const refused = (what: string, value: string, problem: string) =>
  new StorageError({ message: `refused ${what} ${JSON.stringify(value)}: ${problem}` });

class TooLong extends Error {}

/**
 * Streams `body` into the open file, hashing as bytes pass; never holds more than the stream's
 * buffers. With `limit`, stops reading once more than `limit` bytes arrived.
 */
const writeBody = async (
  handle: FileHandle,
  body: ByteStream | Uint8Array,
  limit = Number.POSITIVE_INFINITY,
) => {
  const hash = createHash("sha256");
  let size = 0;
  async function* counted(source: AsyncIterable<Uint8Array>) {
    for await (const chunk of source) {
      size += chunk.byteLength;
      if (size > limit) throw new TooLong();
      hash.update(chunk);
      yield chunk;
    }
  }
  try {
    // `flush`: the bytes reach the disk before the file is renamed into place, so a crash
    // cannot leave a renamed but empty file.
    const source: AsyncIterable<Uint8Array> =
      body instanceof Uint8Array
        ? (async function* () {
            yield body;
          })()
        : body;
    await pipeline(source, counted, handle.createWriteStream({ flush: true }));
  } catch (e) {
    if (e instanceof TooLong) return { complete: false as const, size };
    throw e;
  }
  return { complete: true as const, size, sha256: hash.digest("hex") };
};

async function* joined(files: ReadonlyArray<string>): AsyncGenerator<Uint8Array> {
  for (const file of files) yield* createReadStream(file);
}

/**
 * Objects as files under `root`, each with a small metadata sidecar (content type, SHA-256), and
 * multipart uploads as part files under `root/.multipart/<uploadId>`. Every write goes to a
 * temporary file in the target's directory and is renamed into place, so a reader sees the old
 * bytes or the new, never a half file. It takes part bodies itself (`receivePart`), so the core
 * hands out media-app part URLs, and it gives local paths to tools that read files.
 */
export const filesystemObjectStore = (
  config: FilesystemObjectStoreConfig,
): ObjectStore & {
  readonly receivePart: NonNullable<ObjectStore["receivePart"]>;
  readonly localPath: NonNullable<ObjectStore["localPath"]>;
} => {
  const root = path.resolve(config.root);

  const fileOf = (key: string) => {
    const problem = keyProblem(key);
    if (problem) throw refused("key", key, problem);
    return path.join(root, ...key.split("/"));
  };
  const partsDirOf = (uploadId: string) => {
    const problem = segmentProblem(uploadId);
    if (problem) throw refused("upload id", uploadId, problem);
    return path.join(root, MULTIPART_DIR, uploadId);
  };
  const sidecarOf = (file: string) => path.join(path.dirname(file), `.${path.basename(file)}.meta.json`);

  /** Opens a new temporary file beside `target`, creating its directory. */
  const openTemp = async (target: string) => {
    const dir = path.dirname(target);
    const tmp = path.join(dir, `.${path.basename(target)}.${token()}.tmp`);
    for (let tries = 1; ; tries++) {
      await mkdir(dir, { recursive: true });
      try {
        return { tmp, handle: await open(tmp, "wx") };
      } catch (e) {
        // A concurrent deletePrefix may prune the directory between mkdir and open.
        if (errno(e) !== "ENOENT" || tries >= 3) throw e;
      }
    }
  };

  const writeJson = async (target: string, value: unknown) => {
    const tmp = path.join(path.dirname(target), `.${path.basename(target)}.${token()}.tmp`);
    await writeFile(tmp, JSON.stringify(value), { flag: "wx", flush: true });
    await rename(tmp, target);
  };

  const readJson = async <T>(file: string): Promise<T | undefined> => {
    try {
      return JSON.parse(await readFile(file, "utf8")) as T;
    } catch (e) {
      if (isMissing(e)) return undefined;
      throw e;
    }
  };

  /**
   * Streams `body` into the object at `file` and records its metadata. The old sidecar goes first,
   * so that a crash midway leaves an object without metadata, never metadata of other bytes.
   */
  const writeObject = async (
    file: string,
    body: ByteStream | Uint8Array,
    meta: (w: ObjectMeta) => ObjectMeta,
  ) => {
    const { tmp, handle } = await openTemp(file);
    try {
      const written = await writeBody(handle, body);
      if (!written.complete) throw new Error("unreachable: no limit was set");
      const sidecar = sidecarOf(file);
      await rm(sidecar, { force: true });
      await rename(tmp, file);
      const recorded = meta({ contentType: ASSEMBLED_TYPE, size: written.size, sha256: written.sha256 });
      await writeJson(sidecar, recorded);
      return recorded;
    } catch (e) {
      await rm(tmp, { force: true });
      throw e;
    }
  };

  const describeFile = async (key: string, file: string): Promise<StoredObject | undefined> => {
    let size: number;
    try {
      const s = await stat(file);
      if (!s.isFile()) return undefined;
      size = s.size;
    } catch (e) {
      if (isMissing(e)) return undefined;
      throw e;
    }
    const meta = await readJson<ObjectMeta>(sidecarOf(file));
    return { key, size, contentType: meta?.contentType ?? ASSEMBLED_TYPE };
  };

  /** Keys under `prefix`, by key ascending, and the directories that lie wholly under it. */
  const walk = async (prefix: string) => {
    const keys: string[] = [];
    const dirs: string[] = [];
    const visit = async (dir: string, rel: string): Promise<void> => {
      let entries: Dirent[];
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch (e) {
        if (isMissing(e)) return;
        throw e;
      }
      if (rel !== "" && rel.startsWith(prefix)) dirs.push(dir);
      await Promise.all(
        entries.map(async (entry) => {
          // The store's own dot-files, and names no key could have (put there by hand), are not objects.
          if (segmentProblem(entry.name)) return;
          const key = rel + entry.name;
          if (entry.isDirectory()) {
            const sub = `${key}/`;
            if (sub.startsWith(prefix) || prefix.startsWith(sub))
              await visit(path.join(dir, entry.name), sub);
          } else if (entry.isFile() && key.startsWith(prefix)) keys.push(key);
        }),
      );
    };
    const base = prefix.slice(0, prefix.lastIndexOf("/") + 1);
    await visit(base === "" ? root : path.join(root, ...base.slice(0, -1).split("/")), base);
    return { keys: keys.sort(), dirs };
  };

  const readPointers = async (dir: string) => {
    let names: string[];
    try {
      names = await readdir(dir);
    } catch (e) {
      if (isMissing(e)) return [];
      throw e;
    }
    const pointers = await Promise.all(
      names
        .filter((name) => /^\d+\.json$/.test(name))
        .map(async (name) => {
          const pointer = await readJson<PartPointer>(path.join(dir, name));
          return pointer && { number: Number.parseInt(name, 10), ...pointer };
        }),
    );
    return pointers.filter((p) => p !== undefined).sort((a, b) => a.number - b.number);
  };

  // Completing and aborting one upload run one at a time in this process, so that a retried
  // completion never reads parts another completion is removing.
  const queues = new Map<string, Promise<unknown>>();
  const oneAtATime = <A>(uploadId: string, run: () => Promise<A>): Promise<A> => {
    const result = (queues.get(uploadId) ?? Promise.resolve()).then(run, run);
    const settled = result.catch(() => undefined);
    queues.set(uploadId, settled);
    void settled.then(() => {
      if (queues.get(uploadId) === settled) queues.delete(uploadId);
    });
    return result;
  };

  const locate = <A>(what: string, resolve: () => A) => Effect.try({ try: resolve, catch: failure(what) });

  return {
    createMultipart: (ref) =>
      attempt(`creating upload ${ref.uploadId}`, async () => {
        await mkdir(partsDirOf(ref.uploadId), { recursive: true });
      }),

    listParts: (ref) =>
      attempt(`listing parts of upload ${ref.uploadId}`, async () =>
        (await readPointers(partsDirOf(ref.uploadId))).map(
          (p): StoredPart => ({ number: p.number, size: p.size, etag: etagOf(p.sha256), sha256: p.sha256 }),
        ),
      ),

    completeMultipart: (ref, numbers) =>
      attempt(`completing upload ${ref.uploadId}`, () =>
        oneAtATime(ref.uploadId, async (): Promise<AssembledObject> => {
          const dir = partsDirOf(ref.uploadId);
          const file = fileOf(ref.key);
          const done = await readJson<ObjectMeta>(sidecarOf(file));
          if (done?.uploadId === ref.uploadId) {
            await rm(dir, { recursive: true, force: true });
            return { size: done.size, sha256: done.sha256 };
          }
          const pointers = new Map((await readPointers(dir)).map((p) => [p.number, p]));
          const files = numbers.map((n) => {
            const pointer = pointers.get(n);
            if (!pointer)
              throw new StorageError({ message: `part ${n} of upload ${ref.uploadId} is not stored` });
            return path.join(dir, pointer.file);
          });
          const meta = await writeObject(file, joined(files), (w) => ({ ...w, uploadId: ref.uploadId }));
          await rm(dir, { recursive: true, force: true });
          return { size: meta.size, sha256: meta.sha256 };
        }),
      ),

    abortMultipart: (ref) =>
      attempt(`aborting upload ${ref.uploadId}`, () =>
        oneAtATime(ref.uploadId, () => rm(partsDirOf(ref.uploadId), { recursive: true, force: true })),
      ),

    receivePart: (ref, part, body) =>
      attempt(
        `receiving part ${part.number} of upload ${ref.uploadId}`,
        async (): Promise<StoredPart | PartRejected> => {
          if (!Number.isSafeInteger(part.number) || part.number < 1)
            throw new StorageError({ message: `invalid part number ${part.number}` });
          const dir = partsDirOf(ref.uploadId);
          const file = `${part.number}.${token()}.bin`;
          const { tmp, handle } = await openTemp(path.join(dir, file));
          let written: Awaited<ReturnType<typeof writeBody>>;
          try {
            written = await writeBody(handle, body, part.expectedSize);
            if (!written.complete || written.size !== part.expectedSize) {
              await rm(tmp, { force: true });
              return { _tag: "PartRejected", reason: "wrong_size", received: written.size };
            }
            await rename(tmp, path.join(dir, file));
          } catch (e) {
            await rm(tmp, { force: true });
            throw e;
          }
          // The data file has a name of its own; the part becomes this one when its pointer is
          // renamed over the old pointer, and only then is the earlier copy removed.
          const pointerFile = path.join(dir, `${part.number}.json`);
          const previous = await readJson<PartPointer>(pointerFile);
          try {
            await writeJson(pointerFile, {
              size: written.size,
              sha256: written.sha256,
              file,
            } satisfies PartPointer);
          } catch (e) {
            await rm(path.join(dir, file), { force: true });
            throw e;
          }
          if (previous && previous.file !== file) await rm(path.join(dir, previous.file), { force: true });
          return {
            number: part.number,
            size: written.size,
            etag: etagOf(written.sha256),
            sha256: written.sha256,
          };
        },
      ).pipe(Effect.flatMap((r) => ("_tag" in r ? Effect.fail(r) : Effect.succeed(r)))),

    put: (key, body, contentType) =>
      attempt(`writing ${key}`, async () => {
        await writeObject(fileOf(key), body, (w) => ({ ...w, contentType }));
      }),

    get: (key, range) =>
      locate(`reading ${key}`, () => fileOf(key)).pipe(
        Effect.filterOrFail(
          () =>
            range === undefined ||
            (Number.isSafeInteger(range.start) &&
              Number.isSafeInteger(range.end) &&
              range.start >= 0 &&
              range.end >= range.start),
          () => new StorageError({ message: `invalid range ${range?.start}-${range?.end} of ${key}` }),
        ),
        Effect.flatMap((file) =>
          Effect.tryPromise({
            try: () => stat(file),
            catch: (e) =>
              isMissing(e) ? new NotFound({ message: `no object at ${key}` }) : failure(`reading ${key}`)(e),
          }).pipe(
            Effect.filterOrFail(
              (s) => s.isFile(),
              () => new NotFound({ message: `no object at ${key}` }),
            ),
            // A range past the end is cut short, as an HTTP range would be.
            Effect.map(
              (): ByteStream => createReadStream(file, range && { start: range.start, end: range.end }),
            ),
          ),
        ),
      ),

    head: (key) =>
      attempt(`reading ${key}`, async () => Option.fromNullable(await describeFile(key, fileOf(key)))),

    list: (prefix) =>
      attempt(`listing ${prefix}`, async () => {
        const problem = prefixProblem(prefix);
        if (problem) throw refused("prefix", prefix, problem);
        const { keys } = await walk(prefix);
        const found = await Promise.all(keys.map((key) => describeFile(key, fileOf(key))));
        // A file removed while listing is simply not listed.
        return found.filter((o) => o !== undefined);
      }),

    deletePrefix: (prefix) =>
      attempt(`deleting ${prefix}`, async () => {
        const problem = prefixProblem(prefix);
        if (problem) throw refused("prefix", prefix, problem);
        const { keys, dirs } = await walk(prefix);
        await Promise.all(
          keys.map(async (key) => {
            const file = fileOf(key);
            // Sidecar first: a crash midway leaves a listed object that can be deleted again.
            await rm(sidecarOf(file), { force: true });
            await rm(file, { force: true });
          }),
        );
        // Deepest first; a directory that is not empty (a write in flight) is kept.
        for (const dir of dirs.sort((a, b) => b.length - a.length)) await rmdir(dir).catch(() => undefined);
      }),

    localPath: (key) => fileOf(key),
  };
};

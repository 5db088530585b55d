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
import type { AssembledObject, ByteStream, ObjectStore, StoredObject, StoredPart } from "@vod/core";
import { isValidRange, NotFound, PartRejected, PartsMismatched, StorageError } from "@vod/core";
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
  /** Of an assembled object only: objects stored whole are not hashed. */
  readonly sha256?: string;
  /** The upload that assembled it: completing that upload again answers this object. */
  readonly uploadId?: string;
}

/**
 * A stored part is the file `<n>-<etag>.part`: renaming it into place is what makes it stored.
 * Etags grow with time, so when a resend briefly leaves two files of one part, the later wins.
 */
const PART_FILE = /^(\d+)-([0-9a-z]+)\.part$/;
const partFileName = (number: number, etag: string) => `${number}-${etag}.part`;
const errno = (e: unknown) =>
  typeof e === "object" && e !== null && "code" in e && typeof e.code === "string" ? e.code : undefined;
const isMissing = (e: unknown) => errno(e) === "ENOENT" || errno(e) === "ENOTDIR";

const failure = (what: string) => (cause: unknown) =>
  cause instanceof StorageError
    ? cause
    : new StorageError({ message: `${what}: ${errno(cause) ?? String(cause)}`, cause });

const attempt = <A>(what: string, run: () => Promise<A>): Effect.Effect<A, StorageError> =>
  Effect.tryPromise({ try: run, catch: failure(what) });

const token = () => randomBytes(8).toString("hex");
let etagCounter = 0;
/**
 * A new etag for each stored body: milliseconds, a counter and random bits, fixed-width base 36,
 * so that later etags sort after earlier ones (within a process always, across processes by clock).
 */
const nextEtag = () => {
  etagCounter = (etagCounter + 1) % 36 ** 4;
  return (
    Date.now().toString(36).padStart(9, "0") +
    etagCounter.toString(36).padStart(4, "0") +
    randomBytes(5).toString("hex")
  );
};

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
 * How much a file's write stream buffers: while one write is at the disk, the chunks that arrive
 * meanwhile (64 KiB each from a socket) go down together in one writev, not one write each.
 */
const WRITE_BUFFER = 1024 * 1024;

/**
 * Streams `body` into the open file; never holds more than the stream's buffers. With `limit`,
 * stops reading once more than `limit` bytes arrived. `durable`: the bytes reach the disk before
 * the file is renamed into place, so a crash cannot leave a renamed but empty file.
 */
const writeBody = async (
  handle: FileHandle,
  body: ByteStream | Uint8Array,
  options: { readonly limit?: number; readonly durable: boolean },
) => {
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  let size = 0;
  async function* counted(source: AsyncIterable<Uint8Array>) {
    for await (const chunk of source) {
      size += chunk.byteLength;
      if (size > limit) throw new TooLong();
      yield chunk;
    }
  }
  try {
    const source: AsyncIterable<Uint8Array> =
      body instanceof Uint8Array
        ? (async function* () {
            yield body;
          })()
        : body;
    await pipeline(
      source,
      counted,
      handle.createWriteStream({ flush: options.durable, highWaterMark: WRITE_BUFFER }),
    );
  } catch (e) {
    if (e instanceof TooLong) return { complete: false as const, size };
    throw e;
  }
  return { complete: true as const, size };
};

/** Reads at most this much per read while assembling and hashing: fewer, larger syscalls. */
const ASSEMBLY_CHUNK = 1024 * 1024;

/** A part file to join, and the sha256 its bytes must have, if the client gave one. */
interface Joining {
  readonly number: number;
  readonly file: string;
  readonly sha256?: string;
}

/**
 * The parts' bytes in order, hashed as they pass: the whole object's SHA-256 always, a part's own
 * only where it is to be checked. Hashing here, once, is what lets parts be taken unhashed.
 */
const joined = (parts: ReadonlyArray<Joining>) => {
  const whole = createHash("sha256");
  const mismatched: Array<{ number: number; sha256: string }> = [];
  async function* bytes(): AsyncGenerator<Uint8Array> {
    for (const part of parts) {
      const own = part.sha256 === undefined ? undefined : createHash("sha256");
      for await (const chunk of createReadStream(part.file, { highWaterMark: ASSEMBLY_CHUNK })) {
        whole.update(chunk);
        own?.update(chunk);
        yield chunk;
      }
      const actual = own?.digest("hex");
      if (actual !== undefined && actual !== part.sha256)
        mismatched.push({ number: part.number, sha256: actual });
    }
  }
  return { bytes: bytes(), sha256: () => whole.digest("hex"), mismatched };
};

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
   * Streams `body` into a temporary file beside `file`, durably; `commit` then decides whether it
   * becomes the object (renamed into place, with its metadata) or is dropped. The old sidecar goes
   * first, so that a crash midway leaves an object without metadata, never metadata of other bytes.
   */
  const writeObject = async <A>(
    file: string,
    body: ByteStream | Uint8Array,
    commit: (
      size: number,
    ) =>
      | { readonly keep: true; readonly meta: ObjectMeta; readonly result: A }
      | { readonly keep: false; readonly result: A },
  ): Promise<A> => {
    const { tmp, handle } = await openTemp(file);
    try {
      const written = await writeBody(handle, body, { durable: true });
      if (!written.complete) throw new Error("unreachable: no limit was set");
      const decided = commit(written.size);
      if (!decided.keep) {
        await rm(tmp, { force: true });
        return decided.result;
      }
      const sidecar = sidecarOf(file);
      await rm(sidecar, { force: true });
      await rename(tmp, file);
      await writeJson(sidecar, decided.meta);
      return decided.result;
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

  /** The stored parts of an upload, by number ascending: for each number, its latest file. */
  const readParts = async (dir: string) => {
    let names: string[];
    try {
      names = await readdir(dir);
    } catch (e) {
      if (isMissing(e)) return [];
      throw e;
    }
    const latest = new Map<number, { number: number; etag: string; file: string }>();
    for (const name of names) {
      const match = PART_FILE.exec(name);
      if (!match) continue;
      const number = Number.parseInt(match[1]!, 10);
      const etag = match[2]!;
      if ((latest.get(number)?.etag ?? "") < etag)
        latest.set(number, { number, etag, file: path.join(dir, name) });
    }
    const parts = await Promise.all(
      [...latest.values()].map(async (p) => {
        try {
          // The size on disk, not one recorded beside it: a part cut short by a crash shows as such.
          return { ...p, size: (await stat(p.file)).size };
        } catch (e) {
          if (isMissing(e)) return undefined; // replaced by a resend while listing
          throw e;
        }
      }),
    );
    return parts.filter((p) => p !== undefined).sort((a, b) => a.number - b.number);
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
        (await readParts(partsDirOf(ref.uploadId))).map(
          (p): StoredPart => ({ number: p.number, size: p.size, etag: p.etag, sha256: null }),
        ),
      ),

    completeMultipart: (ref, numbers, expected) =>
      Effect.flatMap(
        attempt(`completing upload ${ref.uploadId}`, () =>
          oneAtATime(ref.uploadId, async (): Promise<AssembledObject | PartsMismatched> => {
            const dir = partsDirOf(ref.uploadId);
            const file = fileOf(ref.key);
            const done = await readJson<ObjectMeta>(sidecarOf(file));
            if (done?.uploadId === ref.uploadId && done.sha256 !== undefined) {
              await rm(dir, { recursive: true, force: true });
              return { size: done.size, sha256: done.sha256 };
            }
            const stored = new Map((await readParts(dir)).map((p) => [p.number, p]));
            const parts = numbers.map((number): Joining => {
              const part = stored.get(number);
              if (!part)
                throw new StorageError({ message: `part ${number} of upload ${ref.uploadId} is not stored` });
              const sha256 = expected?.partSha256?.get(number);
              return sha256 === undefined ? { number, file: part.file } : { number, file: part.file, sha256 };
            });
            const joining = joined(parts);
            // Parts were taken without a flush; the object is written durably, so nothing the
            // core records as uploaded can be lost to a crash.
            const result = await writeObject<AssembledObject | PartsMismatched>(
              file,
              joining.bytes,
              (size) => {
                if (joining.mismatched.length > 0)
                  return {
                    keep: false,
                    result: new PartsMismatched({ parts: joining.mismatched }),
                  };
                const sha256 = joining.sha256();
                return {
                  keep: true,
                  meta: { contentType: ASSEMBLED_TYPE, size, sha256, uploadId: ref.uploadId },
                  result: { size, sha256 },
                };
              },
            );
            if (!(result instanceof PartsMismatched)) await rm(dir, { recursive: true, force: true });
            return result;
          }),
        ),
        (r) => (r instanceof PartsMismatched ? Effect.fail(r) : Effect.succeed(r)),
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
          const etag = nextEtag();
          const target = path.join(dir, partFileName(part.number, etag));
          const { tmp, handle } = await openTemp(target);
          try {
            // No hash and no flush here: a part is a plain streamed write, as fast as the disk's
            // cache takes it. The object's bytes are hashed and flushed once, at completion; a
            // part lost to a crash before that reads as missing (or short) and is sent again.
            const written = await writeBody(handle, body, { limit: part.expectedSize, durable: false });
            if (!written.complete || written.size !== part.expectedSize) {
              await rm(tmp, { force: true });
              return new PartRejected({ reason: "wrong_size", received: written.size });
            }
            await rename(tmp, target);
          } catch (e) {
            await rm(tmp, { force: true });
            throw e;
          }
          // The part is now this file; earlier copies of it go (a later one, from a concurrent
          // resend, stays and wins).
          const earlier = (await readdir(dir)).filter((name) => {
            const match = PART_FILE.exec(name);
            return match !== null && Number.parseInt(match[1]!, 10) === part.number && match[2]! < etag;
          });
          await Promise.all(earlier.map((name) => rm(path.join(dir, name), { force: true })));
          return { number: part.number, size: part.expectedSize, etag, sha256: null };
        },
      ).pipe(Effect.flatMap((r) => (r instanceof PartRejected ? Effect.fail(r) : Effect.succeed(r)))),

    put: (key, body, contentType) =>
      attempt(`writing ${key}`, () =>
        writeObject(fileOf(key), body, (size) => ({
          keep: true,
          meta: { contentType, size },
          result: undefined,
        })),
      ),

    get: (key, range) =>
      locate(`reading ${key}`, () => fileOf(key)).pipe(
        Effect.filterOrFail(
          () => range === undefined || isValidRange(range),
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

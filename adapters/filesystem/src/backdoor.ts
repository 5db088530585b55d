import { readdir, readFile, stat } from "node:fs/promises";
import path from "node:path";

/**
 * What the filesystem store holds, read from the disk beside the adapter, in the shape of
 * `@vod/contract-tests`' ObjectStoreBackdoor (suites check the disk through it, not the adapter).
 */
export interface FilesystemObjectStoreBackdoor {
  /** The stored object's bytes, or undefined when there is none at `key`. */
  read(key: string): Promise<Uint8Array | undefined>;
  exists(key: string): Promise<boolean>;
  /** Keys of the objects under `prefix`, sorted (sidecar and temporary files left out). */
  keysUnder(prefix: string): Promise<ReadonlyArray<string>>;
  /** Every part body file of the upload, committed or not, by number ascending. */
  storedParts(
    uploadId: string,
  ): Promise<ReadonlyArray<{ readonly number: number; readonly bytes: Uint8Array }>>;
}

const orUndefined = async <T>(read: Promise<T>) => {
  try {
    return await read;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
};

/**
 * The disk under `root`: objects at `<root>/<key>`, part bodies in `<root>/.multipart/<id>`.
 * Every body file counts as a stored part, committed or not, so strays show up.
 */
export const filesystemBackdoor = (root: string): FilesystemObjectStoreBackdoor => ({
  read: async (key) => {
    const bytes = await orUndefined(readFile(path.join(root, key)));
    return bytes && new Uint8Array(bytes);
  },
  exists: async (key) => (await orUndefined(stat(path.join(root, key))))?.isFile() ?? false,
  keysUnder: async (prefix) => {
    const entries = (await orUndefined(readdir(root, { recursive: true, withFileTypes: true }))) ?? [];
    return entries
      .filter((entry) => entry.isFile() && !entry.name.startsWith("."))
      .map((entry) => path.relative(root, path.join(entry.parentPath, entry.name)).split(path.sep).join("/"))
      .filter((key) => key.startsWith(prefix) && !key.startsWith(".multipart/"))
      .sort();
  },
  storedParts: async (uploadId) => {
    const dir = path.join(root, ".multipart", uploadId);
    const names = (await orUndefined(readdir(dir))) ?? [];
    const bodies = await Promise.all(
      names
        .filter((name) => !name.includes(".json"))
        .map(async (name) => ({
          number: Number.parseInt(name.replace(/^\./, ""), 10),
          bytes: new Uint8Array(await readFile(path.join(dir, name))),
        })),
    );
    return bodies.sort((a, b) => a.number - b.number);
  },
});

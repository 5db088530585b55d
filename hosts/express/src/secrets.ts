import { randomBytes } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";

/**
 * A random secret kept in the data directory, so that a restart (or a second process on the same
 * directory) keeps using it. Created atomically: write a temporary file, then link it in place.
 */
export const loadOrCreateSecret = async (dataDir: string, name: string, bytes = 32): Promise<Uint8Array> => {
  const path = join(dataDir, name);
  const read = async () => new Uint8Array(Buffer.from((await readFile(path, "utf8")).trim(), "base64url"));
  try {
    return await read();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const temp = `${path}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  await writeFile(temp, `${randomBytes(bytes).toString("base64url")}\n`, { mode: 0o600, flag: "wx" });
  await rename(temp, path);
  return read();
};

import { randomBytes } from "node:crypto";
import { link, mkdir, open, readFile, unlink } from "node:fs/promises";
import { join } from "node:path";

/**
 * A random secret kept in the data directory, so that a restart (or a second process on the same
 * directory) keeps using it. Created whole and never replaced (DECISIONS "Account security"): a
 * temporary file is written and synced, then linked in place. link, unlike rename, fails when the
 * name exists, so of processes starting at once on an empty directory the first to link wins and
 * every other reads its secret; a replaced drm-master-key would lose the content keys already
 * wrapped under the first one.
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
  const file = await open(temp, "wx", 0o600);
  try {
    try {
      await file.writeFile(`${randomBytes(bytes).toString("base64url")}\n`);
      // Whole on disk before its name can be seen: a crash must not leave a torn secret.
      await file.sync();
    } finally {
      await file.close();
    }
    try {
      await link(temp, path);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EPERM" || code === "ENOTSUP")
        throw new Error(
          `${dataDir} is on a filesystem without hard links, where ${name} cannot be created safely: ` +
            "put VOD_DATA_DIR on another filesystem, or set the secret in the environment",
        );
      if (code !== "EEXIST") throw error;
    }
  } finally {
    await unlink(temp).catch(() => undefined);
  }
  return read();
};

import { createHash } from "node:crypto";
import { createReadStream, createWriteStream, type Dirent, existsSync } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { basename, dirname, join, relative, resolve, sep } from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import {
  backupPostgres,
  DataDirectoryNotEmpty,
  migrations,
  openPgliteProcess,
  type PostgresBackupSource,
  restorePglite,
  restorePostgres,
} from "@vod/adapter-postgres";
import { pgliteDir } from "./compose.js";
import { ConfigError, type HostConfig } from "./config.js";

/**
 * `vod backup DIR` and `vod restore DIR` (DECISIONS "Backups, upgrades and deleting a tenant"): a
 * directory holding the database (the embedded default's PGlite data directory, copied while it
 * serves, or a server's pg_dump custom format), for the filesystem object store a copy of its
 * objects with a list of their SHA-256s, and a manifest of counts and checksums, which restore
 * checks before it writes anything.
 */

export const MANIFEST_FORMAT = "vod-backup/2";
export const MANIFEST_FILE = "manifest.json";
/** The objects' copy, and its list in `sha256sum` form (`sha256sum -c objects.sha256` checks it). */
export const OBJECTS_DIR = "objects";
export const OBJECTS_LIST = "objects.sha256";

export interface Manifest {
  readonly format: typeof MANIFEST_FORMAT;
  readonly engine: "pglite" | "postgres";
  readonly createdAt: string;
  /** The newest migration this version knows; a restore by an older version is refused. */
  readonly migration: number;
  readonly database: { readonly file: string; readonly bytes: number; readonly sha256: string };
  /** `schema.table` to its rows at the moment of the backup. */
  readonly tables: Record<string, number>;
  /** A server backup's schemas and app role, which its restore needs. */
  readonly postgres?: Omit<PostgresBackupSource, "tables">;
  /** The filesystem store's files, copied after the database: how many, their bytes, their list. */
  readonly objects: {
    readonly count: number;
    readonly bytes: number;
    readonly list: typeof OBJECTS_LIST;
    readonly sha256: string;
  } | null;
  readonly notIncluded: ReadonlyArray<string>;
}

const objectsRoot = (config: HostConfig) => resolve(config.objects.dir ?? join(config.dataDir, "objects"));

/** What the operator must keep beside the backup, said in the manifest and at every backup. */
const notIncluded = (config: HostConfig) => [
  ...(config.objects.store === "gcs"
    ? [
        `objects in the bucket ${config.objects.gcs.bucket ?? ""}: keep them with the bucket's object versioning and soft delete (docs/operations.md)`,
      ]
    : config.objects.store === "memory"
      ? ["objects (VOD_OBJECT_STORE=memory keeps none)"]
      : []),
  `keys and secrets in ${resolve(config.dataDir)} (signing-keys.json, drm-master-key, cursor-secret, upload-url-secret) unless given by VOD_SIGNING_KEYS, VOD_DRM_MASTER_KEY, VOD_CURSOR_SECRET and VOD_UPLOAD_URL_SECRET: without the DRM master key, protected assets and webhooks cannot be used`,
];

const sha256File = (file: string) =>
  new Promise<string>((resolveHash, reject) => {
    const hash = createHash("sha256");
    createReadStream(file)
      .on("data", (chunk) => hash.update(chunk))
      .on("error", reject)
      .on("end", () => resolveHash(hash.digest("hex")));
  });

/** Copies `from` to `to` (a new file), hashing the bytes as they pass. */
const copyHashed = async (from: string, to: string) => {
  const hash = createHash("sha256");
  let bytes = 0;
  await mkdir(dirname(to), { recursive: true });
  await pipeline(
    createReadStream(from),
    new Transform({
      transform(chunk: Buffer, _encoding, done) {
        hash.update(chunk);
        bytes += chunk.length;
        done(null, chunk);
      },
    }),
    createWriteStream(to, { flags: "wx" }),
  );
  return { bytes, sha256: hash.digest("hex") };
};

const isMissing = (error: unknown) => (error as NodeJS.ErrnoException).code === "ENOENT";

/** Files copied at once. */
const COPY_CONCURRENCY = 8;

/**
 * Runs `work` on every item, `COPY_CONCURRENCY` at a time. On a failure no item is started any
 * more, and it fails with the first once the running ones have ended (nothing is left writing).
 */
const eachAtOnce = async <T>(items: ReadonlyArray<T>, work: (item: T) => Promise<void>) => {
  let next = 0;
  let failure: { readonly error: unknown } | undefined;
  await Promise.all(
    Array.from({ length: Math.min(COPY_CONCURRENCY, items.length) }, async () => {
      while (failure === undefined && next < items.length) {
        const item = items[next++] as T;
        try {
          await work(item);
        } catch (error) {
          failure ??= { error };
        }
      }
    }),
  );
  if (failure !== undefined) throw failure.error;
};

interface ListedObject {
  readonly path: string;
  readonly bytes: number;
  readonly sha256: string;
}

/**
 * Copies the filesystem store's files (objects, their metadata sidecars, the parts of open
 * uploads) into `to`, leaving out files being written (`*.tmp`, renamed into place when whole)
 * and files removed while it runs. Paths are `/`-separated, relative to the store's root.
 */
const copyObjects = async (root: string, to: string): Promise<ReadonlyArray<ListedObject>> => {
  let entries: Dirent[];
  try {
    entries = await readdir(root, { recursive: true, withFileTypes: true });
  } catch (error) {
    if (isMissing(error)) return [];
    throw error;
  }
  const paths = entries
    .filter((entry) => entry.isFile() && !entry.name.endsWith(".tmp"))
    .map((entry) => relative(root, join(entry.parentPath, entry.name)).split(sep).join("/"))
    .sort();
  const listed: ListedObject[] = [];
  await eachAtOnce(paths, async (path) => {
    try {
      listed.push({ path, ...(await copyHashed(join(root, path), join(to, path))) });
    } catch (error) {
      // Removed since it was listed (an asset's deletion, a completed upload's parts): not copied.
      if (!isMissing(error)) throw error;
      await rm(join(to, path), { force: true });
    }
  });
  return listed.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
};

const listText = (objects: ReadonlyArray<ListedObject>) =>
  objects.map((o) => `${o.sha256}  ${OBJECTS_DIR}/${o.path}\n`).join("");

const total = (tables: Record<string, number>) => Object.values(tables).reduce((n, c) => n + c, 0);

export class RestoreRefused extends Error {}

const isEmptyDir = async (dir: string) => {
  try {
    return (await readdir(dir)).length === 0;
  } catch (error) {
    if (isMissing(error)) return true;
    throw error;
  }
};

export const backup = async (config: HostConfig, dir: string, log: (line: string) => void) => {
  if (config.storage === "memory") throw new ConfigError("VOD_STORAGE=memory keeps nothing to back up");
  const target = resolve(dir);
  if (!(await isEmptyDir(target)))
    throw new RestoreRefused(`${target} exists and is not empty: a backup goes into a new directory`);
  await mkdir(target, { recursive: true });
  const engine = config.database.url ? "postgres" : "pglite";
  const databaseFile = engine === "postgres" ? "database.dump" : "database.tar.gz";
  const databasePath = join(target, databaseFile);
  let tables: Record<string, number>;
  let postgres: Manifest["postgres"];
  if (config.database.url) {
    const { tables: counted, ...source } = await backupPostgres(
      { connectionString: config.database.url, schema: config.database.schema },
      databasePath,
    );
    tables = counted;
    postgres = source;
  } else {
    // Through the running host's database process when there is one: a copy while it serves.
    const db = await openPgliteProcess(pgliteDir(config), { whenInUse: "reach" });
    try {
      const snapshot = await db.snapshot();
      await writeFile(databasePath, snapshot.dump, { flag: "wx" });
      tables = snapshot.tables;
    } finally {
      await db.close();
    }
  }
  // After the database: every object a row of the copy names was stored before it was taken
  // (objects are written before the rows that name them), so the copy holds them all.
  let objects: Manifest["objects"] = null;
  if (config.objects.store === "filesystem") {
    const listed = await copyObjects(objectsRoot(config), join(target, OBJECTS_DIR));
    const text = listText(listed);
    await writeFile(join(target, OBJECTS_LIST), text, { flag: "wx" });
    objects = {
      count: listed.length,
      bytes: listed.reduce((n, o) => n + o.bytes, 0),
      list: OBJECTS_LIST,
      sha256: createHash("sha256").update(text).digest("hex"),
    };
  }
  const manifest: Manifest = {
    format: MANIFEST_FORMAT,
    engine,
    createdAt: new Date().toISOString(),
    migration: Math.max(...migrations.map((m) => m.version)),
    database: {
      file: databaseFile,
      bytes: (await stat(databasePath)).size,
      sha256: await sha256File(databasePath),
    },
    tables,
    ...(postgres ? { postgres } : {}),
    objects,
    notIncluded: notIncluded(config),
  };
  await writeFile(join(target, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`, { flag: "wx" });
  log(
    `vod backup: wrote ${target}: the database (${engine}, ${manifest.database.bytes} bytes, sha256 ${manifest.database.sha256}; ${Object.keys(tables).length} tables, ${total(tables)} rows)${objects ? `, ${objects.count} object files (${objects.bytes} bytes)` : ""} and ${MANIFEST_FILE}`,
  );
  for (const what of manifest.notIncluded) log(`vod backup: NOT in the backup: ${what}`);
  return manifest;
};

/** The objects' list as written: each line's sha256 and path, checked for shape. */
const parseList = (text: string, where: string): ReadonlyArray<{ sha256: string; path: string }> =>
  text
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => {
      const match = /^([0-9a-f]{64}) {2}objects\/(.+)$/.exec(line);
      const path = match?.[2];
      if (!match?.[1] || !path || path.split("/").some((part) => part === ".." || part === ""))
        throw new RestoreRefused(`${where} has a line that is not "<sha256>  objects/<path>": ${line}`);
      return { sha256: match[1], path };
    });

/** The manifest of the backup in `dir`, checked against the database file and the objects' list. */
export const readBackup = async (dir: string) => {
  const target = resolve(dir);
  const manifestFile = join(target, MANIFEST_FILE);
  if (existsSync(`${target}.manifest.json`))
    throw new RestoreRefused(
      `${target} is a single-file backup of an earlier version (vod-backup/1): restore it with the version that made it`,
    );
  let manifest: Manifest;
  try {
    manifest = JSON.parse(await readFile(manifestFile, "utf8")) as Manifest;
  } catch (error) {
    throw new RestoreRefused(
      `cannot read ${manifestFile} (${error instanceof Error ? error.message : String(error)}): a backup is a directory that \`vod backup DIR\` wrote`,
    );
  }
  if (manifest.format !== MANIFEST_FORMAT)
    throw new RestoreRefused(`${manifestFile} is not a ${MANIFEST_FORMAT} manifest`);
  const newest = Math.max(...migrations.map((m) => m.version));
  if (manifest.migration > newest)
    throw new RestoreRefused(
      `the backup was made by a newer version (migration ${manifest.migration}; this one knows ${newest}): restore it with that version`,
    );
  const databasePath = join(target, basename(manifest.database.file));
  const sha256 = await sha256File(databasePath).catch(() => "missing");
  if (sha256 !== manifest.database.sha256)
    throw new RestoreRefused(
      `${databasePath} does not match the manifest (sha256 ${sha256}, the manifest says ${manifest.database.sha256}): it is damaged or not the file the manifest describes`,
    );
  let objects: ReadonlyArray<{ sha256: string; path: string }> = [];
  if (manifest.objects) {
    const listFile = join(target, OBJECTS_LIST);
    const text = await readFile(listFile, "utf8").catch(() => "");
    const listSha = createHash("sha256").update(text).digest("hex");
    if (listSha !== manifest.objects.sha256)
      throw new RestoreRefused(`${listFile} does not match the manifest: it is damaged or missing`);
    objects = parseList(text, listFile);
    if (objects.length !== manifest.objects.count)
      throw new RestoreRefused(
        `${listFile} lists ${objects.length} objects, the manifest says ${manifest.objects.count}`,
      );
  }
  return { manifest, databasePath, objects };
};

/** Differences between the manifest's row counts and the restored database's. */
const mismatches = (expected: Record<string, number>, actual: Record<string, number>) =>
  [...new Set([...Object.keys(expected), ...Object.keys(actual)])]
    .filter((t) => expected[t] !== actual[t])
    .map((t) => `${t}: ${actual[t] ?? "missing"} rows, the manifest says ${expected[t] ?? "none"}`);

const aside = (path: string) => `${path}.replaced-${new Date().toISOString().replaceAll(":", "-")}`;

export const restore = async (
  config: HostConfig,
  dir: string,
  options: { readonly force: boolean },
  log: (line: string) => void,
) => {
  if (config.storage === "memory") throw new ConfigError("VOD_STORAGE=memory keeps nothing to restore into");
  const { manifest, databasePath, objects } = await readBackup(dir);
  const into = config.database.url ? "postgres" : "pglite";
  if (manifest.engine !== into)
    throw new RestoreRefused(
      manifest.engine === "pglite"
        ? "this is a backup of the embedded database: restore it with VOD_DATABASE_URL unset (into VOD_DATA_DIR)"
        : "this is a backup of a Postgres server: restore it with VOD_DATABASE_URL set",
    );
  const root = objectsRoot(config);
  let staging: string | undefined;
  if (manifest.objects) {
    if (config.objects.store !== "filesystem")
      throw new RestoreRefused(
        "the backup holds the filesystem store's objects: restore it with VOD_OBJECT_STORE=filesystem (the default)",
      );
    if (!options.force && !(await isEmptyDir(root)))
      throw new RestoreRefused(
        `${root} holds objects already: restore into an empty VOD_DATA_DIR (and VOD_OBJECTS_DIR), or pass --force to move them aside`,
      );
    // Every object is copied and checked beside the store before anything is replaced: a damaged
    // backup restores nothing.
    staging = `${root}.restoring-${process.pid}`;
    await rm(staging, { recursive: true, force: true });
    await mkdir(staging, { recursive: true });
    try {
      await eachAtOnce(objects, async ({ sha256, path }) => {
        const copied = await copyHashed(join(resolve(dir), OBJECTS_DIR, path), join(staging ?? "", path));
        if (copied.sha256 !== sha256)
          throw new RestoreRefused(
            `${OBJECTS_DIR}/${path} does not match ${OBJECTS_LIST} (sha256 ${copied.sha256}): the backup is damaged`,
          );
      });
    } catch (error) {
      await rm(staging, { recursive: true, force: true });
      if (isMissing(error))
        throw new RestoreRefused(`an object the list names is missing: the backup is damaged`);
      throw error;
    }
  }
  let restored: Record<string, number>;
  try {
    if (config.database.url) {
      if (!manifest.postgres) throw new RestoreRefused("the manifest names no schema to restore into");
      restored = await restorePostgres(
        { connectionString: config.database.url, schema: config.database.schema },
        databasePath,
        { ...manifest.postgres, tables: manifest.tables },
        options,
      );
    } else {
      const pglite = pgliteDir(config);
      const moveAsideTo = aside(pglite);
      try {
        restored = await restorePglite(pglite, new Uint8Array(await readFile(databasePath)), {
          ...(options.force ? { moveAsideTo } : {}),
        });
      } catch (error) {
        if (error instanceof DataDirectoryNotEmpty)
          throw new RestoreRefused(
            `${pglite} holds a database already: restore into an empty VOD_DATA_DIR, or pass --force to move it aside`,
          );
        throw error;
      }
      if (existsSync(moveAsideTo)) log(`vod restore: the database that was there is in ${moveAsideTo}`);
    }
  } catch (error) {
    if (staging) await rm(staging, { recursive: true, force: true });
    throw error;
  }
  if (staging) {
    if (!(await isEmptyDir(root))) {
      const movedTo = aside(root);
      await rename(root, movedTo);
      log(`vod restore: the objects that were there are in ${movedTo}`);
    } else await rm(root, { recursive: true, force: true });
    await mkdir(dirname(root), { recursive: true });
    await rename(staging, root);
  }
  const wrong = mismatches(manifest.tables, restored);
  if (wrong.length > 0)
    throw new Error(`the restored database does not hold what the manifest says:\n  ${wrong.join("\n  ")}`);
  log(
    `vod restore: restored ${resolve(dir)} (${manifest.engine}, made ${manifest.createdAt}): ${Object.keys(restored).length} tables, ${total(restored)} rows${manifest.objects ? `, ${objects.length} object files into ${root}` : ""}, as the manifest says`,
  );
  for (const what of manifest.notIncluded) log(`vod restore: NOT restored by this: ${what}`);
};

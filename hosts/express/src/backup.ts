import { createHash } from "node:crypto";
import { createReadStream, existsSync } from "node:fs";
import { mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
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
 * `vod backup FILE` and `vod restore FILE`: the database only, of the embedded default (PGlite's
 * data directory, copied while it serves) or of a server (pg_dump's custom format), with a
 * manifest beside it (`FILE.manifest.json`) of what it holds, which restore checks.
 */

export const MANIFEST_FORMAT = "vod-backup/1";

export interface Manifest {
  readonly format: typeof MANIFEST_FORMAT;
  readonly engine: "pglite" | "postgres";
  readonly createdAt: string;
  /** The newest migration this version knows; a restore by an older version is refused. */
  readonly migration: number;
  readonly dump: { readonly file: string; readonly bytes: number; readonly sha256: string };
  /** `schema.table` to its rows at the moment of the backup. */
  readonly tables: Record<string, number>;
  /** A server backup's schemas and app role, which its restore needs. */
  readonly postgres?: Omit<PostgresBackupSource, "tables">;
  readonly notIncluded: ReadonlyArray<string>;
}

/** What the operator must keep beside the backup, said in the manifest and at every backup. */
const notIncluded = (config: HostConfig) => [
  config.objects.store === "gcs"
    ? `objects in the bucket ${config.objects.gcs.bucket ?? ""}: keep them with the bucket's object versioning and soft delete`
    : config.objects.store === "memory"
      ? "objects (VOD_OBJECT_STORE=memory keeps none)"
      : `objects under ${resolve(config.objects.dir ?? join(config.dataDir, "objects"))}: copy that directory too (after the backup, so that it holds every object the backup names)`,
  `keys and secrets in ${resolve(config.dataDir)} (signing-keys.json, drm-master-key, cursor-secret, upload-url-secret) unless given by VOD_SIGNING_KEYS, VOD_DRM_MASTER_KEY, VOD_CURSOR_SECRET and VOD_UPLOAD_URL_SECRET: without the DRM master key, protected assets and webhooks cannot be used`,
];

export const manifestPath = (file: string) => `${file}.manifest.json`;

const sha256File = (file: string) =>
  new Promise<string>((resolveHash, reject) => {
    const hash = createHash("sha256");
    createReadStream(file)
      .on("data", (chunk) => hash.update(chunk))
      .on("error", reject)
      .on("end", () => resolveHash(hash.digest("hex")));
  });

const total = (tables: Record<string, number>) => Object.values(tables).reduce((n, c) => n + c, 0);

export class RestoreRefused extends Error {}

export const backup = async (config: HostConfig, file: string, log: (line: string) => void) => {
  if (config.storage === "memory") throw new ConfigError("VOD_STORAGE=memory keeps nothing to back up");
  const target = resolve(file);
  if (existsSync(target) || existsSync(manifestPath(target)))
    throw new RestoreRefused(`${target} or its manifest exists already: choose another name`);
  await mkdir(dirname(target), { recursive: true });
  let tables: Record<string, number>;
  let postgres: Manifest["postgres"];
  if (config.database.url) {
    const { tables: counted, ...source } = await backupPostgres(
      { connectionString: config.database.url, schema: config.database.schema },
      target,
    );
    tables = counted;
    postgres = source;
  } else {
    // Through the running host's database process when there is one: a copy while it serves.
    const db = await openPgliteProcess(pgliteDir(config), { whenInUse: "reach" });
    try {
      const snapshot = await db.snapshot();
      await writeFile(target, snapshot.dump, { flag: "wx" });
      tables = snapshot.tables;
    } finally {
      await db.close();
    }
  }
  const manifest: Manifest = {
    format: MANIFEST_FORMAT,
    engine: config.database.url ? "postgres" : "pglite",
    createdAt: new Date().toISOString(),
    migration: Math.max(...migrations.map((m) => m.version)),
    dump: { file: basename(target), bytes: (await stat(target)).size, sha256: await sha256File(target) },
    tables,
    ...(postgres ? { postgres } : {}),
    notIncluded: notIncluded(config),
  };
  await writeFile(manifestPath(target), `${JSON.stringify(manifest, null, 2)}\n`, { flag: "wx" });
  log(
    `vod backup: wrote ${target} (${manifest.engine}, ${manifest.dump.bytes} bytes, sha256 ${manifest.dump.sha256}) and ${manifestPath(target)}: ${Object.keys(tables).length} tables, ${total(tables)} rows`,
  );
  for (const what of manifest.notIncluded) log(`vod backup: NOT in the backup: ${what}`);
  return manifest;
};

/** The manifest beside `file`, checked against the file. */
export const readBackup = async (file: string): Promise<Manifest> => {
  const target = resolve(file);
  let manifest: Manifest;
  try {
    manifest = JSON.parse(await readFile(manifestPath(target), "utf8")) as Manifest;
  } catch (error) {
    throw new RestoreRefused(
      `cannot read ${manifestPath(target)} (${error instanceof Error ? error.message : String(error)}): a backup is its file and that manifest`,
    );
  }
  if (manifest.format !== MANIFEST_FORMAT)
    throw new RestoreRefused(`${manifestPath(target)} is not a ${MANIFEST_FORMAT} manifest`);
  const newest = Math.max(...migrations.map((m) => m.version));
  if (manifest.migration > newest)
    throw new RestoreRefused(
      `the backup was made by a newer version (migration ${manifest.migration}; this one knows ${newest}): restore it with that version`,
    );
  const sha256 = await sha256File(target);
  if (sha256 !== manifest.dump.sha256)
    throw new RestoreRefused(
      `${target} does not match its manifest (sha256 ${sha256}, the manifest says ${manifest.dump.sha256}): it is damaged or not the file the manifest describes`,
    );
  return manifest;
};

/** Differences between the manifest's row counts and the restored database's. */
const mismatches = (expected: Record<string, number>, actual: Record<string, number>) =>
  [...new Set([...Object.keys(expected), ...Object.keys(actual)])]
    .filter((t) => expected[t] !== actual[t])
    .map((t) => `${t}: ${actual[t] ?? "missing"} rows, the manifest says ${expected[t] ?? "none"}`);

export const restore = async (
  config: HostConfig,
  file: string,
  options: { readonly force: boolean },
  log: (line: string) => void,
) => {
  if (config.storage === "memory") throw new ConfigError("VOD_STORAGE=memory keeps nothing to restore into");
  const manifest = await readBackup(file);
  const into = config.database.url ? "postgres" : "pglite";
  if (manifest.engine !== into)
    throw new RestoreRefused(
      manifest.engine === "pglite"
        ? "this is a backup of the embedded database: restore it with VOD_DATABASE_URL unset (into VOD_DATA_DIR)"
        : "this is a backup of a Postgres server: restore it with VOD_DATABASE_URL set",
    );
  let restored: Record<string, number>;
  if (config.database.url) {
    if (!manifest.postgres) throw new RestoreRefused("the manifest names no schema to restore into");
    restored = await restorePostgres(
      { connectionString: config.database.url, schema: config.database.schema },
      resolve(file),
      { ...manifest.postgres, tables: manifest.tables },
      options,
    );
  } else {
    const dir = pgliteDir(config);
    const moveAsideTo = `${dir}.replaced-${new Date().toISOString().replaceAll(":", "-")}`;
    try {
      restored = await restorePglite(dir, new Uint8Array(await readFile(resolve(file))), {
        ...(options.force ? { moveAsideTo } : {}),
      });
    } catch (error) {
      if (error instanceof DataDirectoryNotEmpty)
        throw new RestoreRefused(
          `${dir} holds a database already: restore into an empty VOD_DATA_DIR, or pass --force to move it aside`,
        );
      throw error;
    }
    if (existsSync(moveAsideTo)) log(`vod restore: the database that was there is in ${moveAsideTo}`);
  }
  const wrong = mismatches(manifest.tables, restored);
  if (wrong.length > 0)
    throw new Error(`the restored database does not hold what the manifest says:\n  ${wrong.join("\n  ")}`);
  log(
    `vod restore: restored ${resolve(file)} (${manifest.engine}, made ${manifest.createdAt}): ${Object.keys(restored).length} tables, ${total(restored)} rows, as the manifest says`,
  );
  for (const what of manifest.notIncluded) log(`vod restore: NOT restored by this: ${what}`);
};

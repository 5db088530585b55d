import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";

/**
 * Creates the cluster in `dataDir` in a short-lived child process. initdb runs in a WebAssembly
 * instance of its own whose memory the host would otherwise keep for its whole life: a first
 * start in-process stays at about twice the memory of a reopening.
 */
export const initdbApart = async (dataDir: string) => {
  if (existsSync(path.join(dataDir, "PG_VERSION"))) return;
  const module = import.meta.resolve("@electric-sql/pglite");
  const script = `import { PGlite } from ${JSON.stringify(module)};
const db = await PGlite.create(${JSON.stringify(dataDir)});
await db.close();`;
  await new Promise<void>((resolve, reject) => {
    execFile(process.execPath, ["--input-type=module", "-e", script], (error, _stdout, stderr) =>
      error
        ? reject(new Error(`creating the PGlite cluster in ${dataDir}: ${stderr || error.message}`))
        : resolve(),
    );
  });
};

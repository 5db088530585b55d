// `npm run gcs-test-server -- --port N`: build what is stale, then run the server in this process,
// so SIGTERM reaches it. The compiler's output goes to stderr: stdout carries only the JSON line.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
const build = spawnSync(process.execPath, [tsc, "-b", pkg], { stdio: ["ignore", 2, 2], cwd: pkg });
if (build.status !== 0) process.exit(build.status ?? 1);

const { main } = await import(pathToFileURL(join(pkg, "dist/gcs-test-server/cli.js")).href);
try {
  await main(process.argv.slice(2));
} catch (error) {
  process.stderr.write(`gcs-test-server: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(2);
}

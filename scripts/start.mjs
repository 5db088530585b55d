// `npm start` straight after `npm ci`: build what is stale, then run the CLI in this very process,
// so SIGTERM reaches the server itself and nothing is left behind in the background.
//
// npm runs a script through `sh -c` and forwards SIGTERM and SIGINT to that shell only. dash (sh
// on Debian and Ubuntu) does not exec a lone command: it would stay between npm and node, die of
// the signal and leave node serving, orphaned. So the scripts say `exec node ...` (package.json):
// this process is npm's child, gets the signal, drains, and npm exits with its code. The CLI also
// stops when its parent goes away without a signal (hosts/express/src/bin/vod.ts).
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

// The engines field says so too, but npm only warns; an unsupported runtime gets no security fixes.
const major = Number(process.versions.node.split(".")[0]);
if (major < 24) {
  console.error(
    `vod needs Node.js 24 or newer (the LTS line); this is ${process.version}, which no longer gets security fixes. See the README.`,
  );
  process.exit(1);
}

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
// A first build takes minutes on a small machine: said, so that it is not taken for a hang. On
// stderr, so that stdout stays the host's log lines.
const started = Date.now();
process.stderr.write(
  "vod: building… (tsc -b; a first build takes a few minutes, later ones only what changed)\n",
);
const build = spawnSync(process.execPath, [tsc, "-b", join(root, "hosts/express")], {
  stdio: "inherit",
  cwd: root,
});
if (build.status !== 0) {
  process.stderr.write(`vod: the build failed (tsc exited ${build.status}); its errors are above\n`);
  process.exit(build.status ?? 1);
}
// The player's bundle, which the media app serves at /v1/player.js: esbuild, well under a second.
// Only `serve` serves it: the other commands (upload, play, worker, …) leave the file alone, so
// that they never rewrite it under a host that is reading it.
if (process.argv[2] === "serve") {
  const { bundlePlayer } = await import(pathToFileURL(join(root, "clients/player/build.mjs")).href);
  await bundlePlayer();
}
process.stderr.write(`vod: built in ${((Date.now() - started) / 1000).toFixed(1)} s; starting…\n`);

const { main } = await import(pathToFileURL(join(root, "hosts/express/dist/bin/vod.js")).href);
await main(process.argv.slice(2));

// The browser bundle: <vod-player> and hls.js in one minified ES module, dist/vod-player.js, which
// the media app serves at {media_url}/v1/player.js. esbuild rather than tsc: tsc type-checks the
// sources (tsc -b) but bundles nothing. Run by this package's build script, by `npm start`
// (scripts/start.mjs), by the root `build` and `test` scripts and, as a global setup, by vitest.
// `<vod-uploader>` takes `@vod/client` from its built dist/ (tsc -b first, as each of those does):
// there its package.json's `browser` field maps the Node-only file reader away.
import { build } from "esbuild";

const here = new URL("./", import.meta.url);

export const bundlePlayer = () =>
  build({
    entryPoints: [new URL("src/index.ts", here).pathname],
    outfile: new URL("dist/vod-player.js", here).pathname,
    bundle: true,
    format: "esm",
    minify: true,
    target: "es2020",
    legalComments: "eof",
    logLevel: "warning",
  });

/** As vitest's global setup: the tests that load the player get the sources' bundle. */
export default async function setup() {
  await bundlePlayer();
}

if (import.meta.url === `file://${process.argv[1]}`) await bundlePlayer();

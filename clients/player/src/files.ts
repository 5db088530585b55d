/**
 * Where the bundle (`<vod-player>` with hls.js, one ES module) is, for a server that serves it:
 * the media app answers it at `{media_url}/v1/player.js`. Built by `npm run build -w @vod/player`
 * (and by `npm start`, `npm test`, `npm run build`). Spelled from the package's root so that it
 * holds from `src/` (tests) and `dist/` alike.
 */
export const playerBundle: URL = new URL("../dist/vod-player.js", import.meta.url);

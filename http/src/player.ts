import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { playerBundle } from "@vod/player/files";

/** The `<vod-player>` bundle as the media app serves it, with its validator. */
export interface PlayerScript {
  readonly bytes: Buffer;
  /** A strong ETag of the bytes: a page revalidating after `max-age` gets a 304 while unchanged. */
  readonly etag: string;
}

let loaded: Promise<PlayerScript | undefined> | undefined;

/**
 * The bundle, read once per process; undefined when it was not built (`npm run build -w
 * @vod/player`), asked again on the next request.
 */
export const playerScript = (): Promise<PlayerScript | undefined> => {
  loaded ??= readFile(playerBundle).then(
    (bytes) => ({ bytes, etag: `"${createHash("sha256").update(bytes).digest("base64url").slice(0, 32)}"` }),
    () => {
      loaded = undefined;
      return undefined;
    },
  );
  return loaded;
};

const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string,
  );

/** What the embed page is asked for in its query. */
export interface EmbedOptions {
  readonly autoplay: boolean;
  readonly muted: boolean;
}

/**
 * The embeddable page of a playback session: the player at full size, the token verified before
 * (the route refuses a bad one with the spec's error). An iframe's parent hands it a fresh token
 * by `postMessage`: asked with `{type: "vod:token-request"}`, it answers `{type: "vod:token",
 * token}`. The script is `player.js` beside the page (`{media_url}/v1/`).
 */
export const embedPage = (token: string, entitlementUrl: string | undefined, options: EmbedOptions) => {
  const attributes = [
    `playback-token="${escapeHtml(token)}"`,
    ...(entitlementUrl ? [`entitlement-url="${escapeHtml(entitlementUrl)}"`] : []),
    // Browsers start only muted media without a gesture: autoplay implies muted.
    ...(options.autoplay ? ["autoplay", "muted"] : options.muted ? ["muted"] : []),
  ];
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Video</title>
<link rel="icon" href="data:,">
<style>html, body { margin: 0; height: 100%; background: #000; } vod-player { width: 100%; height: 100%; aspect-ratio: auto; }</style>
<script type="module" src="../player.js"></script>
</head>
<body>
<vod-player ${attributes.join(" ")}></vod-player>
<script type="module">
const player = document.querySelector("vod-player");
player.addEventListener("token-request", (event) => {
  if (window.parent === window) return;
  event.detail.respondWith(new Promise((resolve) => {
    const answer = (message) => {
      if (message.source !== window.parent || message.data?.type !== "vod:token" || typeof message.data.token !== "string") return;
      window.removeEventListener("message", answer);
      resolve(message.data.token);
    };
    window.addEventListener("message", answer);
    window.parent.postMessage({ type: "vod:token-request" }, "*");
  }));
});
</script>
</body>
</html>
`;
};

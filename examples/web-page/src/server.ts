#!/usr/bin/env node
// A web page's own server: it holds the API key, answers the page's <vod-uploader endpoint> by
// starting and completing upload sessions, and mints playback sessions for its <vod-player>.
// The browser sends the video's bytes straight to the media app's part URLs and never sees the key.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createClient, VodError } from "@vod/client";

export interface WebPageOptions {
  /** Where the API answers (VOD_API_URL). */
  readonly apiUrl: string;
  /** A key with the `write` scope (VOD_API_KEY): it stays on this server. */
  readonly apiKey: string;
  /** Where the media app answers, which serves player.js (VOD_MEDIA_URL; the API's URL by default). */
  readonly mediaUrl?: string;
  /** 0 (the default) for a free one. */
  readonly port?: number;
  readonly host?: string;
  /** The life of the playback sessions minted for the page (the player asks for the next one). */
  readonly ttlSeconds?: number;
}

export interface WebPage {
  readonly url: string;
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 64 * 1024;
const MAX_NAME_LENGTH = 200;

class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

const invalid = (field: string, message: string) =>
  // The API's shape: `details.fields` lists each field by its path.
  new Refusal(400, "invalid_request", `${field}: ${message}`, { fields: [{ path: [field], message }] });

const readJson = async (req: IncomingMessage): Promise<Record<string, unknown>> => {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new Refusal(413, "payload_too_large", "the body is too large");
    chunks.push(chunk);
  }
  try {
    const body: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    if (typeof body === "object" && body !== null && !Array.isArray(body))
      return body as Record<string, unknown>;
  } catch {
    // Said below.
  }
  throw new Refusal(400, "invalid_request", "the body must be a JSON object");
};

const send = (res: ServerResponse, status: number, body: unknown) =>
  res
    .writeHead(status, { "content-type": "application/json", "cache-control": "no-store" })
    .end(JSON.stringify(body));

const escapeAttribute = (text: string) =>
  text.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");

const page = (mediaUrl: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Upload and play</title>
<script type="module" src="${escapeAttribute(mediaUrl)}/v1/player.js"></script>
<style>
body { font: 16px system-ui, sans-serif; max-width: 720px; margin: 2rem auto; padding: 0 1rem; }
vod-player { display: block; aspect-ratio: 16 / 9; margin-top: 1rem; }
</style>
</head>
<body>
<h1>Upload a video, then watch it</h1>
<vod-uploader endpoint="/uploads"></vod-uploader>
<p id="status" role="status"></p>
<div id="player"></div>
<script type="module">
const status = document.querySelector("#status");
const uploader = document.querySelector("vod-uploader");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A new playback session from this page's server: the first token, and every renewal.
const playbackToken = async (assetId) => {
  const res = await fetch("/assets/" + encodeURIComponent(assetId) + "/playback", { method: "POST" });
  if (!res.ok) throw new Error("no playback session: " + res.status);
  return (await res.json()).token;
};

uploader.addEventListener("upload-error", (e) => { status.textContent = "Upload failed: " + e.detail.message; });
uploader.addEventListener("upload-complete", async (e) => {
  const { assetId } = e.detail;
  status.textContent = "Uploaded; processing…";
  for (;;) {
    const res = await fetch("/assets/" + encodeURIComponent(assetId));
    const { asset } = await res.json();
    if (asset.status === "ready") break;
    if (asset.status === "failed") { status.textContent = "Processing failed: " + asset.failure_code; return; }
    await sleep(1000);
  }
  const player = document.createElement("vod-player");
  player.getToken = () => playbackToken(assetId);
  player.setAttribute("muted", "");
  player.setAttribute("autoplay", "");
  player.setAttribute("playback-token", await playbackToken(assetId));
  document.querySelector("#player").replaceChildren(player);
  status.textContent = "Ready";
});
</script>
</body>
</html>
`;

export const startWebPage = async (options: WebPageOptions): Promise<WebPage> => {
  const client = createClient({ baseUrl: options.apiUrl, apiKey: options.apiKey });
  const mediaUrl = (options.mediaUrl ?? options.apiUrl).replace(/\/+$/, "");
  const html = page(mediaUrl);
  // What this page started: the endpoint completes and plays only these, not any id of the tenant.
  const uploads = new Set<string>();
  const assets = new Set<string>();

  const uploadOf = (body: Record<string, unknown>) => {
    const id = body.upload_id;
    if (typeof id !== "string" || id === "") throw invalid("upload_id", "a string is required");
    if (!uploads.has(id)) throw new Refusal(404, "not_found", "no such upload");
    return id;
  };
  const assetOf = (id: string) => {
    if (!assets.has(id)) throw new Refusal(404, "not_found", "no such asset");
    return id;
  };

  const routes: Record<
    string,
    (req: IncomingMessage, match: RegExpMatchArray) => Promise<[number, unknown]>
  > = {
    "POST /uploads": async (req) => {
      const body = await readJson(req);
      const size = body.size_bytes;
      if (typeof size !== "number" || !Number.isSafeInteger(size) || size < 1)
        throw invalid("size_bytes", "a positive integer is required");
      const name = body.name ?? "upload";
      if (typeof name !== "string" || name.length > MAX_NAME_LENGTH)
        throw invalid("name", `a string of at most ${MAX_NAME_LENGTH} characters is required`);
      const asset = await client.assets.create({ title: name || "upload" });
      // A size the API refuses (over its limit) leaves no empty asset behind.
      const started = await client.uploads
        .start({ asset_id: asset.id, size_bytes: size })
        .catch(async (e) => {
          await client.assets.delete(asset.id).catch(() => undefined);
          throw e;
        });
      assets.add(asset.id);
      uploads.add(started.upload.id);
      return [201, started];
    },
    "POST /uploads/resume": async (req) => [200, await client.uploads.resume(uploadOf(await readJson(req)))],
    "POST /uploads/complete": async (req) => {
      const body = await readJson(req);
      const id = uploadOf(body);
      const parts = body.parts as NonNullable<Parameters<typeof client.uploads.complete>[1]>["parts"];
      return [200, await client.uploads.complete(id, parts === undefined ? {} : { parts })];
    },
    "GET /assets/(?<id>[^/]+)": async (_req, match) => {
      const asset = await client.assets.get(assetOf(decodeURIComponent(match.groups?.id ?? "")));
      return [200, { asset: { id: asset.id, status: asset.status, failure_code: asset.failure_code } }];
    },
    "POST /assets/(?<id>[^/]+)/playback": async (_req, match) => {
      const assetId = assetOf(decodeURIComponent(match.groups?.id ?? ""));
      const created = await client.playback.createSession({ assetId, ttlSeconds: options.ttlSeconds ?? 900 });
      return [201, { token: created.token, expires_at: created.session.expires_at }];
    },
  };
  const table = Object.entries(routes).map(([key, handle]) => ({ pattern: new RegExp(`^${key}$`), handle }));

  const server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    if (req.method === "GET" && path === "/")
      return void res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(html);
    const line = `${req.method} ${path}`;
    for (const { pattern, handle } of table) {
      const match = line.match(pattern);
      if (!match) continue;
      handle(req, match).then(
        ([status, body]) => send(res, status, body),
        (error: unknown) => {
          if (error instanceof Refusal)
            return send(res, error.status, {
              code: error.code,
              message: error.message,
              details: error.details,
            });
          // The API's refusal (a size over the limit, a quota) is the page's too; its outage is a 502.
          if (error instanceof VodError && error.status >= 400 && error.status < 500)
            return send(res, error.status, {
              code: error.code,
              message: error.message,
              details: error.details,
            });
          console.error(error);
          send(res, 502, { code: "upstream_error", message: "the video service did not answer" });
        },
      );
      return;
    }
    send(res, 404, { code: "not_found", message: "no such route" });
  });
  await new Promise<void>((resolve) =>
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", resolve),
  );
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${options.host ?? "127.0.0.1"}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
};

if (import.meta.url === `file://${process.argv[1]}`) {
  const apiUrl = process.env.VOD_API_URL;
  const apiKey = process.env.VOD_API_KEY;
  if (!apiUrl || !apiKey) {
    console.error(
      "usage: VOD_API_URL=http://localhost:8080 VOD_API_KEY=vod_… node examples/web-page/dist/server.js",
    );
    process.exit(2);
  }
  const started = await startWebPage({
    apiUrl,
    apiKey,
    ...(process.env.VOD_MEDIA_URL ? { mediaUrl: process.env.VOD_MEDIA_URL } : {}),
    port: Number(process.env.PORT ?? 3000),
  });
  console.log(`the page: ${started.url}/`);
}

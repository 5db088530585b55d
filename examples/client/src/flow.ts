#!/usr/bin/env node
/**
 * What an integrator's backend does with `@vod/client`, end to end: subscribe a webhook, create
 * an asset, upload a file, wait until it is ready, mint a playback session and fetch its
 * manifest, find the asset by listing every page, and take the `asset.ready` webhook, checking
 * its signature. Run it with an admin-scoped key (webhooks are the admin's):
 * `VOD_API_URL=… VOD_API_KEY=… node dist/flow.js video.mp4`; webhooks to this machine need a
 * host with VOD_WEBHOOKS_ALLOW_PRIVATE=true.
 */
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import {
  type Asset,
  createClient,
  verifyWebhook,
  type WebhookEvent,
  WebhookVerificationError,
} from "@vod/client";

export interface FlowOptions {
  readonly apiUrl: string;
  readonly apiKey: string;
  readonly file: string;
  /** The address the host reaches this process's webhook receiver at (default 127.0.0.1). */
  readonly webhookHost?: string;
  readonly log?: (line: string) => void;
}

export interface FlowResult {
  readonly asset: Asset;
  readonly uploadedBytes: number;
  readonly progressReports: number;
  readonly manifestUrl: string;
  readonly manifest: string;
  /** How many assets the iterator went through to find this one, over how many pages. */
  readonly listed: { readonly assets: number; readonly pages: number; readonly found: boolean };
  readonly webhook: WebhookEvent;
  /** The same request with one byte of its body changed: what verification said. */
  readonly tamperedRejected: boolean;
}

interface Received {
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

/** A webhook endpoint as a backend has one: it keeps each request's raw body to verify it. */
const webhookReceiver = async (host: string) => {
  const received: Received[] = [];
  const waiting: Array<() => void> = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(204).end();
      for (const wake of waiting.splice(0)) wake();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}/webhooks/vod`,
    /** The first request `accept` takes, within `timeoutMs`. */
    next: async (accept: (r: Received) => boolean, timeoutMs: number): Promise<Received> => {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const found = received.find(accept);
        if (found) return found;
        if (Date.now() > until) throw new Error(`no matching webhook within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          waiting.push(resolve);
          setTimeout(resolve, 500);
        });
      }
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
};

export const runFlow = async (options: FlowOptions): Promise<FlowResult> => {
  const log = options.log ?? (() => undefined);
  const client = createClient({ baseUrl: options.apiUrl, apiKey: options.apiKey });
  const receiver = await webhookReceiver(options.webhookHost ?? "127.0.0.1");
  try {
    const { webhook, secret } = await client.request("createWebhook", {
      body: { url: receiver.url, events: ["asset.ready"], description: "example flow" },
    });
    log(`webhook ${webhook.id} -> ${webhook.url}`);

    const created = await client.assets.create({ title: "Example flow" });
    log(`asset ${created.id} (${created.status})`);
    let progressReports = 0;
    const { upload } = await client.uploads.upload({
      assetId: created.id,
      file: options.file,
      parallel: 2,
      onProgress: (p) => {
        progressReports++;
        log(`uploaded ${p.uploadedBytes} of ${p.totalBytes} bytes`);
      },
    });
    const asset = await client.assets.waitUntilReady(created.id, { timeoutMs: 300_000, intervalMs: 500 });
    log(`asset ${asset.id} is ${asset.status}`);

    const session = await client.playback.createSession({ assetId: asset.id, ttlSeconds: 600 });
    const manifestResponse = await fetch(session.urls.manifest);
    const manifest = await manifestResponse.text();
    if (!manifestResponse.ok) throw new Error(`manifest: ${manifestResponse.status} ${manifest}`);

    // Every page, the iterator asking for the next one as it goes: two assets a page.
    let assets = 0;
    let found = false;
    for await (const listedAsset of client.assets.list({ limit: 2 })) {
      assets++;
      if (listedAsset.id === asset.id) found = true;
    }
    let pages = 0;
    for await (const _page of client.assets.list({ limit: 2 }).pages()) pages++;

    const delivery = await receiver.next((r) => r.body.includes(asset.id), 60_000);
    const event = verifyWebhook(secret, delivery.headers, delivery.body);
    log(`webhook ${event.type} for ${event.data.asset.id}, verified`);
    const tampered = Buffer.from(delivery.body);
    tampered[tampered.length - 2] = tampered[tampered.length - 2] === 0x20 ? 0x21 : 0x20;
    let tamperedRejected = false;
    try {
      verifyWebhook(secret, delivery.headers, tampered);
    } catch (error) {
      tamperedRejected = error instanceof WebhookVerificationError;
    }
    await client.request("deleteWebhook", { path: { id: webhook.id } });

    return {
      asset,
      uploadedBytes: upload.size_bytes,
      progressReports,
      manifestUrl: session.urls.manifest,
      manifest,
      listed: { assets, pages, found },
      webhook: event,
      tamperedRejected,
    };
  } finally {
    await receiver.close();
  }
};

if (import.meta.url === `file://${process.argv[1]}`) {
  const [file] = process.argv.slice(2);
  const apiUrl = process.env.VOD_API_URL;
  const apiKey = process.env.VOD_API_KEY;
  if (!file || !apiUrl || !apiKey) {
    process.stderr.write("usage: VOD_API_URL=… VOD_API_KEY=… vod-client-flow VIDEO_FILE\n");
    process.exit(2);
  }
  const result = await runFlow({ apiUrl, apiKey, file, log: (line) => console.log(line) });
  console.log(`done: ${result.manifestUrl}`);
}

import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";

/** One request as the receiver got it. */
export interface ReceivedWebhook {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  /** The raw body, as a verifier must see it. */
  readonly body: string;
  /** The status the receiver answered. */
  readonly status: number;
}

export interface WebhookReceiver {
  /** `http://127.0.0.1:<port>`; each test posts to a path of its own under it. */
  readonly url: string;
  /** Requests so far to `path` (every path when absent), in the order they came. */
  received(path?: string): ReadonlyArray<ReceivedWebhook>;
  /**
   * Answers at `path` with these statuses in turn, then 200 (default: 200 always). `HOLD` answers
   * nothing: the request stays open until the sender gives up or dies.
   */
  respond(path: string, statuses: ReadonlyArray<number>): void;
  /** Waits for `count` requests to `path`; fails after `timeoutMs` naming what came. */
  waitFor(path: string, count: number, timeoutMs?: number): Promise<ReadonlyArray<ReceivedWebhook>>;
  close(): Promise<void>;
}

/** A status for `respond`: no answer at all. */
export const HOLD = 0;

/** An endpoint on 127.0.0.1 that records what it is sent, for the webhook tests. */
export const startWebhookReceiver = async (): Promise<WebhookReceiver> => {
  const got: ReceivedWebhook[] = [];
  const scripts = new Map<string, number[]>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const path = req.url ?? "/";
      const status = scripts.get(path)?.shift() ?? 200;
      got.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString("utf8"), status });
      if (status === HOLD) return;
      res.writeHead(status, { "content-type": "text/plain" }).end(String(status));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const received = (path?: string) => got.filter((r) => path === undefined || r.path === path);
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    respond: (path, statuses) => void scripts.set(path, [...statuses]),
    waitFor: async (path, count, timeoutMs = 30_000) => {
      const end = Date.now() + timeoutMs;
      while (received(path).length < count) {
        if (Date.now() > end)
          throw new Error(
            `${path} got ${received(path).length} of ${count} webhooks: ${received(path)
              .map((r) => r.body.slice(0, 80))
              .join(" | ")}`,
          );
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return received(path);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
};

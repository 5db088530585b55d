import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { HOLD, startWebhookReceiver, type WebhookReceiver } from "@vod/contract-tests";
import { Effect, Either } from "effect";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { httpWebhookSender, isPublicAddress } from "../src/index.js";

/**
 * A receiver that answers 200 and then writes its body as `write` says, for as long as the
 * sender's socket stays open; `closed` resolves, once it is closed, with the bytes the receiver
 * managed to hand to its socket.
 */
const startBodyReceiver = async (write: (res: ServerResponse) => void) => {
  let closed!: (bytes: number) => void;
  const socketClosed = new Promise<number>((resolve) => {
    closed = resolve;
  });
  const server = createServer((req, res) => {
    req.resume();
    req.socket.once("close", () => closed(req.socket.bytesWritten));
    res.writeHead(200, { "content-type": "text/plain" });
    write(res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    socketClosed,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
};

/** Writes 64 KiB chunks as fast as the socket takes them, until it is closed. */
const endless = (res: ServerResponse) => {
  const chunk = Buffer.alloc(64 * 1024, 120);
  const more = () => {
    while (!res.destroyed && res.write(chunk));
    if (!res.destroyed) res.once("drain", more);
  };
  more();
};

const secret = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;
const message = (url: string) => ({
  url,
  id: "evt_test",
  body: '{"id":"evt_test","type":"asset.ready"}',
  secret,
});

describe("httpWebhookSender", () => {
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    receiver = await startWebhookReceiver();
  });
  afterAll(() => receiver.close());

  const refusal = async (url: string, allowPrivate = false) => {
    const checked = await Effect.runPromise(Effect.either(httpWebhookSender({ allowPrivate }).checkUrl(url)));
    return Either.isLeft(checked) ? checked.left.reason : "accepted";
  };

  it("judges public addresses by ipaddr.js's unicast range, IPv4-mapped ones as IPv4", () => {
    for (const address of ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"])
      expect(isPublicAddress(address)).toBe(true);
    for (const address of [
      "127.0.0.1",
      "10.0.0.1",
      "172.16.0.1",
      "192.168.1.1",
      "169.254.169.254",
      "100.64.0.1",
      "0.0.0.0",
      "::1",
      "fc00::1",
      "fe80::1",
      "::ffff:127.0.0.1",
      "::ffff:10.0.0.1",
      "192.0.2.1",
      "not an address",
    ])
      expect(isPublicAddress(address), address).toBe(false);
  });

  it("refuses at creation http, private and loopback addresses, and names that do not resolve", async () => {
    expect(await refusal("http://8.8.8.8/hook")).toBe("must be an https URL");
    for (const url of [
      "https://127.0.0.1/hook",
      "https://[::1]/hook",
      "https://[::ffff:127.0.0.1]/hook",
      "https://10.1.2.3/hook",
      "https://localhost/hook",
    ])
      expect(await refusal(url), url).toBe("must resolve to public addresses only");
    expect(await refusal("https://nothing.invalid/hook")).toBe("its host name does not resolve");
    expect(await refusal("https://8.8.8.8/hook")).toBe("accepted");
    expect(await refusal(`${receiver.url}/hook`, true)).toBe("accepted");
  });

  it("sends the body signed as Standard Webhooks verify it, and answers the status", async () => {
    const sender = httpWebhookSender({ allowPrivate: true });
    const result = await Effect.runPromise(sender.send(message(`${receiver.url}/ok`)));
    expect(result).toEqual({ ok: true, statusCode: 200 });
    const [request] = receiver.received("/ok");
    expect(request?.headers["webhook-id"]).toBe("evt_test");
    expect(request?.headers["content-type"]).toBe("application/json");
    const verified = new Webhook(secret).verify(request?.body ?? "", {
      "webhook-id": String(request?.headers["webhook-id"]),
      "webhook-timestamp": String(request?.headers["webhook-timestamp"]),
      "webhook-signature": String(request?.headers["webhook-signature"]),
    });
    expect(verified).toEqual({ id: "evt_test", type: "asset.ready" });

    receiver.respond("/down", [500]);
    expect(await Effect.runPromise(sender.send(message(`${receiver.url}/down`)))).toEqual({
      ok: false,
      statusCode: 500,
    });
  });

  it("refuses at send time a name that resolves to loopback, without connecting (DNS rebinding)", async () => {
    const sender = httpWebhookSender();
    const port = new URL(receiver.url).port;
    const named = await Effect.runPromise(sender.send(message(`https://localhost:${port}/rebound`)));
    expect(named).toMatchObject({ ok: false, statusCode: null, error: expect.stringMatching(/non-public/) });
    const literal = await Effect.runPromise(sender.send(message(`http://127.0.0.1:${port}/rebound`)));
    expect(literal).toMatchObject({ ok: false, statusCode: null });
    expect(receiver.received("/rebound")).toEqual([]);
  });

  it("gives up on an endpoint that does not answer within the timeout", async () => {
    receiver.respond("/slow", [HOLD]);
    const sender = httpWebhookSender({ allowPrivate: true, timeoutMs: 200 });
    const result = await Effect.runPromise(sender.send(message(`${receiver.url}/slow`)));
    expect(result).toEqual({ ok: false, statusCode: null, error: "no response within 0.2 s" });
  });

  it("reads an endless response body only up to a cap, then closes the socket; the status counts", async () => {
    const endlessReceiver = await startBodyReceiver(endless);
    try {
      const sender = httpWebhookSender({ allowPrivate: true });
      const result = await Effect.runPromise(sender.send(message(`${endlessReceiver.url}/endless`)));
      expect(result).toEqual({ ok: true, statusCode: 200 });
      // What the receiver could write before the sender let go: the cap, and what the kernel's
      // socket buffers took meanwhile. A sender without the cap reads on until the test times out.
      expect(await endlessReceiver.socketClosed).toBeLessThan(16 * 1024 * 1024);
    } finally {
      await endlessReceiver.close();
    }
  }, 20_000);

  it("bounds the whole exchange, a body that stops coming included, by the timeout", async () => {
    const stalled = await startBodyReceiver((res) => res.write("a start and no end"));
    try {
      const sender = httpWebhookSender({ allowPrivate: true, timeoutMs: 300 });
      const result = await Effect.runPromise(sender.send(message(`${stalled.url}/stalled`)));
      expect(result).toEqual({ ok: false, statusCode: 200, error: "response not finished within 0.3 s" });
      expect(await stalled.socketClosed).toBeGreaterThan(0);
    } finally {
      await stalled.close();
    }
  }, 20_000);

  it("takes the status of a response whose receiver cuts its body off, without waiting for the timeout", async () => {
    const cut = await startBodyReceiver((res) => {
      res.write("half a body");
      setImmediate(() => res.socket?.destroy());
    });
    try {
      const sender = httpWebhookSender({ allowPrivate: true, timeoutMs: 5_000 });
      const result = await Effect.runPromise(sender.send(message(`${cut.url}/cut`)));
      expect(result).toEqual({ ok: true, statusCode: 200 });
    } finally {
      await cut.close();
    }
  }, 20_000);
});

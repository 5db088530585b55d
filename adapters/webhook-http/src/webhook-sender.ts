import { type LookupAddress, type LookupOptions, lookup } from "node:dns";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP } from "node:net";
import { type SendResult, UrlRefused, type WebhookMessage, type WebhookSender } from "@vod/core";
import { Effect } from "effect";
import ipaddr from "ipaddr.js";
import { Webhook } from "standardwebhooks";

export interface HttpWebhookSenderOptions {
  /**
   * Allow http and private, loopback, link-local and unique-local addresses (tests, private
   * networks: VOD_WEBHOOKS_ALLOW_PRIVATE). Off, only https to public addresses.
   */
  readonly allowPrivate?: boolean;
  /**
   * An attempt whose response, its body up to `MAX_RESPONSE_BODY_BYTES` included, has not come
   * by then failed (DECISIONS: 10 s).
   */
  readonly timeoutMs?: number;
}

/**
 * Public means ipaddr.js's plain "unicast": every special range (private, loopback, link-local,
 * unique-local, multicast, reserved, 6to4, Teredo...) is refused. IPv4-mapped IPv6 addresses are
 * judged as the IPv4 address they carry.
 */
export const isPublicAddress = (address: string): boolean =>
  ipaddr.isValid(address) && ipaddr.process(address).range() === "unicast";

/** How much of a receiver's response body is read: only its status counts. */
const MAX_RESPONSE_BODY_BYTES = 64 * 1024;

const refused = (reason: string): UrlRefused => new UrlRefused({ reason });

/** The host of a URL as the resolver and isIP take it (IPv6 literals without brackets). */
const hostOf = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, "$1");

class PrivateAddress extends Error {
  readonly code = "EPRIVATEADDRESS";
}

/**
 * Webhooks over HTTP(S), signed as Standard Webhooks say (`standardwebhooks`, the specification's
 * own library, so any of its verifiers accepts ours).
 *
 * node:http rather than fetch: the public-address rule is checked in the `lookup` the socket
 * connects with, so it judges the very address connected to. A check before fetch would resolve
 * once and let fetch resolve again, which a DNS answer that changes between the two (rebinding)
 * gets past. Redirects are not followed: a 3xx is a failed attempt.
 */
export const httpWebhookSender = (options: HttpWebhookSenderOptions = {}): WebhookSender => {
  const allowPrivate = options.allowPrivate ?? false;
  const timeoutMs = options.timeoutMs ?? 10_000;

  const schemeProblem = (url: URL): string | undefined => {
    if (url.protocol === "https:") return undefined;
    if (url.protocol === "http:" && allowPrivate) return undefined;
    return "must be an https URL";
  };

  const guardedLookup = (
    hostname: string,
    lookupOptions: LookupOptions,
    callback: (
      error: NodeJS.ErrnoException | null,
      address: string | LookupAddress[],
      family?: number,
    ) => void,
  ) => {
    lookup(hostname, { ...lookupOptions, all: true }, (error, addresses) => {
      if (error) return callback(error, []);
      const bad = allowPrivate ? undefined : addresses.find((a) => !isPublicAddress(a.address));
      if (bad) return callback(new PrivateAddress(`${hostname} resolves to a non-public address`), []);
      if (lookupOptions.all) return callback(null, addresses);
      const [first] = addresses;
      if (!first) return callback(new Error(`${hostname} has no address`), []);
      callback(null, first.address, first.family);
    });
  };

  const checkUrl = (raw: string): Effect.Effect<void, UrlRefused> =>
    Effect.gen(function* () {
      let url: URL;
      try {
        url = new URL(raw);
      } catch {
        return yield* Effect.fail(refused("is not a URL"));
      }
      const scheme = schemeProblem(url);
      if (scheme) return yield* Effect.fail(refused(scheme));
      if (allowPrivate) return;
      const host = hostOf(url);
      const addresses = isIP(host)
        ? [host]
        : yield* Effect.async<ReadonlyArray<string>, UrlRefused>((resume) => {
            lookup(host, { all: true }, (error, found) =>
              resume(
                error
                  ? Effect.fail(refused("its host name does not resolve"))
                  : Effect.succeed(found.map((a) => a.address)),
              ),
            );
          });
      if (addresses.some((a) => !isPublicAddress(a)))
        return yield* Effect.fail(refused("must resolve to public addresses only"));
    });

  const post = (url: URL, headers: Record<string, string>, body: string) =>
    Effect.async<SendResult>((resume) => {
      const controller = new AbortController();
      let status: number | undefined;
      let settled = false;
      const settle = (result: SendResult, cut: boolean) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        // A response not read to its end leaves with its socket, which no later request reuses.
        if (cut) controller.abort();
        resume(Effect.succeed(result));
      };
      const answered = (code: number): SendResult => ({ ok: code >= 200 && code < 300, statusCode: code });
      // The whole exchange, the response's body included, is bounded: a receiver that answers
      // and then trickles or never ends its body holds no socket past it.
      const timer = setTimeout(
        () =>
          settle(
            status === undefined
              ? { ok: false, statusCode: null, error: `no response within ${timeoutMs / 1000} s` }
              : {
                  ok: false,
                  statusCode: status,
                  error: `response not finished within ${timeoutMs / 1000} s`,
                },
            true,
          ),
        timeoutMs,
      );
      const request = (url.protocol === "https:" ? httpsRequest : httpRequest)(
        url,
        {
          method: "POST",
          headers: {
            ...headers,
            "content-type": "application/json",
            "content-length": Buffer.byteLength(body),
          },
          lookup: guardedLookup,
          signal: controller.signal,
        },
        (response: IncomingMessage) => {
          const code = response.statusCode ?? 0;
          status = code;
          // The answer is the status; the body is read, up to a cap, only to free the socket for
          // reuse. Past the cap the connection is dropped: an endless body is not read forever.
          let read = 0;
          response.on("data", (chunk: Buffer) => {
            read += chunk.length;
            if (read > MAX_RESPONSE_BODY_BYTES) settle(answered(code), true);
          });
          // Ended, or cut by the receiver: either way the status was its answer.
          response.on("close", () => settle(answered(code), false));
          response.on("error", () => undefined);
        },
      );
      request.on("error", (error: Error) =>
        settle(
          status === undefined ? { ok: false, statusCode: null, error: error.message } : answered(status),
          false,
        ),
      );
      request.end(body);
      return Effect.sync(() => {
        settled = true;
        clearTimeout(timer);
        controller.abort();
      });
    });

  const send = (message: WebhookMessage): Effect.Effect<SendResult> =>
    Effect.gen(function* () {
      // Checked again at send time: the rule may have changed, and an IP literal never reaches
      // the lookup that guards host names.
      if (!URL.canParse(message.url)) return { ok: false, statusCode: null, error: "url is not a URL" };
      const url = new URL(message.url);
      const scheme = schemeProblem(url);
      if (scheme) return { ok: false, statusCode: null, error: `url ${scheme}` };
      const host = hostOf(url);
      if (!allowPrivate && isIP(host) && !isPublicAddress(host))
        return { ok: false, statusCode: null, error: "url is a non-public address" };
      // Whole seconds, as the header carries them, so the signature covers what is sent.
      const timestamp = new Date(Math.floor(Date.now() / 1000) * 1000);
      const signature = new Webhook(message.secret).sign(message.id, timestamp, message.body);
      return yield* post(
        url,
        {
          "webhook-id": message.id,
          "webhook-timestamp": String(timestamp.getTime() / 1000),
          "webhook-signature": signature,
          "user-agent": "vod-webhooks/1",
        },
        message.body,
      );
    });

  return { checkUrl, send };
};

import { Data, type Effect } from "effect";

/** A signed event on its way to one endpoint. */
export interface WebhookMessage {
  readonly url: string;
  /** The event id: the `webhook-id` header, the same on every attempt. */
  readonly id: string;
  /** The JSON body, sent byte for byte as signed. */
  readonly body: string;
  /** The webhook's `whsec_…` secret. */
  readonly secret: string;
}

/** How one attempt ended; `statusCode` is null when no response came (refused, timed out). */
export interface SendResult {
  readonly ok: boolean;
  readonly statusCode: number | null;
  /** Why it failed, for the log. */
  readonly error?: string;
}

/** A URL the sender will not send to, with the reason a client is told. */
export class UrlRefused extends Data.TaggedError("UrlRefused")<{ readonly reason: string }> {}

/**
 * Sends webhook events (network I/O, so an adapter). The rule on where it may send (scheme,
 * public addresses) is the sender's: it is checked when a webhook is created and again on every
 * send, against the address actually connected to.
 */
export interface WebhookSender {
  checkUrl(url: string): Effect.Effect<void, UrlRefused>;
  /** Signs and sends; never fails: a refusal, an error or a non-2xx is a result. */
  send(message: WebhookMessage): Effect.Effect<SendResult>;
}

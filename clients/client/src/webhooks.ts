import { Webhook, WebhookVerificationError } from "standardwebhooks";
import type { components } from "./generated/openapi.js";

type Schemas = components["schemas"];

/** The event types a webhook subscribes to, as the API names them. */
export type WebhookEventType = Exclude<Schemas["CreateWebhookRequest"]["events"][number], "*">;

/** The body of a webhook request, as the platform sends it. */
export interface WebhookEvent {
  readonly id: string;
  readonly type: WebhookEventType;
  readonly created_at: number;
  readonly tenant_id: string;
  readonly data: {
    readonly asset: Schemas["Asset"];
    /** upload.* events. */
    readonly upload?: Schemas["UploadSession"];
    /** asset.rendition.ready. */
    readonly rendition?: Schemas["AssetRendition"];
    /** asset.failed. */
    readonly failure?: unknown;
  };
}

export { WebhookVerificationError };

type HeaderBag = Headers | Readonly<Record<string, string | ReadonlyArray<string> | undefined>>;

const header = (headers: HeaderBag, name: string): string => {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? "";
  const bag = headers as Readonly<Record<string, string | ReadonlyArray<string> | undefined>>;
  const key = Object.keys(bag).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : bag[key];
  return Array.isArray(value) ? (value[0] ?? "") : ((value as string | undefined) ?? "");
};

/**
 * The event of a webhook request, after checking its Standard Webhooks signature with the
 * webhook's `whsec_…` secret (and that its timestamp is within five minutes). `rawBody` is the
 * body exactly as received: a body parsed and serialized again does not verify. Throws
 * `WebhookVerificationError` otherwise.
 */
export const verifyWebhook = (
  secret: string,
  headers: HeaderBag,
  rawBody: string | Uint8Array,
): WebhookEvent => {
  const body = typeof rawBody === "string" ? rawBody : new TextDecoder().decode(rawBody);
  return new Webhook(secret).verify(body, {
    "webhook-id": header(headers, "webhook-id"),
    "webhook-timestamp": header(headers, "webhook-timestamp"),
    "webhook-signature": header(headers, "webhook-signature"),
  }) as WebhookEvent;
};

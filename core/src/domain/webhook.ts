import type { TenantId } from "./ids.js";
/** The events a webhook may subscribe to (DECISIONS "Webhooks"); `*` subscribes to all. */
export const webhookEventTypes = [
  "asset.created",
  "asset.uploaded",
  "asset.processing",
  "asset.ready",
  "asset.rendition.ready",
  "asset.renditions_complete",
  "asset.static_rendition.ready",
  "asset.failed",
  "asset.updated",
  "asset.deleted",
  "upload.completed",
  "upload.aborted",
] as const;
export type WebhookEventType = (typeof webhookEventTypes)[number];

export const ALL_EVENTS = "*";
export type WebhookSubscription = WebhookEventType | typeof ALL_EVENTS;

/** An endpoint of a tenant that receives its events. */
export interface Webhook {
  readonly id: string;
  readonly tenant_id: TenantId;
  readonly url: string;
  /** Event types, or `["*"]`. */
  readonly events: ReadonlyArray<WebhookSubscription>;
  readonly description: string | null;
  /**
   * The key of the signatures (`whsec_` + base64 of 32 random bytes), shown once at creation, as
   * stored: sealed under the master key (`sealed:…`, see use-cases/webhooks.ts), or as given by a
   * version that stored it plainly.
   */
  readonly secret: string;
  readonly created_at: number;
  /** Deleted webhooks are kept (their deliveries refer to them) but neither listed nor sent to. */
  readonly deleted_at: number | null;
}

export const subscribes = (webhook: Webhook, type: WebhookEventType): boolean =>
  webhook.events.includes(ALL_EVENTS) || webhook.events.includes(type);

export const deliveryStatuses = ["pending", "succeeded", "failed"] as const;
export type DeliveryStatus = (typeof deliveryStatuses)[number];

/** One event on its way to one webhook, and how its attempts went. */
export interface WebhookDelivery {
  readonly id: string;
  readonly tenant_id: TenantId;
  readonly webhook_id: string;
  /** The `webhook-id` header: the same on every attempt and redelivery of the event. */
  readonly event_id: string;
  readonly event_type: WebhookEventType;
  /** The exact body sent, fixed when the event was recorded. */
  readonly payload: string;
  readonly status: DeliveryStatus;
  readonly attempts: number;
  readonly last_status_code: number | null;
  /** When the next attempt is due; null once the delivery is settled. */
  readonly next_attempt_at: number | null;
  readonly created_at: number;
}

/** What an attempt changes on its delivery. */
export type DeliveryAttempt = Pick<
  WebhookDelivery,
  "status" | "attempts" | "last_status_code" | "next_attempt_at"
>;

/**
 * The delivery after attempt number `attempts` (1-based) ended with `ok` and `statusCode`: settled
 * on success; else due again after `baseMs` doubled per earlier attempt, unless that falls past
 * `retryForMs` from the delivery's creation, where it fails for good.
 */
export const afterAttempt = (
  delivery: WebhookDelivery,
  outcome: { readonly ok: boolean; readonly statusCode: number | null },
  now: number,
  policy: { readonly baseMs: number; readonly retryForMs: number },
): DeliveryAttempt => {
  const attempts = delivery.attempts + 1;
  const last_status_code = outcome.statusCode;
  if (outcome.ok) return { status: "succeeded", attempts, last_status_code, next_attempt_at: null };
  const next = now + policy.baseMs * 2 ** (attempts - 1);
  return next > delivery.created_at + policy.retryForMs
    ? { status: "failed", attempts, last_status_code, next_attempt_at: null }
    : { status: "pending", attempts, last_status_code, next_attempt_at: next };
};

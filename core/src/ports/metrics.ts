/**
 * How a processing run ended, as the worker sees it: the asset's outcome (`ready`, `failed`,
 * `skipped`: nothing left to do), a long source cut into chunk jobs (`chunked`), a chunk made
 * (`encoded`), a unit's packaging put off until the asset is playable (`deferred`), an attempt
 * that failed and goes back to the queue (`retry`), or a run stopped at shutdown and handed to
 * another worker (`released`).
 */
export type ProcessingEnd =
  | "ready"
  | "failed"
  | "skipped"
  | "chunked"
  | "encoded"
  | "deferred"
  | "retry"
  | "released";

/**
 * How one webhook delivery attempt ended: a 2xx (`succeeded`), anything else with retries left
 * (`retrying`), or the last attempt refused (`failed`, the delivery's status from then on).
 */
export type WebhookDeliveryResult = "succeeded" | "retrying" | "failed";

/**
 * How one run of an account mail job ended: the server accepted the mail (`sent`), there was
 * nothing to send (`skipped`: no such account, or verified already), or the send failed with
 * attempts left (`retrying`) or on the last one (`failed`: the mail is lost, and logged at error).
 */
export type AccountMailResult = "sent" | "skipped" | "retrying" | "failed";

/** What playback makes on request: a thumbnail, an animated preview, a storyboard's sprite sheet. */
export type ImageKind = "thumbnail" | "animated" | "storyboard";

/**
 * What the platform counts for its operators. Every method is fire-and-forget and cheap: a
 * metric never fails or slows what it counts. Absent, nothing is counted.
 */
export interface Metrics {
  /** A processing run began. */
  processingStarted(): void;
  /** A processing run ended, after `seconds`. */
  processingEnded(end: ProcessingEnd, seconds: number): void;
  /** `count` telemetry events were stored (the sink's write resolved). */
  telemetryStored(count: number): void;
  /** One webhook delivery attempt ended (called by the webhook deliverer, once per attempt). */
  webhookDelivered(result: WebhookDeliveryResult): void;
  /** One run of an account mail job ended (called by the worker, once per run). */
  accountMailSent(result: AccountMailResult): void;
  /** An image was made (decoded and stored) for playback, in `seconds`; a cached one is not counted. */
  imageMade(kind: ImageKind, seconds: number): void;
}

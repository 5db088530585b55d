import { Effect, Option, Schema } from "effect";
import type { VodConfig } from "../config.js";
import type { Asset, AssetRendition, FailureCode, StaticRendition } from "../domain/asset.js";
import type { TenantId } from "../domain/ids.js";
import type { UploadSession } from "../domain/upload-session.js";
import {
  afterAttempt,
  type Webhook,
  type WebhookDelivery,
  type WebhookEventType,
} from "../domain/webhook.js";
import { InvalidRequest, NotFound, type StorageError } from "../errors.js";
import type { Clock } from "../ports/clock.js";
import type { Ids } from "../ports/ids.js";
import { type Job, JobFailed } from "../ports/job-queue.js";
import type { Repositories } from "../ports/repositories.js";
import type { SendResult } from "../ports/webhook-sender.js";
import { type Requests, Resources as Rs } from "../schema/index.js";
import type { VodPorts } from "../tokens.js";
import type { Principal } from "./authenticate.js";
import { SEALED, sealer } from "./sealing.js";
import { orNotFound, quotaExceeded } from "./support.js";

type CreateInput = typeof Requests.CreateWebhookBody.Type;

export const MAX_LISTED_WEBHOOKS = 100;
export const MAX_LISTED_DELIVERIES = 100;

/**
 * What an event carries: the asset as the API shows it, for upload events the session, and for
 * asset.failed why (`failure`: its code and a message, naming the part when a part's bytes differ);
 * `asset.rendition.ready` the rendition, `asset.static_rendition.ready` the static rendition.
 */
export interface EventData {
  readonly asset: Asset;
  readonly upload?: UploadSession;
  readonly failure?: { readonly code: FailureCode; readonly message: string };
  readonly rendition?: AssetRendition;
  readonly static_rendition?: StaticRendition;
}

const encodeAsset = Schema.encodeSync(Rs.Asset);
const encodeUpload = Schema.encodeSync(Rs.UploadSession);
const encodeRendition = Schema.encodeSync(Rs.AssetRendition);
const encodeStaticRendition = Schema.encodeSync(Rs.StaticRendition);

/** Records `type` for the tenant inside the caller's transaction. */
export type RecordEvent = (
  tx: Repositories,
  tenantId: TenantId,
  type: WebhookEventType,
  data: EventData,
) => Effect.Effect<void, StorageError>;

/**
 * The outbox: an event is recorded in the transaction of the change that caused it, as one
 * pending delivery per subscribed webhook and a job to send it, so it exists if and only if the
 * change commits, and a crash after the commit loses nothing (the job runs again). Every use case
 * that changes an asset or an upload calls it with its `tx`.
 */
export const eventRecorder =
  ({ clock, ids }: { readonly clock: Clock; readonly ids: Ids }): RecordEvent =>
  (tx, tenantId, type, data) =>
    Effect.gen(function* () {
      const webhooks = yield* tx.webhooks.listSubscribed(tenantId, type);
      if (webhooks.length === 0) return;
      const now = clock.now();
      const eventId = ids.id("event");
      const payload = JSON.stringify({
        id: eventId,
        type,
        created_at: now,
        tenant_id: tenantId,
        data: data.upload
          ? { upload: encodeUpload(data.upload), asset: encodeAsset(data.asset) }
          : data.rendition
            ? { asset: encodeAsset(data.asset), rendition: encodeRendition(data.rendition) }
            : data.static_rendition
              ? {
                  asset: encodeAsset(data.asset),
                  static_rendition: encodeStaticRendition(data.static_rendition),
                }
              : { asset: encodeAsset(data.asset), ...(data.failure ? { failure: data.failure } : {}) },
      });
      for (const webhook of webhooks) {
        const delivery: WebhookDelivery = {
          id: ids.id("delivery"),
          tenant_id: tenantId,
          webhook_id: webhook.id,
          event_id: eventId,
          event_type: type,
          payload,
          status: "pending",
          attempts: 0,
          last_status_code: null,
          next_attempt_at: now,
          created_at: now,
        };
        yield* tx.webhookDeliveries.insert(delivery);
        yield* tx.jobs.enqueue("deliver-webhook", {
          tenant_id: tenantId,
          delivery_id: delivery.id,
          attempts: 0,
        });
      }
    });

const view = (w: Webhook) => ({
  id: w.id,
  url: w.url,
  events: w.events,
  description: w.description,
  created_at: w.created_at,
});

const deliveryView = (d: WebhookDelivery) => ({
  id: d.id,
  event_id: d.event_id,
  event_type: d.event_type,
  status: d.status,
  attempts: d.attempts,
  last_status_code: d.last_status_code,
  next_attempt_at: d.next_attempt_at,
  created_at: d.created_at,
});

/** What one delivery job did: the one place its result is known (log, metrics). */
export type DeliveryOutcome =
  | { readonly status: "skipped" }
  | {
      readonly status: "succeeded" | "retrying" | "failed";
      readonly delivery: WebhookDelivery;
      readonly result: SendResult;
    };

/**
 * Webhook secrets are stored sealed: AES-256-GCM under a key derived from the master key that
 * wraps content keys (HKDF-SHA256, its own label, so neither key can stand for the other). The
 * sender needs the secret itself to sign, so it cannot be hashed like an API key; sealed, a copy
 * of the database alone signs nothing. A secret stored plainly by an earlier version is read as
 * it is.
 */
export const webhookSecrets = (masterKey: Uint8Array, randomBytes: (n: number) => Uint8Array) => {
  const sealed = sealer(masterKey, "vod webhook secrets v1", randomBytes);
  return {
    seal: (secret: string): string => sealed.seal(secret),
    open: (stored: string): string => (stored.startsWith(SEALED) ? sealed.open(stored) : stored),
  };
};

export const makeWebhooks = (ports: VodPorts, config: VodConfig) => {
  const { clock, ids, storage } = ports;
  const secrets = webhookSecrets(config.drmMasterKey, ids.randomBytes);

  const create = (principal: Principal, input: CreateInput) =>
    Effect.gen(function* () {
      // Where a webhook may point is the sender's rule, checked here to refuse a bad URL at
      // once, and again on every send against the address connected to. A process composed
      // without a sender (an embedder whose deliveries run elsewhere) stores the webhook as
      // given: its deliveries are recorded and wait for a process that sends, which checks them.
      const sender = ports.webhookSender;
      if (sender)
        yield* Effect.catchTag(sender.checkUrl(input.url), "UrlRefused", (refused) =>
          Effect.fail(
            new InvalidRequest({
              message: `webhook URL refused: ${refused.reason}`,
              details: { fields: [{ path: ["url"], message: refused.reason }] },
            }),
          ),
        );
      const secret = `whsec_${Buffer.from(ids.randomBytes(32)).toString("base64")}`;
      const webhook: Webhook = {
        id: ids.id("webhook"),
        tenant_id: principal.tenant.id,
        url: input.url,
        // One mention of each type, in the order given.
        events: [...new Set(input.events)],
        description: input.description ?? null,
        secret: secrets.seal(secret),
        created_at: clock.now(),
        deleted_at: null,
      };
      // Counted in the transaction that inserts, the tenant held meanwhile: two creates at once
      // cannot both take the last place.
      const limit = config.quotas.webhooksPerTenant;
      yield* storage.transaction((tx) =>
        Effect.gen(function* () {
          yield* tx.tenants.lock(webhook.tenant_id);
          if ((yield* tx.webhooks.count(webhook.tenant_id)) >= limit)
            return yield* Effect.fail(
              quotaExceeded(`a tenant may have at most ${limit} webhooks: delete one first`, limit),
            );
          yield* tx.webhooks.insert(webhook);
        }),
      );
      return { webhook: view(webhook), secret };
    });

  const list = (principal: Principal) =>
    Effect.map(storage.webhooks.list(principal.tenant.id, MAX_LISTED_WEBHOOKS), (rows) => ({
      data: rows.map(view),
    }));

  const find = (principal: Principal, id: string) =>
    orNotFound("webhook")(storage.webhooks.get(principal.tenant.id, id));

  const get = (principal: Principal, id: string) =>
    Effect.map(find(principal, id), (webhook) => ({ webhook: view(webhook) }));

  const remove = (principal: Principal, id: string) =>
    Effect.flatMap(find(principal, id), (webhook) =>
      Effect.asVoid(storage.webhooks.remove(principal.tenant.id, webhook.id, clock.now())),
    );

  const deliveries = (principal: Principal, id: string) =>
    Effect.gen(function* () {
      const webhook = yield* find(principal, id);
      const rows = yield* storage.webhookDeliveries.listByWebhook(
        principal.tenant.id,
        webhook.id,
        MAX_LISTED_DELIVERIES,
      );
      return { data: rows.map(deliveryView) };
    });

  /** Sends the delivery's event again, as a new delivery with the same event id (`webhook-id`). */
  const redeliver = (principal: Principal, id: string, deliveryId: string) =>
    Effect.gen(function* () {
      const webhook = yield* find(principal, id);
      const found = yield* orNotFound("delivery")(
        storage.webhookDeliveries.get(principal.tenant.id, deliveryId),
      );
      if (found.webhook_id !== webhook.id)
        return yield* Effect.fail(new NotFound({ message: "delivery not found" }));
      const now = clock.now();
      const delivery: WebhookDelivery = {
        ...found,
        id: ids.id("delivery"),
        status: "pending",
        attempts: 0,
        last_status_code: null,
        next_attempt_at: now,
        created_at: now,
      };
      yield* storage.transaction((tx) =>
        Effect.gen(function* () {
          yield* tx.webhookDeliveries.insert(delivery);
          yield* tx.jobs.enqueue("deliver-webhook", {
            tenant_id: delivery.tenant_id,
            delivery_id: delivery.id,
            attempts: 0,
          });
        }),
      );
      return { delivery: deliveryView(delivery) };
    });

  const jobFailed = (message: string, cause?: unknown): JobFailed => new JobFailed({ message, cause });

  /**
   * One attempt of a delivery job. The attempt and the job of the next one commit together, and
   * only the run that finds the delivery as its job expects it records anything: a job run twice
   * (its worker died after sending) sends twice, which at-least-once allows, and schedules once.
   */
  const deliver = (job: Job<"deliver-webhook">): Effect.Effect<DeliveryOutcome, JobFailed> =>
    Effect.gen(function* () {
      const { tenant_id, delivery_id, attempts } = job.data;
      const found = yield* storage.webhookDeliveries.get(tenant_id, delivery_id);
      if (Option.isNone(found) || found.value.status !== "pending" || found.value.attempts !== attempts)
        return { status: "skipped" } as const;
      const delivery = found.value;
      const webhook = yield* storage.webhooks.get(tenant_id, delivery.webhook_id);
      const sender = ports.webhookSender;
      if (!sender) return yield* Effect.fail(jobFailed("this process has no webhook sender"));
      // A deleted webhook gets nothing more: the delivery fails without an attempt.
      const result: SendResult = Option.isNone(webhook)
        ? { ok: false, statusCode: null, error: "webhook deleted" }
        : yield* sender.send({
            url: webhook.value.url,
            id: delivery.event_id,
            body: delivery.payload,
            secret: yield* Effect.try({
              try: () => secrets.open(webhook.value.secret),
              catch: (cause) => jobFailed("a webhook secret does not open with the master key", cause),
            }),
          });
      const next = Option.isNone(webhook)
        ? { status: "failed" as const, attempts, last_status_code: null, next_attempt_at: null }
        : afterAttempt(delivery, result, clock.now(), {
            baseMs: config.webhooks.retryBaseMs,
            retryForMs: config.webhooks.retryForMs,
          });
      const recorded = yield* storage.transaction((tx) =>
        Effect.gen(function* () {
          if (!(yield* tx.webhookDeliveries.recordAttempt(tenant_id, delivery_id, attempts, next)))
            return false;
          if (next.status === "pending" && next.next_attempt_at !== null)
            yield* tx.jobs.enqueue(
              "deliver-webhook",
              { tenant_id, delivery_id, attempts: next.attempts },
              { delayMs: Math.max(0, next.next_attempt_at - clock.now()) },
            );
          return true;
        }),
      );
      if (!recorded) return { status: "skipped" } as const;
      const status = next.status === "pending" ? "retrying" : next.status;
      return { status, delivery: { ...delivery, ...next }, result } as const;
    }).pipe(
      Effect.catchTag("StorageError", (e) => Effect.fail(jobFailed(e.message, e))),
      Effect.withSpan("deliverWebhook"),
    );

  return { create, list, get, remove, deliveries, redeliver, deliver, recordEvent: eventRecorder(ports) };
};

export type Webhooks = ReturnType<typeof makeWebhooks>;

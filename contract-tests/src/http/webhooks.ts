import { randomUUID } from "node:crypto";
import { Webhook as Verifier } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ReceivedWebhook, startWebhookReceiver, type WebhookReceiver } from "../webhook-receiver.js";
import {
  type Credential,
  createApiKey,
  createAsset,
  credentialOptions,
  DAY,
  expectError,
  expectInvalidFields,
  expectNoContent,
  expectStatus,
  type Harness,
  type MakeHttpSubject,
  sendTo,
  sharedSubject,
  signUp,
  startUpload,
  type WireAsset,
  type WireRendition,
  type WireUploadSession,
  withSubject,
} from "./client.js";

interface WireWebhook {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  created_at: number;
}

interface WireDelivery {
  id: string;
  event_id: string;
  event_type: string;
  status: "pending" | "succeeded" | "failed";
  attempts: number;
  last_status_code: number | null;
  next_attempt_at: number | null;
  created_at: number;
}

interface WireEvent {
  id: string;
  type: string;
  created_at: number;
  tenant_id: string;
  data: { asset: WireAsset; upload?: WireUploadSession; rendition?: WireRendition };
}

const SECRET_FORM = /^whsec_[A-Za-z0-9+/]{43}=$/;

/** What a receiver does with a request: verify it with the Standard Webhooks library, then parse it. */
const verified = (secret: string, request: ReceivedWebhook): WireEvent => {
  const headers = {
    "webhook-id": String(request.headers["webhook-id"]),
    "webhook-timestamp": String(request.headers["webhook-timestamp"]),
    "webhook-signature": String(request.headers["webhook-signature"]),
  };
  return new Verifier(secret).verify(request.body, headers) as WireEvent;
};

/**
 * Outbound webhooks (DECISIONS "Webhooks"): the admin API over them, and events as a receiver on
 * 127.0.0.1 gets them (so the host allows private addresses), verified as any receiver would. The
 * host runs a worker with the fake media processor, so a real upload brings the asset's events,
 * and retries within moments.
 */
export const describeWebhooks = (makeSubject: MakeHttpSubject): void => {
  describe("webhooks", () => {
    const subject = sharedSubject(makeSubject, {
      VOD_WORKER_CONCURRENCY: "1",
      VOD_WEBHOOKS_ALLOW_PRIVATE: "true",
      VOD_WEBHOOK_RETRY_BASE_SECONDS: "0.05",
    });
    let receiver: WebhookReceiver;
    beforeAll(async () => {
      receiver = await startWebhookReceiver();
    });
    afterAll(async () => {
      await receiver.close();
    });

    /** A tenant and its admin key (a key, not a token: the clock may move a day). */
    const tenant = async (h: Harness) => {
      const account = await signUp(h.api);
      const admin = await createApiKey(h.api, { bearer: account.access_token }, ["admin"]);
      return { account, credential: { apiKey: admin.key } as Credential };
    };
    const path = () => `/hook/${randomUUID()}`;
    const create = (h: Harness, credential: Credential, json: unknown) =>
      h.api.post<{ webhook: WireWebhook; secret: string }>("/v1/webhooks", {
        ...credentialOptions(credential),
        json,
      });
    const created = async (h: Harness, credential: Credential, json: Record<string, unknown>) =>
      expectStatus(await create(h, credential, json), 201).body;
    const deliveries = async (h: Harness, credential: Credential, id: string) =>
      expectStatus(
        await h.api.get<{ data: WireDelivery[] }>(
          `/v1/webhooks/${id}/deliveries`,
          credentialOptions(credential),
        ),
        200,
      ).body.data;
    const untilDeliveries = async (
      h: Harness,
      credential: Credential,
      id: string,
      done: (rows: WireDelivery[]) => boolean,
    ) => {
      for (let i = 0; i < 600; i++) {
        const rows = await deliveries(h, credential, id);
        if (done(rows)) return rows;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error(
        `deliveries of ${id} never settled: ${JSON.stringify(await deliveries(h, credential, id))}`,
      );
    };

    it("creates a webhook (201) with its secret once, gets, lists and deletes it (204, then 404)", async () => {
      const h = subject();
      const { credential } = await tenant(h);
      const url = `${receiver.url}${path()}`;
      const body = await created(h, credential, {
        url,
        events: ["asset.ready", "asset.failed", "asset.ready"],
        description: "publish pipeline",
      });
      expect(body).toStrictEqual({
        webhook: {
          id: expect.any(String),
          url,
          events: ["asset.ready", "asset.failed"],
          description: "publish pipeline",
          created_at: h.clock.now(),
        },
        secret: expect.stringMatching(SECRET_FORM),
      });
      const { webhook } = body;
      const options = credentialOptions(credential);
      expect(expectStatus(await h.api.get(`/v1/webhooks/${webhook.id}`, options), 200).body).toStrictEqual({
        webhook,
      });
      h.clock.advance(1); // newest first needs a later created_at: ids are random
      const other = (await created(h, credential, { url, events: ["*"] })).webhook;
      expect(other.description).toBeNull();
      // Newest first; the secret is never listed.
      const listed = expectStatus(
        await h.api.get<{ data: WireWebhook[] }>("/v1/webhooks", options),
        200,
      ).body;
      expect(listed).toStrictEqual({ data: [other, webhook] });
      expectNoContent(await h.api.del(`/v1/webhooks/${webhook.id}`, options));
      expectError(await h.api.get(`/v1/webhooks/${webhook.id}`, options), 404, "not_found");
      expectError(await h.api.del(`/v1/webhooks/${webhook.id}`, options), 404, "not_found");
      expect(expectStatus(await h.api.get("/v1/webhooks", options), 200).body).toStrictEqual({
        data: [other],
      });
    });

    it("holds a tenant to 20 webhooks: of 22 created at once 20 are made, the others 409 quota_exceeded; a delete makes room", async () => {
      const h = subject();
      const { credential } = await tenant(h);
      const json = { url: `${receiver.url}${path()}`, events: ["asset.deleted"] };
      const replies = await Promise.all(Array.from({ length: 22 }, () => create(h, credential, json)));
      expect(replies.filter((r) => r.status === 201)).toHaveLength(20);
      for (const reply of replies.filter((r) => r.status !== 201))
        expect(expectError(reply, 409, "conflict").details).toStrictEqual({
          reason: "quota_exceeded",
          limit: 20,
        });
      const options = credentialOptions(credential);
      const listed = expectStatus(await h.api.get<{ data: WireWebhook[] }>("/v1/webhooks", options), 200).body
        .data;
      expect(listed).toHaveLength(20);
      expectError(await create(h, credential, json), 409, "conflict");
      expectNoContent(await h.api.del(`/v1/webhooks/${listed[0]?.id}`, options));
      expectStatus(await create(h, credential, json), 201);
      expectError(await create(h, credential, json), 409, "conflict");
    });

    it("refuses a body that is not a webhook: 400 naming each field", async () => {
      const h = subject();
      const { credential } = await tenant(h);
      const url = `${receiver.url}/x`;
      expectInvalidFields(await create(h, credential, { events: ["*"] }), [["url"]]);
      expectInvalidFields(await create(h, credential, { url: "not a url", events: ["*"] }), [["url"]]);
      expectInvalidFields(await create(h, credential, { url: "ftp://example.com/x", events: ["*"] }), [
        ["url"],
      ]);
      expectInvalidFields(await create(h, credential, { url, events: [] }), [["events"]]);
      expectInvalidFields(await create(h, credential, { url, events: ["asset.exploded"] }), [["events", 0]]);
      expectInvalidFields(await create(h, credential, { url, events: ["*"], description: "d".repeat(201) }), [
        ["description"],
      ]);
      expectInvalidFields(await create(h, credential, { url, events: ["*"], secret: "mine" }), [["secret"]]);
    });

    it("is for admins: a write or read key gets 403 on every webhook route", async () => {
      const h = subject();
      const { account, credential } = await tenant(h);
      const { webhook } = await created(h, credential, { url: `${receiver.url}/x`, events: ["*"] });
      for (const scope of ["read", "write"]) {
        const key = await createApiKey(h.api, { bearer: account.access_token }, [scope]);
        const options = credentialOptions({ apiKey: key.key });
        expectError(
          await h.api.post("/v1/webhooks", { ...options, json: { url: `${receiver.url}/x`, events: ["*"] } }),
          403,
          "forbidden",
        );
        expectError(await h.api.get("/v1/webhooks", options), 403, "forbidden");
        expectError(await h.api.get(`/v1/webhooks/${webhook.id}`, options), 403, "forbidden");
        expectError(await h.api.get(`/v1/webhooks/${webhook.id}/deliveries`, options), 403, "forbidden");
        expectError(await h.api.del(`/v1/webhooks/${webhook.id}`, options), 403, "forbidden");
      }
      expectStatus(await h.api.get(`/v1/webhooks/${webhook.id}`, credentialOptions(credential)), 200);
    });

    it("keeps tenants apart: another tenant's webhook is 404 everywhere, and gets none of its events", async () => {
      const h = subject();
      const mine = await tenant(h);
      const theirs = await tenant(h);
      const theirPath = path();
      const { webhook } = await created(h, theirs.credential, {
        url: `${receiver.url}${theirPath}`,
        events: ["*"],
      });
      const options = credentialOptions(mine.credential);
      expectError(await h.api.get(`/v1/webhooks/${webhook.id}`, options), 404, "not_found");
      expectError(await h.api.get(`/v1/webhooks/${webhook.id}/deliveries`, options), 404, "not_found");
      expectError(await h.api.del(`/v1/webhooks/${webhook.id}`, options), 404, "not_found");
      expect(expectStatus(await h.api.get("/v1/webhooks", options), 200).body).toStrictEqual({ data: [] });
      // My asset's event goes to my webhook only.
      const minePath = path();
      await created(h, mine.credential, { url: `${receiver.url}${minePath}`, events: ["asset.created"] });
      await createAsset(h.api, mine.credential);
      await receiver.waitFor(minePath, 1);
      expect(receiver.received(theirPath)).toEqual([]);
      expectStatus(await h.api.get(`/v1/webhooks/${webhook.id}`, credentialOptions(theirs.credential)), 200);
    });

    it("sends an upload's events, signed as Standard Webhooks verify them, each to the webhooks subscribed", async () => {
      const h = subject();
      const { account, credential } = await tenant(h);
      const all = path();
      const readyOnly = path();
      const everything = await created(h, credential, { url: `${receiver.url}${all}`, events: ["*"] });
      const ready = await created(h, credential, {
        url: `${receiver.url}${readyOnly}`,
        events: ["asset.ready"],
      });

      const asset = await createAsset(h.api, credential, { title: "launch" });
      const bytes = new Uint8Array(2_000).fill(7);
      const upload = await startUpload(h.api, credential, {
        asset_id: asset.id,
        size_bytes: bytes.byteLength,
      });
      for (const part of upload.parts) expectStatus(await sendTo("PUT", part.url, { body: bytes }), 200);
      const completed = expectStatus(
        await h.api.post<{ upload: WireUploadSession; asset: WireAsset }>(
          `/v1/uploads/${upload.id}/complete`,
          {
            ...credentialOptions(credential),
            json: {},
          },
        ),
        200,
      ).body;

      // The fake media processor plans 360p and 240p: ready at the first, complete at the second.
      const got = (await receiver.waitFor(all, 8)).map((r) => verified(everything.secret, r));
      expect(got.map((e) => e.type).sort()).toEqual(
        [
          "asset.created",
          "asset.processing",
          "asset.ready",
          "asset.rendition.ready",
          "asset.rendition.ready",
          "asset.renditions_complete",
          "asset.uploaded",
          "upload.completed",
        ].sort(),
      );
      const byType = new Map(got.map((e) => [e.type, e]));
      for (const event of got) {
        expect(event).toStrictEqual({
          id: expect.stringMatching(/^evt_/),
          type: event.type,
          created_at: expect.any(Number),
          tenant_id: account.tenant.id,
          data: event.type.startsWith("upload.")
            ? { upload: expect.any(Object), asset: expect.any(Object) }
            : event.type === "asset.rendition.ready"
              ? { asset: expect.any(Object), rendition: expect.any(Object) }
              : { asset: expect.any(Object) },
        });
      }
      expect(byType.get("asset.created")?.data.asset).toStrictEqual(asset);
      // The asset as the upload left it: the completion's answer may already show processing.
      const uploaded = {
        ...asset,
        status: "uploaded",
        origin_size_bytes: completed.asset.origin_size_bytes,
        checksum_sha256: completed.asset.checksum_sha256,
      };
      expect(completed.asset.origin_size_bytes).toBe(bytes.byteLength);
      expect(byType.get("upload.completed")?.data).toStrictEqual({
        upload: completed.upload,
        asset: uploaded,
      });
      expect(byType.get("asset.uploaded")?.data.asset).toStrictEqual(uploaded);
      expect(byType.get("asset.processing")?.data.asset.status).toBe("processing");
      const final = expectStatus(
        await h.api.get<{ asset: WireAsset }>(`/v1/assets/${asset.id}`, credentialOptions(credential)),
        200,
      ).body.asset;
      expect(final.renditions.map((r) => [r.name, r.status])).toEqual([
        ["360p", "ready"],
        ["240p", "ready"],
      ]);
      expect(final.ready_at).toEqual(expect.any(Number));
      // Ready (playable) at the first rendition, the other still pending; complete with both.
      expect(byType.get("asset.ready")?.data.asset).toStrictEqual({
        ...final,
        renditions: final.renditions.map((r) => (r.name === "240p" ? { ...r, status: "pending" } : r)),
      });
      expect(byType.get("asset.renditions_complete")?.data.asset).toStrictEqual(final);
      const renditionEvents = got.filter((e) => e.type === "asset.rendition.ready");
      expect(renditionEvents.map((e) => e.data.rendition)).toEqual(expect.arrayContaining(final.renditions));

      // The ready-only webhook got that one event, under its own secret, with the same event id.
      const [readyRequest] = await receiver.waitFor(readyOnly, 1);
      const readyEvent = verified(ready.secret, readyRequest as ReceivedWebhook);
      expect(readyEvent).toStrictEqual(byType.get("asset.ready"));
      expect(readyRequest?.headers["webhook-id"]).toBe(readyEvent.id);
      expect(() => verified(everything.secret, readyRequest as ReceivedWebhook)).toThrow();
      expect(readyRequest?.headers["content-type"]).toBe("application/json");

      const log = await untilDeliveries(
        h,
        credential,
        everything.webhook.id,
        (rows) => rows.length === 8 && rows.every((d) => d.status === "succeeded"),
      );
      expect(log.map((d) => d.event_id).sort()).toEqual(got.map((e) => e.id).sort());
      for (const d of log)
        expect(d).toStrictEqual({
          id: expect.any(String),
          event_id: got.find((e) => e.id === d.event_id && e.type === d.event_type)?.id,
          event_type: d.event_type,
          status: "succeeded",
          attempts: 1,
          last_status_code: 200,
          next_attempt_at: null,
          created_at: expect.any(Number),
        });
    });

    it("retries a failed delivery: a receiver that answers 500 twice gets the event a third time", async () => {
      const h = subject();
      const { credential } = await tenant(h);
      const at = path();
      receiver.respond(at, [500, 503]);
      const { webhook, secret } = await created(h, credential, {
        url: `${receiver.url}${at}`,
        events: ["asset.created"],
      });
      await createAsset(h.api, credential);
      const requests = await receiver.waitFor(at, 3);
      expect(requests.map((r) => r.status)).toEqual([500, 503, 200]);
      const ids = new Set(requests.map((r) => r.headers["webhook-id"]));
      expect(ids.size).toBe(1);
      for (const r of requests) expect(verified(secret, r).type).toBe("asset.created");
      const [delivery] = await untilDeliveries(
        h,
        credential,
        webhook.id,
        (rows) => rows[0]?.status === "succeeded",
      );
      expect(delivery).toMatchObject({
        event_type: "asset.created",
        status: "succeeded",
        attempts: 3,
        last_status_code: 200,
        next_attempt_at: null,
      });
    });

    it("redelivers a delivery as a new one with the same webhook-id (202)", async () => {
      const h = subject();
      const { credential } = await tenant(h);
      const at = path();
      receiver.respond(at, [502]);
      const { webhook, secret } = await created(h, credential, {
        url: `${receiver.url}${at}`,
        events: ["*"],
      });
      const asset = await createAsset(h.api, credential);
      await receiver.waitFor(at, 2);
      const [delivery] = await untilDeliveries(
        h,
        credential,
        webhook.id,
        (rows) => rows[0]?.status === "succeeded",
      );
      expect(delivery?.attempts).toBe(2);

      const options = credentialOptions(credential);
      h.clock.advance(1); // newest first needs a later created_at: ids are random
      const reply = await h.api.post<{ delivery: WireDelivery }>(
        `/v1/webhooks/${webhook.id}/deliveries/${delivery?.id}/redeliver`,
        { ...options, json: {} },
      );
      const again = expectStatus(reply, 202).body.delivery;
      expect(again).toStrictEqual({
        id: expect.any(String),
        event_id: delivery?.event_id,
        event_type: "asset.created",
        status: "pending",
        attempts: 0,
        last_status_code: null,
        next_attempt_at: expect.any(Number),
        created_at: expect.any(Number),
      });
      expect(again.id).not.toBe(delivery?.id);
      const requests = await receiver.waitFor(at, 3);
      const third = requests[2] as ReceivedWebhook;
      expect(third.headers["webhook-id"]).toBe(delivery?.event_id);
      expect(verified(secret, third).data.asset.id).toBe(asset.id);
      const log = await untilDeliveries(h, credential, webhook.id, (rows) => rows[0]?.status === "succeeded");
      expect(log.map((d) => d.id)).toEqual([again.id, delivery?.id]);

      expectError(
        await h.api.post(`/v1/webhooks/${webhook.id}/deliveries/dlv_nothing/redeliver`, {
          ...options,
          json: {},
        }),
        404,
        "not_found",
      );
    });

    it("fails a delivery for good once retries pass 24 hours", async () => {
      const h = subject();
      const { credential } = await tenant(h);
      const at = path();
      receiver.respond(
        at,
        Array.from({ length: 1_000 }, () => 500),
      );
      const { webhook } = await created(h, credential, {
        url: `${receiver.url}${at}`,
        events: ["asset.created"],
      });
      await createAsset(h.api, credential);
      const [pending] = await untilDeliveries(
        h,
        credential,
        webhook.id,
        (rows) => (rows[0]?.attempts ?? 0) >= 1,
      );
      expect(pending).toMatchObject({ status: "pending", last_status_code: 500 });
      expect(pending?.next_attempt_at).toEqual(expect.any(Number));
      h.clock.advance(DAY + 1_000);
      const [failed] = await untilDeliveries(
        h,
        credential,
        webhook.id,
        (rows) => rows[0]?.status === "failed",
      );
      expect(failed).toMatchObject({ status: "failed", last_status_code: 500, next_attempt_at: null });
      const attempts = failed?.attempts ?? 0;
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(receiver.received(at)).toHaveLength(attempts);
    });

    it("refuses an endpoint on 127.0.0.1 or over http without VOD_WEBHOOKS_ALLOW_PRIVATE (400)", async () => {
      await withSubject(makeSubject, {}, async (h) => {
        const { credential } = await tenant(h);
        for (const url of [
          `${receiver.url}/x`,
          "https://127.0.0.1/x",
          "https://[::1]/x",
          "https://localhost/x",
          "https://10.1.2.3/x",
          "https://[::ffff:127.0.0.1]/x",
          "http://example.com/x",
        ]) {
          const error = expectError(
            await create(h, credential, { url, events: ["*"] }),
            400,
            "invalid_request",
          );
          expect(error.details).toStrictEqual({ fields: [{ path: ["url"], message: expect.any(String) }] });
        }
        expect(
          expectStatus(await h.api.get("/v1/webhooks", credentialOptions(credential)), 200).body,
        ).toStrictEqual({
          data: [],
        });
      });
    });
  });
};

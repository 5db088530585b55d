import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openPglite } from "@vod/adapter-postgres";
import { HOLD, startWebhookReceiver, type WebhookReceiver } from "@vod/contract-tests";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, freePort, kill, signUp, startServe, stop } from "./support.js";

/**
 * At-least-once delivery across a crash (DECISIONS "Webhooks"): `vod serve` on the embedded
 * database, killed outright while it sends an event, and started again on the same data directory.
 * Short leases so that the lost run is noticed within seconds.
 */
describe("webhooks across a host killed mid-delivery (embedded PGlite)", () => {
  let dir: string;
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "vod-webhooks-"));
    receiver = await startWebhookReceiver();
  });
  afterAll(async () => {
    await receiver.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("delivers the event after the restart: nothing recorded is lost, and its webhook-id is kept", async () => {
    const port = await freePort();
    const env = {
      VOD_DATA_DIR: dir,
      VOD_LOG_LEVEL: "warn",
      VOD_WORKER_CONCURRENCY: "1",
      VOD_WEBHOOKS_ALLOW_PRIVATE: "true",
      VOD_WEBHOOK_RETRY_BASE_SECONDS: "0.1",
      VOD_JOB_LEASE_SECONDS: "2",
      VOD_JOB_MAINTENANCE_SECONDS: "1",
      VOD_JOB_RETRY_DELAY_SECONDS: "1",
    };
    const path = "/hook/crash";
    // The first request is held open: the host dies with the delivery in flight, unrecorded.
    receiver.respond(path, [HOLD]);
    const first = await startServe(env, port);
    let auth: Record<string, string>;
    let webhook: { id: string };
    let secret: string;
    let assetId: string;
    try {
      auth = await signUp(first.url, "webhooks");
      const created = await call(first.url, "/v1/webhooks", {
        headers: auth,
        body: { url: `${receiver.url}${path}`, events: ["asset.created"] },
      });
      expect(created.status).toBe(201);
      ({ webhook, secret } = created.body);
      const asset = await call(first.url, "/v1/assets", { headers: auth, body: { title: "survivor" } });
      expect(asset.status).toBe(201);
      assetId = asset.body.asset.id;
      await receiver.waitFor(path, 1);
    } finally {
      await kill(first.child);
    }

    const second = await startServe(env, port);
    try {
      const requests = await receiver.waitFor(path, 2, 60_000);
      const [held, delivered] = requests;
      expect(delivered?.status).toBe(200);
      expect(delivered?.headers["webhook-id"]).toBe(held?.headers["webhook-id"]);
      const event = new Webhook(secret).verify(delivered?.body ?? "", {
        "webhook-id": String(delivered?.headers["webhook-id"]),
        "webhook-timestamp": String(delivered?.headers["webhook-timestamp"]),
        "webhook-signature": String(delivered?.headers["webhook-signature"]),
      }) as { type: string; data: { asset: { id: string } } };
      expect(event.type).toBe("asset.created");
      expect(event.data.asset.id).toBe(assetId);

      let log: Array<{ status: string; attempts: number; last_status_code: number | null }> = [];
      for (let i = 0; i < 200; i++) {
        log = (await call(second.url, `/v1/webhooks/${webhook.id}/deliveries`, { headers: auth })).body.data;
        if (log[0]?.status === "succeeded") break;
        await new Promise((r) => setTimeout(r, 50));
      }
      // The killed run recorded nothing; the run after the restart is the delivery's first attempt.
      expect(log).toMatchObject([{ status: "succeeded", attempts: 1, last_status_code: 200 }]);
    } finally {
      expect(await stop(second)).toBe(0);
    }
    // At rest the secret is sealed: the database alone signs nothing. The restarted host opened
    // it with the master key of the data directory.
    const db = await openPglite(join(dir, "pglite"));
    try {
      const { rows } = await db.query<{ secret: string }>("SELECT secret FROM webhooks WHERE id = $1", [
        webhook.id,
      ]);
      expect(rows).toHaveLength(1);
      expect(rows[0]?.secret).toMatch(/^sealed:[A-Za-z0-9_-]+$/);
      expect(rows[0]?.secret).not.toContain(secret.slice("whsec_".length, "whsec_".length + 12));
    } finally {
      await db.close();
    }
  }, 120_000);
});

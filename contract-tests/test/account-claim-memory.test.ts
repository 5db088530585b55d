import { manualClock, memoryStorage } from "@vod/adapter-memory";
import { memoryBackdoor } from "@vod/adapter-memory/testing";
import { createVod, type Job, type WebhookMessage } from "@vod/core";
import { Effect } from "effect";
import { describe, expect, it } from "vitest";
import { memoryCorePorts } from "./memory-core.js";

/**
 * What the HTTP suites cannot watch without a worker: a webhook deleted by an account claim gets
 * none of the deliveries still pending for it. The core over memory ports, with a sender that
 * records what it would send.
 */
describe("an account claim and the signup's pending webhook deliveries (memory)", () => {
  it("sends none of them: each fails without an attempt", async () => {
    const clock = manualClock(Date.now());
    const storage = memoryStorage();
    const sent: WebhookMessage[] = [];
    const email = "owner@example.com";
    const ports = memoryCorePorts({
      clock,
      storage,
      identityVerifier: {
        verify: () =>
          Effect.succeed({ provider: "google", subject: "1001", email, email_verified: true, name: null }),
      },
      webhookSender: {
        checkUrl: () => Effect.void,
        send: (message) =>
          Effect.sync(() => {
            sent.push(message);
            return { ok: true, statusCode: 204 };
          }),
      },
    });
    const vod = createVod(ports);
    const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect);

    const signup = await run(vod.accounts.signup({ email, password: "the signup's password" }, "10.0.0.1"));
    const asPrincipal = {
      kind: "api_key",
      tenant: signup.tenant,
      keyId: "key_signup",
      scope: "admin",
    } as const;
    await run(vod.webhooks.create(asPrincipal, { url: "https://hooks.example.com/a", events: ["*"] }));
    await run(vod.assets.create(asPrincipal, {}));
    const deliveryJobs = async () =>
      (await memoryBackdoor(storage).jobs()).filter((j) => j.name === "deliver-webhook") as unknown as Array<
        Job<"deliver-webhook">
      >;
    const pending = await deliveryJobs();
    expect(pending).toHaveLength(1);

    const claimed = await run(vod.accounts.google("an id token", "10.0.0.2"));
    expect(claimed.created).toBe(false);
    for (const job of pending) {
      expect(await run(vod.webhooks.deliver(job))).toMatchObject({ status: "failed" });
      const delivery = await run(storage.webhookDeliveries.get(signup.tenant.id, job.data.delivery_id));
      expect(delivery).toMatchObject({ _tag: "Some", value: { status: "failed", attempts: 0 } });
    }
    expect(sent).toEqual([]);

    // A webhook the owner makes after the claim gets its events: the sender is wired.
    await run(vod.webhooks.create(asPrincipal, { url: "https://hooks.example.com/b", events: ["*"] }));
    await run(vod.assets.create(asPrincipal, {}));
    const later = (await deliveryJobs()).filter(
      (job) => !pending.some((p) => p.data.delivery_id === job.data.delivery_id),
    );
    expect(later).toHaveLength(1);
    for (const job of later)
      expect(await run(vod.webhooks.deliver(job))).toMatchObject({ status: "succeeded" });
    expect(sent.map((m) => m.url)).toEqual(["https://hooks.example.com/b"]);
  });
});

import { embeddedVod, walkthrough } from "@vod/example-embedded";
import { Effect } from "effect";
import { expect, it } from "vitest";

it("runs the platform as a library: signup, an API key, an asset, a list", async () => {
  const vod = await embeddedVod();
  const { tenant, key, asset, page } = await Effect.runPromise(walkthrough(vod));
  expect(tenant.plan).toBe("free");
  expect(key.key).toMatch(/^vod_[0-9A-Za-z]{8}_[0-9A-Za-z]{43}$/);
  expect(asset).toMatchObject({ title: "Launch trailer", status: "pending", tenant_id: tenant.id });
  expect(page).toEqual({ data: [asset], next_cursor: null });
});

it("takes a webhook without a sender: it is stored, and its deliveries wait for a process that sends", async () => {
  const vod = await embeddedVod();
  const signedUp = await Effect.runPromise(
    vod.accounts.signup(
      { email: `hooks-${Date.now()}@example.com`, password: "correct horse battery" },
      "127.0.0.1",
    ),
  );
  const admin = await Effect.runPromise(vod.authenticate({ bearer: signedUp.access_token }));
  const { webhook, secret } = await Effect.runPromise(
    vod.webhooks.create(admin, { url: "https://hooks.example.com/vod", events: ["asset.created"] }),
  );
  expect(secret).toMatch(/^whsec_/);
  expect(webhook).toMatchObject({ url: "https://hooks.example.com/vod", events: ["asset.created"] });
  expect((await Effect.runPromise(vod.webhooks.list(admin))).data).toEqual([webhook]);
  await Effect.runPromise(vod.assets.create(admin, { title: "After the webhook" }));
  const { data } = await Effect.runPromise(vod.webhooks.deliveries(admin, webhook.id));
  expect(data).toEqual([
    expect.objectContaining({ event_type: "asset.created", status: "pending", attempts: 0 }),
  ]);
});

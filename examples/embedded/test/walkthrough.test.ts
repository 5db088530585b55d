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

it("adds a text track from SRT: stored as WebVTT, listed, and a broken file refused by its line", async () => {
  const vod = await embeddedVod();
  const signedUp = await Effect.runPromise(
    vod.accounts.signup(
      { email: `tracks-${Date.now()}@example.com`, password: "correct horse battery" },
      "127.0.0.1",
    ),
  );
  const owner = await Effect.runPromise(vod.authenticate({ bearer: signedUp.access_token }));
  const { asset } = await Effect.runPromise(vod.assets.create(owner, { title: "Subtitled" }));
  const { track } = await Effect.runPromise(
    vod.textTracks.add(owner, asset.id, {
      type: "text",
      language_code: "de",
      content: "1\n00:00:01,000 --> 00:00:02,000\nHallo\n",
    }),
  );
  expect(track).toMatchObject({ type: "text", language_code: "de", name: "German", status: "ready" });
  expect((await Effect.runPromise(vod.textTracks.list(owner, asset.id))).data).toEqual([track]);
  const refused = await Effect.runPromise(
    Effect.flip(
      vod.textTracks.add(owner, asset.id, {
        type: "text",
        language_code: "de",
        content: "WEBVTT\n\nnot a cue\n",
      }),
    ),
  );
  expect(refused).toMatchObject({ _tag: "InvalidRequest", details: { line: 3 } });
});

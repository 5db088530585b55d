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

import { describe, expect, it } from "vitest";
import {
  type AssetPage,
  type Credential,
  createApiKey,
  credentialOptions,
  DAY,
  expectError,
  expectStatus,
  type Harness,
  type MakeHttpSubject,
  type Reply,
  sharedSubject,
  signUp,
  type WireAsset,
} from "./client.js";

const REPLAYED = "idempotent-replayed";

const writer = async (h: Harness): Promise<Credential> => {
  const owner = await signUp(h.api);
  return { apiKey: (await createApiKey(h.api, { bearer: owner.access_token }, ["write"])).key };
};

const postAsset = (h: Harness, credential: Credential, key: string, json: unknown) =>
  h.api.post<{ asset: WireAsset }>("/v1/assets", {
    ...credentialOptions(credential),
    json,
    headers: { "idempotency-key": key },
  });

const assetsOf = async (h: Harness, credential: Credential) =>
  expectStatus(await h.api.get<AssetPage>("/v1/assets", credentialOptions(credential)), 200).body.data;

const uniqueKey = () => `order-${Math.random().toString(36).slice(2)}-${Date.now()}`;

/** What a client sees of a reply: enough to compare a replay with the first answer. */
const seen = (reply: Reply<unknown>) => ({ status: reply.status, body: reply.body });

/** Idempotency-Key on authenticated POSTs: replays, reuse, concurrency, validation, expiry. */
export const describeIdempotency = (makeSubject: MakeHttpSubject): void => {
  describe("Idempotency-Key", () => {
    const subject = sharedSubject(makeSubject);

    it("replays the first response to the same key and body, with Idempotent-Replayed: true, and creates one asset", async () => {
      const h = subject();
      const credential = await writer(h);
      const key = uniqueKey();
      const first = await postAsset(h, credential, key, { title: "once" });
      expect(first.status).toBe(201);
      expect(first.headers.get(REPLAYED)).toBeNull();
      h.clock.advance(60_000);
      const second = await postAsset(h, credential, key, { title: "once" });
      expect(seen(second)).toStrictEqual(seen(first));
      expect(second.headers.get(REPLAYED)).toBe("true");
      expect((await assetsOf(h, credential)).map((a) => a.id)).toStrictEqual([first.body.asset.id]);
    });

    it("refuses the key with another body or another path (400, details.reason idempotency_key_reused)", async () => {
      const h = subject();
      const credential = await writer(h);
      const key = uniqueKey();
      expectStatus(await postAsset(h, credential, key, { title: "first" }), 201);
      const other = expectError(
        await postAsset(h, credential, key, { title: "second" }),
        400,
        "invalid_request",
      );
      expect(other.details).toStrictEqual({ reason: "idempotency_key_reused" });
      const elsewhere = expectError(
        await h.api.post("/v1/uploads", {
          ...credentialOptions(credential),
          json: { asset_id: "asset_x", size_bytes: 10 },
          headers: { "idempotency-key": key },
        }),
        400,
        "invalid_request",
      );
      expect(elsewhere.details).toStrictEqual({ reason: "idempotency_key_reused" });
      expect(await assetsOf(h, credential)).toHaveLength(1);
    });

    it("keeps keys per tenant: another tenant's same key is its own", async () => {
      const h = subject();
      const [a, b] = [await writer(h), await writer(h)];
      const key = uniqueKey();
      const first = expectStatus(await postAsset(h, a, key, { title: "same" }), 201);
      const second = expectStatus(await postAsset(h, b, key, { title: "same" }), 201);
      expect(second.headers.get(REPLAYED)).toBeNull();
      expect(second.body.asset.id).not.toBe(first.body.asset.id);
      expect(await assetsOf(h, b)).toHaveLength(1);
    });

    it("of 10 concurrent requests with one key runs one: the others replay it or answer 409 conflict", async () => {
      const h = subject();
      const credential = await writer(h);
      const key = uniqueKey();
      const replies = await Promise.all(
        Array.from({ length: 10 }, () => postAsset(h, credential, key, { title: "race" })),
      );
      const assets = await assetsOf(h, credential);
      expect(assets).toHaveLength(1);
      const firsts = replies.filter((r) => r.status === 201 && r.headers.get(REPLAYED) === null);
      expect(firsts).toHaveLength(1);
      for (const reply of replies) {
        if (reply.status === 409) expectError(reply, 409, "conflict");
        else {
          expect(reply.status).toBe(201);
          expect(reply.body.asset).toStrictEqual(assets[0]);
        }
      }
      // Once the first is done, every retry replays it.
      const retry = await postAsset(h, credential, key, { title: "race" });
      expect(retry.headers.get(REPLAYED)).toBe("true");
      expect(seen(retry)).toStrictEqual(seen(firsts[0] as Reply<unknown>));
    });

    it("replays a 4xx answer of the first request too", async () => {
      const h = subject();
      const credential = await writer(h);
      const key = uniqueKey();
      const start = () =>
        h.api.post("/v1/uploads", {
          ...credentialOptions(credential),
          json: { asset_id: "asset_missing", size_bytes: 10 },
          headers: { "idempotency-key": key },
        });
      const first = await start();
      expectError(first, 404, "not_found");
      const again = await start();
      expect(seen(again)).toStrictEqual(seen(first));
      expect(again.headers.get(REPLAYED)).toBe("true");
    });

    it("forgets a key after 24 hours: the same request then runs again", async () => {
      const h = subject();
      const credential = await writer(h);
      const key = uniqueKey();
      const first = expectStatus(await postAsset(h, credential, key, { title: "daily" }), 201);
      h.clock.advance(DAY + 1_000);
      const later = expectStatus(await postAsset(h, credential, key, { title: "daily" }), 201);
      expect(later.headers.get(REPLAYED)).toBeNull();
      expect(later.body.asset.id).not.toBe(first.body.asset.id);
    });

    it("refuses a key that is too long or not printable ASCII (400, details.fields), creating nothing", async () => {
      const h = subject();
      const credential = await writer(h);
      for (const key of ["k".repeat(256), "tab\there"]) {
        const body = expectError(
          await postAsset(h, credential, key, { title: "never" }),
          400,
          "invalid_request",
        );
        expect(body.details?.fields).toStrictEqual([
          { path: ["headers", "idempotency-key"], message: expect.any(String) },
        ]);
      }
      expect(await assetsOf(h, credential)).toHaveLength(0);
      // 255 characters is the longest a key may be.
      expectStatus(await postAsset(h, credential, "k".repeat(255), { title: "longest" }), 201);
    });
  });
};

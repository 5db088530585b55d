import { describe, expect, it } from "vitest";
import {
  type AssetPage,
  type CreatedApiKey,
  type Credential,
  createApiKey,
  credentialOptions,
  DAY,
  expectError,
  expectNoContent,
  expectStatus,
  expectUnauthorized,
  type Harness,
  logIn,
  type MakeHttpSubject,
  type Reply,
  sha256Hex,
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

/**
 * The plain SHA-256 fingerprints a record could hold of a request (the body alone, or the
 * method, path, params, query and body as the first version hashed them): a password change's
 * would let both passwords be cracked from the table.
 */
const plainHashesOf = (path: string, body: unknown) => [
  sha256Hex(JSON.stringify(body)),
  sha256Hex(JSON.stringify(["POST", path, {}, {}, body])),
];

/** What a client sees of a reply: enough to compare a replay with the first answer. */
const seen = (reply: Reply<unknown>) => ({ status: reply.status, body: reply.body });

/** Idempotency-Key on authenticated POSTs: replays, reuse, concurrency, validation, expiry. */
export const describeIdempotency = (makeSubject: MakeHttpSubject): void => {
  describe("Idempotency-Key", () => {
    // Webhooks to 127.0.0.1 are allowed: one is created here, and never sent anything.
    const subject = sharedSubject(makeSubject, { VOD_WEBHOOKS_ALLOW_PRIVATE: "true" });

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

    it("keeps keys per principal: another admin key of the tenant with the same key and body gets a key of its own", async () => {
      const h = subject();
      const owner = await signUp(h.api);
      const [first, second] = [
        await createApiKey(h.api, { bearer: owner.access_token }, ["admin"]),
        await createApiKey(h.api, { bearer: owner.access_token }, ["admin"]),
      ];
      const key = uniqueKey();
      const create = (credential: Credential) =>
        h.api.post<CreatedApiKey>("/v1/api-keys", {
          ...credentialOptions(credential),
          json: { name: "deploy", scopes: ["read"] },
          headers: { "idempotency-key": key },
        });
      const mine = expectStatus(await create({ apiKey: first.key }), 201);
      const theirs = expectStatus(await create({ apiKey: second.key }), 201);
      expect(theirs.headers.get(REPLAYED)).toBeNull();
      expect(theirs.body.id).not.toBe(mine.body.id);
      expect(theirs.body.key).not.toBe(mine.body.key);
      // The owner's own token is a principal of its own too.
      const owners = expectStatus(await create({ bearer: owner.access_token }), 201);
      expect(owners.headers.get(REPLAYED)).toBeNull();
      expect(owners.body.key).not.toBe(mine.body.key);
      // The same principal's retry still shows the full key it was given.
      const again = await create({ apiKey: first.key });
      expect(again.headers.get(REPLAYED)).toBe("true");
      expect(seen(again)).toStrictEqual(seen(mine));
      expectStatus(await h.api.get("/v1/auth/me", { apiKey: again.body.key }), 200);
    });

    it("stores no secret and no plain hash of a body: API key and webhook secrets sealed, a password change not recorded", async () => {
      const h = subject();
      const owner = await signUp(h.api);
      const admin = await createApiKey(h.api, { bearer: owner.access_token }, ["admin"]);
      const [keyKey, webhookKey, passwordKey] = [uniqueKey(), uniqueKey(), uniqueKey()];
      const keyBody = { name: "ci", scopes: ["write"] };
      const made = expectStatus(
        await h.api.post<CreatedApiKey>("/v1/api-keys", {
          apiKey: admin.key,
          json: keyBody,
          headers: { "idempotency-key": keyKey },
        }),
        201,
      ).body;
      const webhookBody = { url: "http://127.0.0.1:9/hook", events: ["*"] };
      const postWebhook = () =>
        h.api.post<{ webhook: { id: string }; secret: string }>("/v1/webhooks", {
          apiKey: admin.key,
          json: webhookBody,
          headers: { "idempotency-key": webhookKey },
        });
      const webhook = expectStatus(await postWebhook(), 201).body;
      const newPassword = "a brand new passphrase";
      const passwordBody = { current_password: owner.password, new_password: newPassword };
      expectNoContent(
        await h.api.post("/v1/auth/password", {
          bearer: owner.access_token,
          json: passwordBody,
          headers: { "idempotency-key": passwordKey },
        }),
      );

      const records = await h.backdoor.idempotencyRecords(owner.tenant.id);
      // The password change left no record; the two creates one each.
      expect(records.map((r) => r.key).sort()).toStrictEqual([keyKey, webhookKey].sort());
      const stored = JSON.stringify(records);
      for (const secret of [made.key, made.key.slice(13), webhook.secret, webhook.secret.slice(6)])
        expect(stored).not.toContain(secret);
      for (const hash of [
        ...plainHashesOf("/v1/api-keys", keyBody),
        ...plainHashesOf("/v1/webhooks", webhookBody),
        ...plainHashesOf("/v1/auth/password", passwordBody),
      ])
        expect(stored).not.toContain(hash);
      expect(stored).not.toContain(owner.password);
      expect(stored).not.toContain(newPassword);

      // Replayed to the same principal, the secrets are whole again.
      const keyAgain = await h.api.post<CreatedApiKey>("/v1/api-keys", {
        apiKey: admin.key,
        json: keyBody,
        headers: { "idempotency-key": keyKey },
      });
      expect(keyAgain.headers.get(REPLAYED)).toBe("true");
      expect(keyAgain.body).toStrictEqual(made);
      const webhookAgain = await postWebhook();
      expect(webhookAgain.headers.get(REPLAYED)).toBe("true");
      expect(webhookAgain.body).toStrictEqual(webhook);
    });

    it("never records a logout: the same key sent from another session of the user ends that session too", async () => {
      const h = subject();
      const account = await signUp(h.api);
      const other = await logIn(h.api, account.email, account.password);
      const key = uniqueKey();
      const logout = (bearer: string) =>
        h.api.post("/v1/auth/logout", { bearer, headers: { "idempotency-key": key } });
      expectNoContent(await logout(account.access_token));
      const second = await logout(other.access_token);
      expectNoContent(second);
      expect(second.headers.get(REPLAYED)).toBeNull();
      expectUnauthorized(await h.api.get("/v1/auth/me", { bearer: other.access_token }));
      // The same session's retry finds it ended, as any call would.
      expectUnauthorized(await logout(account.access_token));
      expect(await h.backdoor.idempotencyRecords(account.tenant.id)).toStrictEqual([]);
    });

    it("never replays a password change: the same key and body run again, and the old password is now wrong", async () => {
      const h = subject();
      const account = await signUp(h.api);
      const key = uniqueKey();
      const change = () =>
        h.api.post("/v1/auth/password", {
          bearer: account.access_token,
          json: { current_password: account.password, new_password: "the second passphrase" },
          headers: { "idempotency-key": key },
        });
      expectNoContent(await change());
      const again = await change();
      expectUnauthorized(again);
      expect(again.headers.get(REPLAYED)).toBeNull();
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

import { TenantId } from "@vod/core";
import { describe, expect, it } from "vitest";
import {
  type CreatedApiKey,
  createApiKey,
  expectError,
  expectInvalidFields,
  expectNoContent,
  expectStatus,
  expectUnauthorized,
  type ListedApiKey,
  type MakeHttpSubject,
  SECOND,
  sha256Hex,
  sharedSubject,
  signUp,
} from "./client.js";

const KEY_FORM = /^vod_[0-9A-Za-z]{8}_[0-9A-Za-z]{43}$/;

/** The listed form of a key just created and never used. */
const listedOf = (key: CreatedApiKey): ListedApiKey => ({
  id: key.id,
  name: key.name,
  prefix: key.prefix,
  scopes: key.scopes,
  last_used_at: null,
  expires_at: null,
  revoked_at: null,
  created_at: key.created_at,
});

/** Creating, listing and revoking API keys, and what each scope may do with them. */
export const describeApiKeys = (makeSubject: MakeHttpSubject): void => {
  describe("API keys", () => {
    const subject = sharedSubject(makeSubject);

    const listKeys = async (bearer: string) =>
      expectStatus(await subject().api.get<{ data: ListedApiKey[] }>("/v1/api-keys", { bearer }), 200).body
        .data;

    it("creates a key (201), returns it once, keeps the highest scope, and stores only its SHA-256", async () => {
      const { api, backdoor, clock } = subject();
      const account = await signUp(api);
      const reply = await api.post<CreatedApiKey>("/v1/api-keys", {
        bearer: account.access_token,
        json: { name: "ci deploy", scopes: ["read", "write"] },
      });
      expect(reply.status).toBe(201);
      expect(reply.headers.get("cache-control")).toBe("no-store");
      const created = reply.body;
      expect(created).toStrictEqual({
        id: expect.any(String),
        name: "ci deploy",
        prefix: expect.any(String),
        scopes: ["write"],
        created_at: clock.now(),
        key: expect.stringMatching(KEY_FORM),
      });
      expect(created.prefix).toBe(created.key.slice(0, 12));
      expect(created.prefix).toMatch(/^vod_[0-9A-Za-z]{8}$/);

      const row = await backdoor.apiKey(created.id);
      expect(row).toStrictEqual({
        id: created.id,
        tenant_id: account.tenant.id,
        name: "ci deploy",
        prefix: created.prefix,
        scopes: ["write"],
        key_hash: sha256Hex(created.key),
        last_used_at: null,
        expires_at: null,
        revoked_at: null,
        created_at: created.created_at,
      });
      const secret = created.key.slice(13);
      expect(JSON.stringify(row)).not.toContain(created.key);
      expect(JSON.stringify(row)).not.toContain(secret);

      const me = await api.get("/v1/auth/me", { apiKey: created.key });
      expect(me.status).toBe(200);
    });

    it("keeps the highest of every scope sent, admin over write over read, whatever their order", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const bearer = account.access_token;
      const admin = await createApiKey(api, { bearer }, ["admin", "read", "write"]);
      const read = await createApiKey(api, { bearer }, ["read", "read"]);
      expect(admin.scopes).toEqual(["admin"]);
      expect(read.scopes).toEqual(["read"]);
      const listed = new Map((await listKeys(bearer)).map((k) => [k.id, k.scopes]));
      expect(listed).toEqual(
        new Map([
          [admin.id, ["admin"]],
          [read.id, ["read"]],
        ]),
      );
    });

    it("answers a key sent as a bearer token 401 with a hint naming X-API-Key, and the key still works there", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const key = await createApiKey(api, { bearer: account.access_token }, ["read"]);
      const body = expectUnauthorized(await api.get("/v1/assets", { bearer: key.key }));
      expect(body.message).toBe(
        "invalid access token: this is an API key, which goes in the X-API-Key header",
      );
      // Whatever follows the tag: the hint is for the header, not a check of the key.
      expect(expectUnauthorized(await api.get("/v1/auth/me", { bearer: "vod_nope" })).message).toMatch(
        /X-API-Key/,
      );
      expect(expectUnauthorized(await api.get("/v1/auth/me", { bearer: "not-a-token" })).message).toBe(
        "invalid access token",
      );
      expectStatus(await api.get("/v1/assets", { apiKey: key.key }), 200);
    });

    it("lists the tenant's keys newest first in the listed shape, never with the key", async () => {
      const { api, clock } = subject();
      const account = await signUp(api);
      const created: CreatedApiKey[] = [];
      for (const scopes of [["read"], ["write"], ["admin"]]) {
        created.push(await createApiKey(api, { bearer: account.access_token }, scopes));
        clock.advance(SECOND);
      }
      const reply = await api.get<{ data: ListedApiKey[] }>("/v1/api-keys", { bearer: account.access_token });
      expect(reply.status).toBe(200);
      expect(reply.body).toStrictEqual({ data: created.map(listedOf).reverse() });
      for (const key of created) {
        expect(reply.text).not.toContain(key.key);
        expect(reply.text).not.toContain(sha256Hex(key.key));
      }
      // Another tenant sees none of them.
      const stranger = await signUp(api);
      expect(await listKeys(stranger.access_token)).toEqual([]);
    });

    it("sets last_used_at on first use, and moves it at most once a minute", async () => {
      const { api, backdoor, clock } = subject();
      const account = await signUp(api);
      const key = await createApiKey(api, { bearer: account.access_token }, ["read"]);
      const lastUsed = async () =>
        (await listKeys(account.access_token)).find((k) => k.id === key.id)?.last_used_at;
      expect(await lastUsed()).toBeNull();

      const firstUse = clock.now();
      expectStatus(await api.get("/v1/auth/me", { apiKey: key.key }), 200);
      expect(await lastUsed()).toBe(firstUse);
      expectStatus(await api.get("/v1/assets", { apiKey: key.key }), 200);
      clock.advance(30 * SECOND);
      expectStatus(await api.get("/v1/auth/me", { apiKey: key.key }), 200);
      expect(await lastUsed()).toBe(firstUse);
      expect((await backdoor.apiKey(key.id))?.last_used_at).toBe(firstUse);

      clock.advance(61 * SECOND);
      const laterUse = clock.now();
      expectStatus(await api.get("/v1/auth/me", { apiKey: key.key }), 200);
      expect(await lastUsed()).toBe(laterUse);
    });

    it("revokes a key (204): refused on the very next call, revoked_at kept on a second revoke", async () => {
      const { api, backdoor, clock } = subject();
      const account = await signUp(api);
      const key = await createApiKey(api, { bearer: account.access_token }, ["write"]);
      expectStatus(await api.get("/v1/assets", { apiKey: key.key }), 200);

      const revokedAt = clock.now();
      expectNoContent(await api.del(`/v1/api-keys/${key.id}`, { bearer: account.access_token }));
      expectUnauthorized(await api.get("/v1/assets", { apiKey: key.key }));
      expect((await backdoor.apiKey(key.id))?.revoked_at).toBe(revokedAt);
      const listed = (await listKeys(account.access_token)).find((k) => k.id === key.id);
      expect(listed?.revoked_at).toBe(revokedAt);

      clock.advance(5 * SECOND);
      expectNoContent(await api.del(`/v1/api-keys/${key.id}`, { bearer: account.access_token }));
      expect((await backdoor.apiKey(key.id))?.revoked_at).toBe(revokedAt);
      expectUnauthorized(await api.get("/v1/auth/me", { apiKey: key.key }));
    });

    it("answers 404 for an unknown key id", async () => {
      const { api } = subject();
      const account = await signUp(api);
      expectError(
        await api.del("/v1/api-keys/key_doesnotexist000000", { bearer: account.access_token }),
        404,
        "not_found",
      );
    });

    it("answers 404 for another tenant's key, and leaves that key working", async () => {
      const { api, backdoor } = subject();
      const owner = await signUp(api);
      const stranger = await signUp(api);
      const key = await createApiKey(api, { bearer: owner.access_token }, ["read"]);
      expectError(
        await api.del(`/v1/api-keys/${key.id}`, { bearer: stranger.access_token }),
        404,
        "not_found",
      );
      expect((await backdoor.apiKey(key.id))?.revoked_at).toBeNull();
      expectStatus(await api.get("/v1/auth/me", { apiKey: key.key }), 200);
    });

    it("lets a read key list keys (200) but neither create (403) nor revoke (403) them", async () => {
      const { api, backdoor } = subject();
      const account = await signUp(api);
      const read = await createApiKey(api, { bearer: account.access_token }, ["read"]);
      const victim = await createApiKey(api, { bearer: account.access_token }, ["read"]);
      const listed = await api.get<{ data: ListedApiKey[] }>("/v1/api-keys", { apiKey: read.key });
      expect(listed.status).toBe(200);
      expect(listed.body.data.map((k) => k.id).sort()).toEqual([read.id, victim.id].sort());
      expectError(
        await api.post("/v1/api-keys", { apiKey: read.key, json: { name: "escalate", scopes: ["admin"] } }),
        403,
        "forbidden",
      );
      expectError(await api.del(`/v1/api-keys/${victim.id}`, { apiKey: read.key }), 403, "forbidden");
      expect((await backdoor.apiKey(victim.id))?.revoked_at).toBeNull();
    });

    it("does not let a write key create keys (403); an admin key may", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const write = await createApiKey(api, { bearer: account.access_token }, ["write"]);
      expectError(
        await api.post("/v1/api-keys", { apiKey: write.key, json: { name: "escalate", scopes: ["read"] } }),
        403,
        "forbidden",
      );
      const admin = await createApiKey(api, { bearer: account.access_token }, ["admin"]);
      const made = await createApiKey(api, { apiKey: admin.key }, ["read"]);
      expect(made.scopes).toEqual(["read"]);
      expectNoContent(await api.del(`/v1/api-keys/${made.id}`, { apiKey: admin.key }));
    });

    it("refuses a name of 65 characters or none, and accepts 64", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const post = (name: string) =>
        api.post("/v1/api-keys", { bearer: account.access_token, json: { name, scopes: ["read"] } });
      expectInvalidFields(await post("n".repeat(65)), [["name"]]);
      expectInvalidFields(await post(""), [["name"]]);
      expectStatus(await post("n".repeat(64)), 201);
    });

    it("holds a tenant to 200 active keys: of 205 creates, 25 at a time, 200 are made and 5 refused (409 quota_exceeded); a revoke makes room", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const owner = { bearer: account.access_token };
      const replies: Array<Awaited<ReturnType<typeof api.post>>> = [];
      const pending = Array.from({ length: 205 }, (_, i) => i);
      const create = () =>
        api.post<CreatedApiKey>("/v1/api-keys", { ...owner, json: { name: "k", scopes: ["read"] } });
      await Promise.all(
        Array.from({ length: 25 }, async () => {
          while (pending.pop() !== undefined) replies.push(await create());
        }),
      );
      expect(replies.filter((r) => r.status === 201)).toHaveLength(200);
      const refused = replies.filter((r) => r.status !== 201);
      expect(refused).toHaveLength(5);
      for (const reply of refused)
        expect(expectError(reply, 409, "conflict").details).toStrictEqual({
          reason: "quota_exceeded",
          limit: 200,
        });
      const active = await listKeys(account.access_token);
      expect(active).toHaveLength(200);

      const revoked = active[0] as ListedApiKey;
      expectNoContent(await api.del(`/v1/api-keys/${revoked.id}`, owner));
      const made = expectStatus(await create(), 201).body;
      expectStatus(await api.get("/v1/auth/me", { apiKey: made.key }), 200);
      expectError(await create(), 409, "conflict");
    });

    it("filters the list by status: an active key hidden by 500 newer revoked ones is listed with status=active", async () => {
      const { api, backdoor, clock } = subject();
      const account = await signUp(api);
      const active = await createApiKey(api, { bearer: account.access_token }, ["write"]);
      const now = clock.now();
      await backdoor.insertApiKeys(
        Array.from({ length: 500 }, (_, i) => ({
          id: `key_decoy${String(i).padStart(4, "0")}${active.id.slice(-8)}`,
          tenant_id: TenantId(account.tenant.id),
          name: "decoy",
          prefix: "vod_decoy000",
          scopes: ["read"] as const,
          key_hash: sha256Hex(`${active.id} decoy ${i}`),
          last_used_at: null,
          expires_at: null,
          revoked_at: now + 1 + i,
          created_at: now + 1 + i,
        })),
      );
      const list = (query: string) =>
        api.get<{ data: ListedApiKey[] }>(`/v1/api-keys${query}`, { bearer: account.access_token });
      // Without a filter the newest 500 show, as before: the decoys alone.
      const all = expectStatus(await list(""), 200).body.data;
      expect(all).toHaveLength(500);
      expect(all.map((k) => k.id)).not.toContain(active.id);
      expect(expectStatus(await list("?status=active"), 200).body).toStrictEqual({
        data: [listedOf(active)],
      });
      const revoked = expectStatus(await list("?status=revoked"), 200).body.data;
      expect(revoked).toHaveLength(500);
      expect(revoked.every((k) => k.revoked_at !== null)).toBe(true);
      for (const bad of ["?status=expired", "?status=", "?status=ACTIVE"])
        expectInvalidFields(await list(bad), [["status"]]);
    });

    it("refuses empty scopes, and an unknown scope naming its index", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const post = (scopes: unknown) =>
        api.post("/v1/api-keys", { bearer: account.access_token, json: { name: "k", scopes } });
      expectInvalidFields(await post([]), [["scopes"]]);
      expectInvalidFields(await post(["root"]), [["scopes", 0]]);
      expectInvalidFields(await post(["read", "root"]), [["scopes", 1]]);
      expect(await listKeys(account.access_token)).toEqual([]);
    });
  });
};

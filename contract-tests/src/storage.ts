import { AssetId, Conflict, PlaybackSessionId, type Storage, TenantId, type TextTrack } from "@vod/core";
import { Effect, Either, Option } from "effect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { StorageBackdoor } from "./backdoor.js";
import {
  aDelivery,
  anApiKey,
  anAsset,
  anEmailToken,
  anUpload,
  aSession,
  aTenant,
  aToken,
  aUser,
  aWebhook,
  uid,
} from "./fixtures.js";

export interface StorageSubject {
  readonly storage: Storage;
  readonly backdoor: StorageBackdoor;
  readonly cleanup: () => Promise<void>;
}

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect);
const attempt = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(Effect.either(effect));

/** The repositories and unit of work of any adapter set, checked through its backdoor. */
export const describeStorage = (name: string, makeSubject: () => Promise<StorageSubject>) =>
  describe(`Storage [${name}]`, () => {
    let subject: StorageSubject;
    let storage: Storage;
    let db: StorageBackdoor;
    beforeEach(async () => {
      subject = await makeSubject();
      storage = subject.storage;
      db = subject.backdoor;
    });
    afterEach(async () => subject.cleanup());

    const tenantWithUser = async () => {
      const tenant = aTenant();
      const user = aUser(tenant);
      await run(storage.tenants.insert(tenant));
      await run(storage.users.insert(user));
      return { tenant, user };
    };

    describe("tenants and users", () => {
      it("stores a tenant and a user as given", async () => {
        const { tenant, user } = await tenantWithUser();
        expect(await db.tenant(tenant.id)).toEqual(tenant);
        expect(await db.user(user.id)).toEqual(user);
        expect(await run(storage.tenants.get(tenant.id))).toEqual(Option.some(tenant));
        expect(await run(storage.users.get(tenant.id, user.id))).toEqual(Option.some(user));
      });

      it("refuses a second user with the same email in another case, and stores nothing", async () => {
        const { user } = await tenantWithUser();
        const other = aTenant();
        await run(storage.tenants.insert(other));
        const twin = aUser(other, { email: user.email.toUpperCase() });
        const result = await attempt(storage.users.insert(twin));
        expect(Either.isLeft(result) && result.left).toBeInstanceOf(Conflict);
        expect(await db.user(twin.id)).toBeUndefined();
      });

      it("finds users by email without regard to case, across tenants", async () => {
        const { user } = await tenantWithUser();
        const found = await run(storage.users.findByEmail(user.email.toUpperCase()));
        expect(Option.getOrUndefined(found)?.id).toBe(user.id);
        expect(Option.isNone(await run(storage.users.findByEmail(`nobody-${uid("x")}@example.com`)))).toBe(
          true,
        );
      });

      it("does not show a user to another tenant", async () => {
        const { user } = await tenantWithUser();
        const { tenant: other } = await tenantWithUser();
        expect(Option.isNone(await run(storage.users.get(other.id, user.id)))).toBe(true);
      });

      it("updates the password hash and the verified flag of the user", async () => {
        const { tenant, user } = await tenantWithUser();
        await run(storage.users.setPasswordHash(tenant.id, user.id, "$argon2id$new"));
        await run(storage.users.setEmailVerified(tenant.id, user.id, true));
        expect(await db.user(user.id)).toMatchObject({
          password_hash: "$argon2id$new",
          email_verified: true,
        });
        // A claimed account loses its password.
        await run(storage.users.setPasswordHash(tenant.id, user.id, null));
        expect((await db.user(user.id))?.password_hash).toBeNull();
      });

      it("links an identity once", async () => {
        const { tenant, user } = await tenantWithUser();
        const identity = {
          provider: "google" as const,
          subject: uid("sub"),
          user_id: user.id,
          tenant_id: tenant.id,
          created_at: 1,
        };
        await run(storage.identities.insert(identity));
        expect(await db.identity("google", identity.subject)).toEqual(identity);
        expect(await run(storage.identities.find("google", identity.subject))).toEqual(Option.some(identity));
        const again = await attempt(storage.identities.insert({ ...identity }));
        expect(Either.isLeft(again) && again.left).toBeInstanceOf(Conflict);
      });
    });

    describe("deleted tenants", () => {
      it("a taken slug, and a deleted tenant's slug for good, are refused to a new tenant (Conflict)", async () => {
        const { tenant } = await tenantWithUser();
        const twin = aTenant({ slug: tenant.slug });
        const taken = await attempt(storage.tenants.insert(twin));
        expect(Either.isLeft(taken) && taken.left).toBeInstanceOf(Conflict);
        expect(await run(storage.tenants.markDeleted(tenant.id, 5))).toBe(true);
        expect(await run(storage.tenants.markDeleted(tenant.id, 6))).toBe(false);
        expect((await db.tenant(tenant.id))?.status).toBe("deleted");
        await run(storage.tenants.purge(tenant.id));
        expect(await db.tenant(tenant.id)).toBeUndefined();
        const reused = await attempt(storage.tenants.insert(aTenant({ slug: tenant.slug })));
        expect(Either.isLeft(reused) && reused.left).toBeInstanceOf(Conflict);
        expect(await db.tenant(twin.id)).toBeUndefined();
        expect(await run(storage.tenants.markDeleted(tenant.id, 7))).toBe(false);
      });

      it("purges every row of the tenant in every table, and no other tenant's", async () => {
        const fill = async () => {
          const { tenant, user } = await tenantWithUser();
          const session = aSession(user);
          const asset = anAsset(tenant);
          const webhook = aWebhook(tenant);
          await run(
            storage.transaction((tx) =>
              Effect.gen(function* () {
                yield* tx.refreshSessions.insertSession(session);
                yield* tx.refreshSessions.insertToken(aToken(session));
                yield* tx.emailTokens.insert(anEmailToken(user));
                yield* tx.identities.insert({
                  provider: "google",
                  subject: uid("sub"),
                  user_id: user.id,
                  tenant_id: tenant.id,
                  created_at: 1,
                });
                yield* tx.apiKeys.insert(anApiKey(tenant));
                yield* tx.assets.insert(asset);
                yield* tx.uploads.insert(anUpload(asset));
                yield* tx.playbackSessions.insert({
                  id: PlaybackSessionId(uid("pbs")),
                  tenant_id: tenant.id,
                  asset_id: asset.id,
                  drm: false,
                  expires_at: 10,
                  created_at: 1,
                  ended_at: null,
                });
                yield* tx.contentKeys.insertIfAbsent({
                  tenant_id: tenant.id,
                  asset_id: asset.id,
                  kid: "0".repeat(32),
                  wrapped_key: "wrapped",
                  created_at: 1,
                });
                yield* tx.webhooks.insert(webhook);
                yield* tx.webhookDeliveries.insert(aDelivery(webhook));
                yield* tx.chunks.insertAll([
                  {
                    tenant_id: tenant.id,
                    asset_id: asset.id,
                    unit: "360p",
                    chunk_index: 0,
                    chunk_count: 1,
                    start_ms: 0,
                    end_ms: null,
                    done_at: null,
                  },
                ]);
              }),
            ),
          );
          await run(
            storage.idempotencyKeys.claim(tenant.id, user.id, "key", "print", {
              now: 1,
              lockedUntil: 2,
              expiresAt: 3,
            }),
          );
          return { tenant, user };
        };
        const doomed = await fill();
        const kept = await fill();
        const before = await db.rowsOfTenant(doomed.tenant.id);
        // Every kind of row was made, in as many tables as the adapter has for them.
        expect(Object.keys(before).length).toBeGreaterThanOrEqual(15);
        expect(await run(storage.tenants.markDeleted(doomed.tenant.id, 9))).toBe(true);
        await run(storage.tenants.purge(doomed.tenant.id));
        expect(await db.rowsOfTenant(doomed.tenant.id)).toStrictEqual({});
        expect(await db.rowsOfTenant(kept.tenant.id)).toStrictEqual(before);
        expect(Option.isNone(await run(storage.users.findByEmail(doomed.user.email)))).toBe(true);
        // Harmless to repeat.
        await run(storage.tenants.purge(doomed.tenant.id));
        expect(await db.user(kept.user.id)).toEqual(kept.user);
      });
    });

    describe("refresh sessions", () => {
      it("revokes a session once, keeping its first reason", async () => {
        const { user } = await tenantWithUser();
        const session = aSession(user);
        await run(storage.refreshSessions.insertSession(session));
        await run(storage.refreshSessions.revokeSession(TenantId("tnt_other"), session.id, 5, "logout"));
        expect((await db.refreshSession(session.id))?.revoked_at).toBeNull();
        expect(
          Option.isNone(await run(storage.refreshSessions.getSession(TenantId("tnt_other"), session.id))),
        ).toBe(true);
        await run(storage.refreshSessions.revokeSession(session.tenant_id, session.id, 10, "reuse_detected"));
        await run(storage.refreshSessions.revokeSession(session.tenant_id, session.id, 20, "logout"));
        expect(await run(storage.refreshSessions.getSession(session.tenant_id, session.id))).toEqual(
          Option.some({ ...session, revoked_at: 10, revoked_reason: "reuse_detected" }),
        );
        expect(await db.refreshSession(session.id)).toMatchObject({
          revoked_at: 10,
          revoked_reason: "reuse_detected",
        });
      });

      it("revokes every other live session of the user, and no one else's", async () => {
        const { user } = await tenantWithUser();
        const { user: stranger } = await tenantWithUser();
        const [keep, a, b, theirs] = [aSession(user), aSession(user), aSession(user), aSession(stranger)];
        for (const s of [keep, a, b, theirs]) await run(storage.refreshSessions.insertSession(s));
        await run(
          storage.refreshSessions.revokeUserSessions(user.tenant_id, user.id, keep.id, 5, "password_changed"),
        );
        expect((await db.refreshSession(keep.id))?.revoked_at).toBeNull();
        expect(await db.refreshSession(a.id)).toMatchObject({
          revoked_at: 5,
          revoked_reason: "password_changed",
        });
        expect(await db.refreshSession(b.id)).toMatchObject({ revoked_at: 5 });
        expect((await db.refreshSession(theirs.id))?.revoked_at).toBeNull();
        // Without an exception (a claimed account), the rest go too.
        await run(
          storage.refreshSessions.revokeUserSessions(user.tenant_id, user.id, null, 6, "account_claimed"),
        );
        expect(await db.refreshSession(keep.id)).toMatchObject({
          revoked_at: 6,
          revoked_reason: "account_claimed",
        });
        expect(await db.refreshSession(a.id)).toMatchObject({
          revoked_at: 5,
          revoked_reason: "password_changed",
        });
        expect((await db.refreshSession(theirs.id))?.revoked_at).toBeNull();
      });

      it("marks a token used exactly once", async () => {
        const { user } = await tenantWithUser();
        const session = aSession(user);
        const token = aToken(session);
        await run(storage.refreshSessions.insertSession(session));
        await run(storage.refreshSessions.insertToken(token));
        expect(await db.refreshTokensOfSession(session.id)).toEqual([token]);
        expect(await run(storage.refreshSessions.markTokenUsed(token.token_hash, 7))).toBe(true);
        expect(await run(storage.refreshSessions.markTokenUsed(token.token_hash, 8))).toBe(false);
        expect((await db.refreshTokensOfSession(session.id))[0]?.used_at).toBe(7);
        expect(await run(storage.refreshSessions.markTokenUsed(uid("unknown"), 9))).toBe(false);
      });

      it("lets exactly one of many concurrent rotations of a token win", async () => {
        const { user } = await tenantWithUser();
        const session = aSession(user);
        const token = aToken(session);
        await run(storage.refreshSessions.insertSession(session));
        await run(storage.refreshSessions.insertToken(token));
        const results = await Promise.all(
          Array.from({ length: 8 }, (_, i) =>
            run(storage.refreshSessions.markTokenUsed(token.token_hash, 100 + i)),
          ),
        );
        expect(results.filter(Boolean)).toHaveLength(1);
      });
    });

    describe("the sweep of expired tokens", () => {
      it("deletes expired email and refresh tokens of every tenant, at most `limit` a call, and keeps the rest", async () => {
        const { user } = await tenantWithUser();
        const { user: other } = await tenantWithUser();
        const [session, otherSession] = [aSession(user), aSession(other)];
        const mail = [anEmailToken(user, { expires_at: 1_000 }), anEmailToken(other, { expires_at: 2_000 })];
        const liveMail = anEmailToken(user);
        const refresh = [aToken(session, { expires_at: 1_000 }), aToken(otherSession, { expires_at: 2_000 })];
        const liveRefresh = aToken(session);
        for (const s of [session, otherSession]) await run(storage.refreshSessions.insertSession(s));
        for (const t of [...mail, liveMail]) await run(storage.emailTokens.insert(t));
        for (const t of [...refresh, liveRefresh]) await run(storage.refreshSessions.insertToken(t));

        // Other suites' tokens may be past this expiry too: counts are at least ours.
        expect(await run(storage.emailTokens.deleteExpired(2_000, 1))).toBe(1);
        expect(await run(storage.emailTokens.deleteExpired(2_000, 1_000))).toBeGreaterThanOrEqual(1);
        expect(await run(storage.emailTokens.deleteExpired(2_000, 1_000))).toBe(0);
        expect(await db.emailTokensOfUser(user.id)).toEqual([liveMail]);
        expect(await db.emailTokensOfUser(other.id)).toEqual([]);

        // Expired at 2,000: not yet at 1,999.
        expect(await run(storage.refreshSessions.deleteTokensExpired(1_999, 1_000))).toBeGreaterThanOrEqual(
          1,
        );
        expect(await db.refreshTokensOfSession(otherSession.id)).toEqual([refresh[1]]);
        expect(await run(storage.refreshSessions.deleteTokensExpired(2_000, 1_000))).toBeGreaterThanOrEqual(
          1,
        );
        expect(await db.refreshTokensOfSession(session.id)).toEqual([liveRefresh]);
        expect(await db.refreshTokensOfSession(otherSession.id)).toEqual([]);

        // What is left works as before.
        expect(
          Option.isSome(await run(storage.emailTokens.use(liveMail.token_hash, "reset_password", 3_000))),
        ).toBe(true);
        expect(await run(storage.refreshSessions.markTokenUsed(liveRefresh.token_hash, 3_000))).toBe(true);
      });
    });

    describe("tokens of account mail", () => {
      it("stores a token as given and uses it once, by its hash, before it expires", async () => {
        const { user } = await tenantWithUser();
        const token = anEmailToken(user);
        await run(storage.emailTokens.insert(token));
        expect(await db.emailTokensOfUser(user.id)).toEqual([token]);
        // Another purpose, and the expiry instant itself, do not use it.
        expect(Option.isNone(await run(storage.emailTokens.use(token.token_hash, "verify_email", 1)))).toBe(
          true,
        );
        expect(
          Option.isNone(
            await run(storage.emailTokens.use(token.token_hash, "reset_password", token.expires_at)),
          ),
        ).toBe(true);
        expect((await db.emailTokensOfUser(user.id))[0]?.used_at).toBeNull();
        expect(await run(storage.emailTokens.use(token.token_hash, "reset_password", 7))).toEqual(
          Option.some(token),
        );
        expect(Option.isNone(await run(storage.emailTokens.use(token.token_hash, "reset_password", 8)))).toBe(
          true,
        );
        expect((await db.emailTokensOfUser(user.id))[0]?.used_at).toBe(7);
        expect(Option.isNone(await run(storage.emailTokens.use(uid("unknown"), "reset_password", 9)))).toBe(
          true,
        );
      });

      it("lets exactly one of many concurrent uses of a token win", async () => {
        const { user } = await tenantWithUser();
        const token = anEmailToken(user, { purpose: "verify_email" });
        await run(storage.emailTokens.insert(token));
        const results = await Promise.all(
          Array.from({ length: 8 }, (_, i) =>
            run(storage.emailTokens.use(token.token_hash, "verify_email", 100 + i)),
          ),
        );
        expect(results.filter(Option.isSome)).toHaveLength(1);
      });

      it("spends every unused token of the user of one purpose, and no one else's", async () => {
        const { user } = await tenantWithUser();
        const { user: stranger } = await tenantWithUser();
        const [a, b, verify, theirs] = [
          anEmailToken(user),
          anEmailToken(user),
          anEmailToken(user, { purpose: "verify_email" }),
          anEmailToken(stranger),
        ];
        for (const t of [a, b, verify, theirs]) await run(storage.emailTokens.insert(t));
        await run(storage.emailTokens.useAllOfUser(TenantId("tnt_other"), user.id, "reset_password", 4));
        expect((await db.emailTokensOfUser(user.id)).every((t) => t.used_at === null)).toBe(true);
        await run(storage.emailTokens.useAllOfUser(user.tenant_id, user.id, "reset_password", 5));
        const byHash = new Map((await db.emailTokensOfUser(user.id)).map((t) => [t.token_hash, t.used_at]));
        expect(byHash.get(a.token_hash)).toBe(5);
        expect(byHash.get(b.token_hash)).toBe(5);
        expect(byHash.get(verify.token_hash)).toBeNull();
        expect((await db.emailTokensOfUser(stranger.id))[0]?.used_at).toBeNull();
      });

      it("stores nothing of a token inserted in a failed unit of work", async () => {
        const { user } = await tenantWithUser();
        const token = anEmailToken(user);
        const result = await attempt(
          storage.transaction((tx) =>
            Effect.flatMap(tx.emailTokens.insert(token), () => Effect.fail("stop" as const)),
          ),
        );
        expect(Either.isLeft(result)).toBe(true);
        expect(await db.emailTokensOfUser(user.id)).toEqual([]);
      });
    });

    describe("API keys", () => {
      it("stores the key record and finds it by hash", async () => {
        const { tenant } = await tenantWithUser();
        const key = anApiKey(tenant);
        await run(storage.apiKeys.insert(key));
        expect(await db.apiKey(key.id)).toEqual(key);
        expect(await run(storage.apiKeys.findByHash(key.key_hash))).toEqual(Option.some(key));
        expect(Option.isNone(await run(storage.apiKeys.findByHash(uid("nohash"))))).toBe(true);
      });

      it("lists a tenant's keys newest first, up to the limit", async () => {
        const { tenant } = await tenantWithUser();
        const { tenant: other } = await tenantWithUser();
        const keys = [1, 3, 2].map((t) => anApiKey(tenant, { created_at: t }));
        for (const k of [...keys, anApiKey(other)]) await run(storage.apiKeys.insert(k));
        const listed = await run(storage.apiKeys.list(tenant.id, 2));
        expect(listed.map((k) => k.created_at)).toEqual([3, 2]);
      });

      it("lists only the active or only the revoked keys when asked, and counts the active ones", async () => {
        const { tenant } = await tenantWithUser();
        const { tenant: other } = await tenantWithUser();
        const active = anApiKey(tenant, { created_at: 1 });
        const revoked = anApiKey(tenant, { created_at: 2, revoked_at: 3 });
        const expired = anApiKey(tenant, { created_at: 3, expires_at: 50 });
        const expiring = anApiKey(tenant, { created_at: 4, expires_at: 500 });
        for (const k of [active, revoked, expired, expiring, anApiKey(other)])
          await run(storage.apiKeys.insert(k));
        const ids = async (status?: "active" | "revoked") =>
          (await run(storage.apiKeys.list(tenant.id, 10, { ...(status ? { status } : {}), now: 100 }))).map(
            (k) => k.id,
          );
        expect(await ids()).toEqual([expiring.id, expired.id, revoked.id, active.id]);
        expect(await ids("active")).toEqual([expiring.id, active.id]);
        expect(await ids("revoked")).toEqual([revoked.id]);
        expect(await run(storage.apiKeys.countActive(tenant.id, 100))).toBe(2);
        expect(await run(storage.apiKeys.countActive(tenant.id, 600))).toBe(1);
        expect(await run(storage.apiKeys.countActive(other.id, 100))).toBe(1);
      });

      it("makes transactions that lock the tenant take turns: a count and its insert are one decision", async () => {
        const { tenant } = await tenantWithUser();
        const createUnderTwo = () =>
          storage.transaction((tx) =>
            Effect.gen(function* () {
              yield* tx.tenants.lock(tenant.id);
              if ((yield* tx.apiKeys.countActive(tenant.id, 0)) >= 2) return false;
              yield* tx.apiKeys.insert(anApiKey(tenant));
              return true;
            }),
          );
        const made = await Promise.all(Array.from({ length: 6 }, () => run(createUnderTwo())));
        expect(made.filter(Boolean)).toHaveLength(2);
        expect(await run(storage.apiKeys.countActive(tenant.id, 0))).toBe(2);
      });

      it("revokes once, touches last_used_at, and keeps other tenants out", async () => {
        const { tenant } = await tenantWithUser();
        const { tenant: other } = await tenantWithUser();
        const key = anApiKey(tenant);
        await run(storage.apiKeys.insert(key));
        await run(storage.apiKeys.revoke(other.id, key.id, 1));
        expect((await db.apiKey(key.id))?.revoked_at).toBeNull();
        expect(Option.isNone(await run(storage.apiKeys.get(other.id, key.id)))).toBe(true);
        await run(storage.apiKeys.revoke(tenant.id, key.id, 5));
        await run(storage.apiKeys.revoke(tenant.id, key.id, 9));
        await run(storage.apiKeys.touch(tenant.id, key.id, 6));
        expect(await db.apiKey(key.id)).toMatchObject({ revoked_at: 5, last_used_at: 6 });
      });

      it("revokes every live key of a tenant at once, keeping earlier revocations and other tenants' keys", async () => {
        const { tenant } = await tenantWithUser();
        const { tenant: other } = await tenantWithUser();
        const revokedBefore = anApiKey(tenant, { revoked_at: 3 });
        const live = [anApiKey(tenant, { created_at: 1 }), anApiKey(tenant, { created_at: 2 })];
        const others = anApiKey(other);
        for (const k of [revokedBefore, ...live, others]) await run(storage.apiKeys.insert(k));
        expect(await run(storage.apiKeys.revokeAll(tenant.id, 7))).toBe(2);
        for (const k of live) expect((await db.apiKey(k.id))?.revoked_at).toBe(7);
        expect((await db.apiKey(revokedBefore.id))?.revoked_at).toBe(3);
        expect((await db.apiKey(others.id))?.revoked_at).toBeNull();
        expect(await run(storage.apiKeys.revokeAll(tenant.id, 8))).toBe(0);
      });
    });

    describe("assets", () => {
      it("stores and updates an asset, only within its tenant", async () => {
        const { tenant } = await tenantWithUser();
        const { tenant: other } = await tenantWithUser();
        const asset = anAsset(tenant, { title: "a" });
        await run(storage.assets.insert(asset));
        expect(await db.asset(asset.id)).toEqual(asset);
        expect(Option.isNone(await run(storage.assets.get(other.id, asset.id)))).toBe(true);
        await run(storage.assets.update({ ...asset, tenant_id: other.id, title: "stolen" }));
        expect((await db.asset(asset.id))?.title).toBe("a");
        const uploaded = {
          ...asset,
          status: "uploaded" as const,
          origin_size_bytes: 9,
          checksum_sha256: "ab",
        };
        await run(storage.assets.update(uploaded));
        expect(await db.asset(asset.id)).toEqual(uploaded);
        expect(await run(storage.assets.get(tenant.id, asset.id))).toEqual(Option.some(uploaded));
      });

      it("lists newest first by (created_at, id), strictly after a key, filtered by status", async () => {
        const { tenant } = await tenantWithUser();
        const rows = [
          anAsset(tenant, { id: AssetId("ast_a"), created_at: 10 }),
          anAsset(tenant, { id: AssetId("ast_b"), created_at: 20 }),
          anAsset(tenant, { id: AssetId("ast_c"), created_at: 20, status: "uploaded" }),
          anAsset(tenant, { id: AssetId("ast_d"), created_at: 30 }),
        ].map((a) => ({ ...a, id: AssetId(`${a.id}_${tenant.id}`) }));
        for (const a of rows) await run(storage.assets.insert(a));
        const ids = (list: ReadonlyArray<{ id: string }>) => list.map((a) => a.id.slice(0, 5));
        expect(ids(await run(storage.assets.list(tenant.id, { limit: 10 })))).toEqual([
          "ast_d",
          "ast_c",
          "ast_b",
          "ast_a",
        ]);
        const after = rows[2]!;
        expect(ids(await run(storage.assets.list(tenant.id, { limit: 10, after })))).toEqual([
          "ast_b",
          "ast_a",
        ]);
        expect(ids(await run(storage.assets.list(tenant.id, { limit: 1, after })))).toEqual(["ast_b"]);
        expect(ids(await run(storage.assets.list(tenant.id, { limit: 10, status: "uploaded" })))).toEqual([
          "ast_c",
        ]);
      });
    });

    describe("asset details and deletion", () => {
      it("writes only the given details; the processing update leaves them as they are", async () => {
        const { tenant } = await tenantWithUser();
        const { tenant: other } = await tenantWithUser();
        const asset = anAsset(tenant, { title: "a" });
        await run(storage.assets.insert(asset));
        const renamed = await run(storage.assets.updateDetails(tenant.id, asset.id, { title: "b" }));
        expect(renamed).toEqual(Option.some({ ...asset, title: "b" }));
        expect(
          Option.isNone(await run(storage.assets.updateDetails(other.id, asset.id, { title: "x" }))),
        ).toBe(true);
        const published = { visibility: "public" as const, published_at: 5 };
        await run(storage.assets.updateDetails(tenant.id, asset.id, published));
        // A processing run that read the asset before the PATCH writes its state, not its old title.
        await run(storage.assets.update({ ...asset, status: "uploaded" }));
        expect(await db.asset(asset.id)).toEqual({ ...asset, title: "b", ...published, status: "uploaded" });
        expect(await run(storage.assets.updateDetails(tenant.id, asset.id, {}))).toEqual(
          Option.some({ ...asset, title: "b", ...published, status: "uploaded" }),
        );
      });

      it("deletes an asset once, within its tenant: then no read, list or update sees it", async () => {
        const { tenant } = await tenantWithUser();
        const { tenant: other } = await tenantWithUser();
        const asset = anAsset(tenant);
        const kept = anAsset(tenant);
        await run(storage.assets.insert(asset));
        await run(storage.assets.insert(kept));
        expect(await run(storage.assets.remove(other.id, asset.id, 1))).toBe(false);
        expect(await run(storage.assets.remove(tenant.id, asset.id, 1))).toBe(true);
        expect(await run(storage.assets.remove(tenant.id, asset.id, 2))).toBe(false);
        expect(Option.isNone(await run(storage.assets.get(tenant.id, asset.id)))).toBe(true);
        expect((await run(storage.assets.list(tenant.id, { limit: 10 }))).map((a) => a.id)).toEqual([
          kept.id,
        ]);
        await run(storage.assets.update({ ...asset, status: "ready" }));
        expect(
          Option.isNone(await run(storage.assets.updateDetails(tenant.id, asset.id, { title: "z" }))),
        ).toBe(true);
        expect(Option.isNone(await run(storage.assets.get(tenant.id, asset.id)))).toBe(true);
        expect(await db.asset(asset.id)).toBeUndefined();
      });

      it("ends every playback session of an asset and answers those not expired by then", async () => {
        const { tenant } = await tenantWithUser();
        const asset = anAsset(tenant);
        await run(storage.assets.insert(asset));
        const session = (over: { expires_at: number; ended_at: number | null }) => ({
          id: PlaybackSessionId(uid("ps")),
          tenant_id: tenant.id,
          asset_id: asset.id,
          drm: false,
          created_at: 1,
          ...over,
        });
        const live = session({ expires_at: 1_000, ended_at: null });
        const endedBefore = session({ expires_at: 1_000, ended_at: 50 });
        const expired = session({ expires_at: 10, ended_at: null });
        for (const s of [live, endedBefore, expired]) await run(storage.playbackSessions.insert(s));
        const answered = await run(storage.playbackSessions.endForAsset(tenant.id, asset.id, 100, 20));
        expect([...answered].sort((a, b) => a.id.localeCompare(b.id))).toEqual(
          [{ ...live, ended_at: 100 }, endedBefore].sort((a, b) => a.id.localeCompare(b.id)),
        );
        expect((await db.playbackSession(expired.id))?.ended_at).toBe(100);
        expect((await db.playbackSession(endedBefore.id))?.ended_at).toBe(50);
      });
    });

    describe("idempotency keys", () => {
      const times = (now: number) => ({ now, lockedUntil: now + 100, expiresAt: now + 1_000 });

      it("keeps a key per principal: another principal of the tenant with the same key claims its own", async () => {
        const { tenant } = await tenantWithUser();
        const keys = storage.idempotencyKeys;
        expect(await run(keys.claim(tenant.id, "api_key:a", "k", "f", times(0)))).toEqual({
          _tag: "Claimed",
        });
        await run(
          keys.complete(tenant.id, "api_key:a", "k", "f", { status: 201, body: { key: "sealed:x" } }),
        );
        expect(await run(keys.claim(tenant.id, "api_key:b", "k", "f", times(1)))).toEqual({
          _tag: "Claimed",
        });
        expect(await run(keys.claim(tenant.id, "user:a", "k", "f", times(1)))).toEqual({ _tag: "Claimed" });
        // Releasing one principal's claim leaves the others' records as they are.
        await run(keys.release(tenant.id, "api_key:b", "k", "f"));
        expect(await run(keys.claim(tenant.id, "api_key:a", "k", "f", times(2)))).toEqual({
          _tag: "Done",
          fingerprint: "f",
          response: { status: 201, body: { key: "sealed:x" } },
        });
        expect(await run(keys.claim(tenant.id, "user:a", "k", "f", times(2)))).toEqual({
          _tag: "Running",
          fingerprint: "f",
        });
        expect(await run(keys.claim(tenant.id, "api_key:b", "k", "g", times(2)))).toEqual({
          _tag: "Claimed",
        });
      });

      it("claims a key once; then answers running, and after completion the stored response", async () => {
        const { tenant } = await tenantWithUser();
        const { tenant: other } = await tenantWithUser();
        const keys = storage.idempotencyKeys;
        expect(await run(keys.claim(tenant.id, "p", "k", "f1", times(0)))).toEqual({ _tag: "Claimed" });
        expect(await run(keys.claim(tenant.id, "p", "k", "f2", times(1)))).toEqual({
          _tag: "Running",
          fingerprint: "f1",
        });
        // Keys are per tenant.
        expect(await run(keys.claim(other.id, "p", "k", "f2", times(1)))).toEqual({ _tag: "Claimed" });
        const response = { status: 201, body: { asset: { id: "ast_1", title: "é" } } };
        await run(keys.complete(tenant.id, "p", "k", "f1", response));
        expect(await run(keys.claim(tenant.id, "p", "k", "f1", times(2)))).toEqual({
          _tag: "Done",
          fingerprint: "f1",
          response,
        });
        await run(keys.complete(other.id, "p", "k", "f2", { status: 204, body: null }));
        expect(await run(keys.claim(other.id, "p", "k", "f2", times(2)))).toEqual({
          _tag: "Done",
          fingerprint: "f2",
          response: { status: 204, body: null },
        });
      });

      it("lets exactly one of many concurrent claims win", async () => {
        const { tenant } = await tenantWithUser();
        const claims = await Promise.all(
          Array.from({ length: 10 }, () =>
            run(storage.idempotencyKeys.claim(tenant.id, "p", "race", "f", times(0))),
          ),
        );
        expect(claims.filter((c) => c._tag === "Claimed")).toHaveLength(1);
      });

      it("frees a released key, takes over a running one past its lock, and forgets expired records", async () => {
        const { tenant } = await tenantWithUser();
        const keys = storage.idempotencyKeys;
        await run(keys.claim(tenant.id, "p", "r", "f", times(0)));
        await run(keys.release(tenant.id, "p", "r", "f"));
        expect(await run(keys.claim(tenant.id, "p", "r", "g", times(1)))).toEqual({ _tag: "Claimed" });
        // Its node died: past lockedUntil another request may run.
        expect(await run(keys.claim(tenant.id, "p", "r", "h", times(101)))).toEqual({ _tag: "Claimed" });
        await run(keys.complete(tenant.id, "p", "r", "h", { status: 200, body: {} }));
        // Past expiresAt the record counts as absent, and the sweep deletes it.
        expect(await run(keys.claim(tenant.id, "p", "r", "i", times(5_000)))).toEqual({ _tag: "Claimed" });
        await run(keys.claim(tenant.id, "p", "s", "f", times(0)));
        expect(await run(keys.deleteExpired(3_000, 100))).toBeGreaterThanOrEqual(1);
        expect(await run(keys.claim(tenant.id, "p", "s", "g", times(3_001)))).toEqual({ _tag: "Claimed" });
        expect(await run(keys.claim(tenant.id, "p", "r", "j", times(5_001)))).toEqual({
          _tag: "Running",
          fingerprint: "i",
        });
      });
    });

    describe("upload sessions and jobs", () => {
      const assetOf = async () => {
        const { tenant } = await tenantWithUser();
        const asset = anAsset(tenant);
        await run(storage.assets.insert(asset));
        return asset;
      };

      it("stores a session and allows one open session per asset", async () => {
        const asset = await assetOf();
        const session = anUpload(asset);
        await run(storage.uploads.insert(session));
        expect(await db.upload(session.id)).toEqual(session);
        expect(await run(storage.uploads.get(asset.tenant_id, session.id))).toEqual(Option.some(session));
        expect(Option.isNone(await run(storage.uploads.get(TenantId("tnt_other"), session.id)))).toBe(true);
        const second = await attempt(storage.uploads.insert(anUpload(asset)));
        expect(Either.isLeft(second) && second.left).toBeInstanceOf(Conflict);
        expect(await run(storage.uploads.findOpen(asset.tenant_id, asset.id))).toEqual(Option.some(session));
      });

      it("closes or completes a created session once, and then allows a new one", async () => {
        const asset = await assetOf();
        const session = anUpload(asset);
        await run(storage.uploads.insert(session));
        const parts = [{ number: 1, size: 8, etag: "e1" }];
        expect(await run(storage.uploads.complete(asset.tenant_id, session.id, 42, parts))).toBe(true);
        expect(await run(storage.uploads.complete(asset.tenant_id, session.id, 43, parts))).toBe(false);
        expect(await run(storage.uploads.close(asset.tenant_id, session.id, "aborted"))).toBe(false);
        expect(await db.upload(session.id)).toMatchObject({
          status: "completed",
          completed_at: 42,
          completed_parts: parts,
        });
        const next = anUpload(asset);
        await run(storage.uploads.insert(next));
        expect(await run(storage.uploads.close(asset.tenant_id, next.id, "aborted"))).toBe(true);
        expect((await db.upload(next.id))?.status).toBe("aborted");
        expect(Option.isNone(await run(storage.uploads.findOpen(asset.tenant_id, asset.id)))).toBe(true);
      });

      it("lists created sessions past their expiry, oldest first", async () => {
        const asset = await assetOf();
        const other = await assetOf();
        const late = anUpload(asset, { expires_at: 2_000 });
        const early = anUpload(other, { expires_at: 1_000 });
        await run(storage.uploads.insert(late));
        await run(storage.uploads.insert(early));
        const expired = await run(storage.uploads.listExpired(2_000, 1_000));
        const mine = expired.filter((u) => u.id === late.id || u.id === early.id).map((u) => u.id);
        expect(mine).toEqual([early.id, late.id]);
        expect((await run(storage.uploads.listExpired(1_500, 1_000))).map((u) => u.id)).not.toContain(
          late.id,
        );
      });

      it("enqueues a job only when its unit of work commits", async () => {
        const asset = await assetOf();
        const kept = { tenant_id: asset.tenant_id, asset_id: asset.id };
        const dropped = { tenant_id: asset.tenant_id, asset_id: AssetId(uid("ast")) };
        await run(storage.transaction((tx) => tx.jobs.enqueue("process-asset", kept)));
        await attempt(
          storage.transaction((tx) =>
            Effect.zipRight(tx.jobs.enqueue("process-asset", dropped), Effect.fail("boom")),
          ),
        );
        const jobs = await db.jobs();
        // Compared by field: a JSON column need not keep the keys' order.
        const same = (a: unknown, b: typeof kept) =>
          (a as typeof kept).tenant_id === b.tenant_id && (a as typeof kept).asset_id === b.asset_id;
        expect(jobs.filter((j) => same(j.data, kept)).map((j) => j.name)).toEqual(["process-asset"]);
        expect(jobs.filter((j) => same(j.data, dropped))).toHaveLength(0);
      });
    });

    describe("the chunk ledger", () => {
      const ledgerOf = async (units: ReadonlyArray<string>, count: number) => {
        const { tenant } = await tenantWithUser();
        const asset = anAsset(tenant);
        await run(storage.assets.insert(asset));
        const chunks = units.flatMap((unit) =>
          Array.from({ length: count }, (_, i) => ({
            tenant_id: tenant.id,
            asset_id: asset.id,
            unit,
            chunk_index: i,
            chunk_count: count,
            start_ms: i * 6_000,
            end_ms: i === count - 1 ? null : (i + 1) * 6_000,
            done_at: null,
          })),
        );
        return { asset, chunks };
      };

      it("records an asset's ledger once, lists it by unit and index, within its tenant", async () => {
        const { asset, chunks } = await ledgerOf(["720p,480p", "360p"], 3);
        expect(await run(storage.chunks.insertAll([...chunks].reverse()))).toBe(true);
        expect(await run(storage.chunks.insertAll(chunks))).toBe(false);
        const listed = await run(storage.chunks.list(asset.tenant_id, asset.id));
        expect(listed).toEqual([...chunks.slice(3), ...chunks.slice(0, 3)]);
        expect(await run(storage.chunks.list(TenantId("tnt_other"), asset.id))).toEqual([]);
      });

      it("marks a chunk done once and counts what is left of its unit alone", async () => {
        const { asset, chunks } = await ledgerOf(["360p", "240p"], 2);
        await run(storage.chunks.insertAll(chunks));
        const mark = (unit: string, index: number, at: number) =>
          run(storage.transaction((tx) => tx.chunks.markDone(asset.tenant_id, asset.id, unit, index, at)));
        expect(await mark("360p", 1, 5)).toEqual({ marked: true, left: 1 });
        expect(await mark("360p", 1, 6)).toEqual({ marked: false, left: 1 });
        expect(await mark("360p", 0, 7)).toEqual({ marked: true, left: 0 });
        expect(await mark("360p", 9, 8)).toEqual({ marked: false, left: 0 });
        const listed = await run(storage.chunks.list(asset.tenant_id, asset.id));
        expect(listed.map((c) => [c.unit, c.chunk_index, c.done_at])).toEqual([
          ["240p", 0, null],
          ["240p", 1, null],
          ["360p", 0, 7],
          ["360p", 1, 5],
        ]);
      });

      it("lets exactly one of the transactions marking a unit's last chunks at once see none left", async () => {
        const { asset, chunks } = await ledgerOf(["360p"], 6);
        await run(storage.chunks.insertAll(chunks));
        const results = await Promise.all(
          chunks.map((c, i) =>
            run(
              storage.transaction((tx) =>
                tx.chunks.markDone(asset.tenant_id, asset.id, c.unit, c.chunk_index, 100 + i),
              ),
            ),
          ),
        );
        expect(results.every((r) => r.marked)).toBe(true);
        expect(results.filter((r) => r.left === 0)).toHaveLength(1);
      });
    });

    describe("text tracks", () => {
      const aTrack = (
        asset: { tenant_id: string; id: string },
        over: Partial<TextTrack> = {},
      ): TextTrack => ({
        id: uid("trk"),
        tenant_id: asset.tenant_id,
        asset_id: asset.id,
        type: "text",
        language_code: "en",
        name: "English",
        closed_captions: false,
        status: "ready",
        created_at: 1_000,
        deleted_at: null,
        ...over,
      });

      it("stores an asset's tracks, lists and counts the live ones oldest first, removes each once, within its tenant and asset", async () => {
        const { tenant } = await tenantWithUser();
        const asset = anAsset(tenant);
        const sibling = anAsset(tenant);
        for (const a of [asset, sibling]) await run(storage.assets.insert(a));
        const late = aTrack(asset, { created_at: 2_000, language_code: "pt-BR", closed_captions: true });
        const early = aTrack(asset, { created_at: 1_000, name: 'Captions "quoted" 字幕' });
        const elsewhere = aTrack(sibling);
        for (const t of [late, early, elsewhere]) await run(storage.textTracks.insert(t));

        expect(await run(storage.textTracks.list(tenant.id, asset.id))).toEqual([early, late]);
        expect(await run(storage.textTracks.count(tenant.id, asset.id))).toBe(2);
        expect(await run(storage.textTracks.get(tenant.id, asset.id, late.id))).toEqual(Option.some(late));
        expect(await db.textTrack(late.id)).toEqual(late);
        // Another tenant's or another asset's id finds nothing, and removes nothing.
        expect(await run(storage.textTracks.list("tnt_other", asset.id))).toEqual([]);
        expect(await run(storage.textTracks.get(tenant.id, sibling.id, late.id))).toEqual(Option.none());
        expect(await run(storage.textTracks.remove("tnt_other", asset.id, late.id, 5))).toBe(false);
        expect(await run(storage.textTracks.remove(tenant.id, sibling.id, late.id, 5))).toBe(false);

        expect(await run(storage.textTracks.remove(tenant.id, asset.id, late.id, 3_000))).toBe(true);
        expect(await run(storage.textTracks.remove(tenant.id, asset.id, late.id, 4_000))).toBe(false);
        expect(await run(storage.textTracks.list(tenant.id, asset.id))).toEqual([early]);
        expect(await run(storage.textTracks.count(tenant.id, asset.id))).toBe(1);
        expect(await run(storage.textTracks.get(tenant.id, asset.id, late.id))).toEqual(Option.none());
        expect(await db.textTrack(late.id)).toEqual({ ...late, deleted_at: 3_000 });
        expect(await run(storage.textTracks.count(tenant.id, sibling.id))).toBe(1);
      });
    });

    describe("webhooks and their deliveries", () => {
      it("stores webhooks, lists the live ones newest first, and deletes each once, within its tenant", async () => {
        const { tenant } = await tenantWithUser();
        const { tenant: other } = await tenantWithUser();
        const old = aWebhook(tenant, { created_at: 10, events: ["asset.ready", "asset.failed"] });
        const recent = aWebhook(tenant, { created_at: 20, description: "all" });
        for (const w of [old, recent]) await run(storage.webhooks.insert(w));
        expect(await run(storage.webhooks.get(tenant.id, old.id))).toEqual(Option.some(old));
        expect(Option.isNone(await run(storage.webhooks.get(other.id, old.id)))).toBe(true);
        expect(await run(storage.webhooks.list(tenant.id, 10))).toEqual([recent, old]);
        expect(await run(storage.webhooks.list(tenant.id, 1))).toEqual([recent]);
        expect(await run(storage.webhooks.list(other.id, 10))).toEqual([]);
        expect(await run(storage.webhooks.remove(other.id, old.id, 30))).toBe(false);
        expect(await run(storage.webhooks.remove(tenant.id, old.id, 30))).toBe(true);
        expect(await run(storage.webhooks.remove(tenant.id, old.id, 31))).toBe(false);
        expect(Option.isNone(await run(storage.webhooks.get(tenant.id, old.id)))).toBe(true);
        expect(await run(storage.webhooks.list(tenant.id, 10))).toEqual([recent]);
        expect(await run(storage.webhooks.count(tenant.id))).toBe(1);
        expect(await run(storage.webhooks.count(other.id))).toBe(0);
      });

      it("deletes every live webhook of a tenant at once, keeping earlier deletions and other tenants' webhooks", async () => {
        const { tenant } = await tenantWithUser();
        const { tenant: other } = await tenantWithUser();
        const deletedBefore = aWebhook(tenant, { deleted_at: 4 });
        const live = [aWebhook(tenant, { created_at: 1 }), aWebhook(tenant, { created_at: 2 })];
        const others = aWebhook(other);
        for (const w of [deletedBefore, ...live, others]) await run(storage.webhooks.insert(w));
        expect(await run(storage.webhooks.removeAll(tenant.id, 9))).toBe(2);
        expect(await run(storage.webhooks.list(tenant.id, 10))).toEqual([]);
        for (const w of live) expect(await db.webhook(w.id)).toEqual({ ...w, deleted_at: 9 });
        expect((await db.webhook(deletedBefore.id))?.deleted_at).toBe(4);
        expect(await run(storage.webhooks.list(other.id, 10))).toEqual([others]);
        expect(await run(storage.webhooks.removeAll(tenant.id, 10))).toBe(0);
      });

      it("lists the live webhooks subscribed to a type, or to every type", async () => {
        const { tenant } = await tenantWithUser();
        const { tenant: other } = await tenantWithUser();
        const ready = aWebhook(tenant, { events: ["asset.ready"] });
        const all = aWebhook(tenant, { events: ["*"] });
        const failed = aWebhook(tenant, { events: ["asset.failed"] });
        const gone = aWebhook(tenant, { events: ["asset.ready"] });
        const theirs = aWebhook(other, { events: ["*"] });
        for (const w of [ready, all, failed, gone, theirs]) await run(storage.webhooks.insert(w));
        await run(storage.webhooks.remove(tenant.id, gone.id, 1));
        const ids = async (type: "asset.ready" | "upload.aborted") =>
          (await run(storage.webhooks.listSubscribed(tenant.id, type))).map((w) => w.id).sort();
        expect(await ids("asset.ready")).toEqual([ready.id, all.id].sort());
        expect(await ids("upload.aborted")).toEqual([all.id]);
      });

      it("stores deliveries, lists a webhook's newest first, and records each attempt once", async () => {
        const { tenant } = await tenantWithUser();
        const { tenant: other } = await tenantWithUser();
        const webhook = aWebhook(tenant);
        const another = aWebhook(tenant);
        for (const w of [webhook, another]) await run(storage.webhooks.insert(w));
        const first = aDelivery(webhook, { created_at: 10 });
        const second = aDelivery(webhook, { created_at: 20 });
        const elsewhere = aDelivery(another, { created_at: 30 });
        for (const d of [first, second, elsewhere]) await run(storage.webhookDeliveries.insert(d));
        expect(await run(storage.webhookDeliveries.get(tenant.id, first.id))).toEqual(Option.some(first));
        expect(Option.isNone(await run(storage.webhookDeliveries.get(other.id, first.id)))).toBe(true);
        expect(await run(storage.webhookDeliveries.listByWebhook(tenant.id, webhook.id, 10))).toEqual([
          second,
          first,
        ]);
        expect(await run(storage.webhookDeliveries.listByWebhook(other.id, webhook.id, 10))).toEqual([]);

        const retry = { status: "pending", attempts: 1, last_status_code: 500, next_attempt_at: 99 } as const;
        expect(await run(storage.webhookDeliveries.recordAttempt(other.id, first.id, 0, retry))).toBe(false);
        expect(await run(storage.webhookDeliveries.recordAttempt(tenant.id, first.id, 0, retry))).toBe(true);
        // A second run of the same attempt finds it recorded already.
        expect(await run(storage.webhookDeliveries.recordAttempt(tenant.id, first.id, 0, retry))).toBe(false);
        const done = {
          status: "succeeded",
          attempts: 2,
          last_status_code: 204,
          next_attempt_at: null,
        } as const;
        expect(await run(storage.webhookDeliveries.recordAttempt(tenant.id, first.id, 1, done))).toBe(true);
        expect(await run(storage.webhookDeliveries.get(tenant.id, first.id))).toEqual(
          Option.some({ ...first, ...done }),
        );
        // A settled delivery takes no more attempts.
        const again = { ...done, attempts: 3 };
        expect(await run(storage.webhookDeliveries.recordAttempt(tenant.id, first.id, 2, again))).toBe(false);
      });

      it("keeps a delivery and its job only when the unit of work commits", async () => {
        const { tenant } = await tenantWithUser();
        const webhook = aWebhook(tenant);
        await run(storage.webhooks.insert(webhook));
        const kept = aDelivery(webhook);
        const dropped = aDelivery(webhook);
        await run(
          storage.transaction((tx) =>
            Effect.zipRight(
              tx.webhookDeliveries.insert(kept),
              tx.jobs.enqueue(
                "deliver-webhook",
                { tenant_id: kept.tenant_id, delivery_id: kept.id, attempts: 0 },
                { delayMs: 60_000 },
              ),
            ),
          ),
        );
        await attempt(
          storage.transaction((tx) =>
            Effect.zipRight(tx.webhookDeliveries.insert(dropped), Effect.fail("boom")),
          ),
        );
        expect(Option.isSome(await run(storage.webhookDeliveries.get(tenant.id, kept.id)))).toBe(true);
        expect(Option.isNone(await run(storage.webhookDeliveries.get(tenant.id, dropped.id)))).toBe(true);
        const jobs = (await db.jobs()).filter((j) => j.name === "deliver-webhook");
        const ids = jobs.map((j) => (j.data as { delivery_id: string }).delivery_id);
        expect(ids).toContain(kept.id);
        expect(ids).not.toContain(dropped.id);
      });
    });

    describe("transactions", () => {
      it("commits every write of a successful unit of work", async () => {
        const tenant = aTenant();
        const user = aUser(tenant);
        await run(
          storage.transaction((tx) =>
            Effect.gen(function* () {
              yield* tx.tenants.insert(tenant);
              yield* tx.users.insert(user);
            }),
          ),
        );
        expect(await db.tenant(tenant.id)).toEqual(tenant);
        expect(await db.user(user.id)).toEqual(user);
      });

      it("stores none of the writes of a failed unit of work", async () => {
        const { user: existing } = await tenantWithUser();
        const tenant = aTenant();
        const user = aUser(tenant, { email: existing.email });
        const result = await attempt(
          storage.transaction((tx) =>
            Effect.gen(function* () {
              yield* tx.tenants.insert(tenant);
              yield* tx.users.insert(user);
            }),
          ),
        );
        expect(Either.isLeft(result) && result.left).toBeInstanceOf(Conflict);
        expect(await db.tenant(tenant.id)).toBeUndefined();
        expect(await db.user(user.id)).toBeUndefined();
      });

      it("rolls back when the work fails with its own error", async () => {
        const tenant = aTenant();
        const result = await attempt(
          storage.transaction((tx) =>
            Effect.zipRight(tx.tenants.insert(tenant), Effect.fail("boom" as const)),
          ),
        );
        expect(result).toEqual(Either.left("boom"));
        expect(await db.tenant(tenant.id)).toBeUndefined();
      });
    });
  });

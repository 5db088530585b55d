import { renditionKey, TenantId, tenantPrefixes } from "@vod/core";
import { describe, expect, it } from "vitest";
import {
  createApiKey,
  createAsset,
  credentialOptions,
  DEFAULT_PASSWORD,
  expectError,
  expectInvalidFields,
  expectNoContent,
  expectStatus,
  type GoogleSignedIn,
  type Harness,
  type MakeHttpSubject,
  MINUTE,
  randomIp,
  sendTo,
  sharedSubject,
  signUp,
  startUpload,
  uniqueEmail,
} from "./client.js";
import { type CreatedPlayback, untilReady, uploadAndComplete } from "./playback.js";

const deleteTenant = (h: Harness, bearer: string, json?: unknown) =>
  h.api.del("/v1/tenant", { bearer, ...(json === undefined ? {} : { json }), ip: randomIp() });

/** Polls the stored state until `done` holds: the deletion job runs on the host's worker. */
const eventually = async (what: string, done: () => Promise<boolean>) => {
  for (let i = 0; i < 600; i++) {
    if (await done()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`never happened: ${what}`);
};

/**
 * A tenant with something in every place a tenant leaves data: keys, a webhook and its
 * deliveries, a ready asset with a text track, a playback session and telemetry, an asset with an
 * open upload holding a part.
 */
const populatedTenant = async (h: Harness) => {
  const owner = await signUp(h.api);
  const bearer = { bearer: owner.access_token };
  const key = await createApiKey(h.api, bearer, ["write"]);
  const write = { apiKey: key.key };
  expectStatus(
    await h.api.post("/v1/webhooks", {
      ...credentialOptions(bearer),
      json: { url: "http://127.0.0.1:9/hook", events: ["*"] },
    }),
    201,
  );
  const ready = await createAsset(h.api, write, { title: "ready" });
  await uploadAndComplete(h.api, write, ready.id);
  await untilReady(h.api, write, ready.id);
  const played = expectStatus(
    await h.api.post<CreatedPlayback>("/v1/playback/sessions", {
      ...credentialOptions(write),
      json: { asset_id: ready.id },
    }),
    201,
  ).body;
  expectStatus(
    await h.api.post(`/v1/assets/${ready.id}/tracks`, {
      ...credentialOptions(write),
      json: { type: "text", language_code: "en", content: "WEBVTT\n\n00:00.000 --> 00:01.000\nHello\n" },
    }),
    201,
  );
  const beacons = await fetch(played.urls.telemetry, {
    method: "POST",
    headers: { "content-type": "text/plain" },
    body: JSON.stringify({ token: played.token, events: [{ event: "play", ts_ms: 1, playhead_ms: 0 }] }),
  });
  expect(beacons.status).toBe(204);
  const half = await createAsset(h.api, write, { title: "half uploaded" });
  const bytes = new Uint8Array(2_000).fill(5);
  const upload = await startUpload(h.api, write, { asset_id: half.id, size_bytes: bytes.byteLength });
  const [part] = upload.parts;
  if (part === undefined) throw new Error("no part URL");
  expectStatus(await sendTo("PUT", part.url, { body: bytes }), 200);
  return { owner, write, ready, played, upload, part, bytes };
};

const objectsOf = async (h: Harness, tenantId: string) =>
  (await Promise.all(tenantPrefixes(tenantId).map((prefix) => h.objects.keysUnder(prefix)))).flat();

/** DELETE /v1/tenant and its job (DECISIONS "Backups, upgrades and deleting a tenant"). */
export const describeTenantDeletion = (makeSubject: MakeHttpSubject): void => {
  describe("tenant deletion", () => {
    const subject = sharedSubject(makeSubject, {
      VOD_WORKER_CONCURRENCY: "1",
      VOD_WEBHOOKS_ALLOW_PRIVATE: "true",
    });

    it("the owner deletes the tenant with the password (204): every credential refused at once; after the job no row and no object of it, another tenant untouched, the email free again", async () => {
      const h = subject();
      const doomed = await populatedTenant(h);
      const kept = await populatedTenant(h);
      const tenantId = doomed.owner.tenant.id;
      expect(Object.keys(await h.backdoor.rowsOfTenant(tenantId)).length).toBeGreaterThan(5);
      expect(await objectsOf(h, tenantId)).toContain(renditionKey(tenantId, doomed.ready.id, "master.m3u8"));
      expect(await h.telemetryEvents(doomed.played.session.id)).toHaveLength(1);
      const keptRows = await h.backdoor.rowsOfTenant(kept.owner.tenant.id);
      const keptObjects = await objectsOf(h, kept.owner.tenant.id);

      expectNoContent(await deleteTenant(h, doomed.owner.access_token, { password: DEFAULT_PASSWORD }));

      // At once, before the job: the access token, the key, the refresh token, the password, the
      // playback token and the part URL.
      expectError(await h.api.get("/v1/auth/me", { bearer: doomed.owner.access_token }), 401, "unauthorized");
      expectError(await h.api.get("/v1/assets", credentialOptions(doomed.write)), 401, "unauthorized");
      expectError(
        await h.api.post("/v1/auth/refresh", {
          json: { refresh_token: doomed.owner.refresh_token },
          ip: randomIp(),
        }),
        401,
        "unauthorized",
      );
      expectError(
        await h.api.post("/v1/auth/login", {
          json: { email: doomed.owner.email, password: DEFAULT_PASSWORD },
          ip: randomIp(),
        }),
        401,
        "unauthorized",
      );
      expectError(await sendTo("GET", doomed.played.urls.manifest), 401, "unauthorized");
      if (!h.objectStore?.signsPartUrls)
        expectError(await sendTo("PUT", doomed.part.url, { body: doomed.bytes }), 401, "unauthorized");
      // Marked deleted, or gone already where the job was quick.
      expect(["deleted", undefined]).toContain((await h.backdoor.tenant(tenantId))?.status);

      await eventually("the deletion job removes every row of the tenant", async () => {
        const rows = await h.backdoor.rowsOfTenant(tenantId);
        return Object.keys(rows).length === 0;
      });
      await eventually(
        "and every object under its prefixes",
        async () => (await objectsOf(h, tenantId)).length === 0,
      );
      expect(await h.backdoor.tenant(tenantId)).toBeUndefined();
      expect(await h.telemetryEvents(doomed.played.session.id)).toStrictEqual([]);
      expect(await h.objects.storedParts(doomed.upload.id)).toStrictEqual([]);
      // Still refused once the rows are gone.
      expectError(await h.api.get("/v1/assets", credentialOptions(doomed.write)), 401, "unauthorized");
      expectError(await sendTo("GET", doomed.played.urls.manifest), 401, "unauthorized");

      // The other tenant: every row and object as before, its asset still plays.
      expect(await h.backdoor.rowsOfTenant(kept.owner.tenant.id)).toStrictEqual(keptRows);
      expect(await objectsOf(h, kept.owner.tenant.id)).toStrictEqual(keptObjects);
      expectStatus(await h.api.get(`/v1/assets/${kept.ready.id}`, credentialOptions(kept.write)), 200);
      expectStatus(await sendTo("GET", kept.played.urls.manifest), 200);

      // The email may sign up again: a new tenant, another slug.
      const again = await signUp(h.api, { email: doomed.owner.email });
      expect(again.tenant.id).not.toBe(tenantId);
      expect(again.tenant.slug).not.toBe(doomed.owner.tenant.slug);
    });

    it("refuses what is not the owner's own, proven: an API key or a member or admin (403), a wrong password (401), no password for an account with one (400); nothing is deleted", async () => {
      const h = subject();
      const owner = await signUp(h.api);
      const bearer = owner.access_token;
      const adminKey = await createApiKey(h.api, { bearer }, ["admin"]);
      expectError(
        await h.api.del("/v1/tenant", { apiKey: adminKey.key, json: { password: DEFAULT_PASSWORD } }),
        403,
        "forbidden",
      );
      // An admin and a member of the tenant, who share the owner's password (a fixture: the API
      // invites no one yet).
      const stored = await h.backdoor.user(owner.user.id);
      for (const role of ["admin", "member"] as const) {
        const email = uniqueEmail();
        await h.backdoor.insertUser({
          id: `user_${role}${Date.now()}`,
          tenant_id: TenantId(owner.tenant.id),
          email,
          email_verified: true,
          name: null,
          role,
          password_hash: stored?.password_hash ?? null,
          created_at: h.clock.now(),
        });
        const signedIn = expectStatus(
          await h.api.post<{ access_token: string }>("/v1/auth/login", {
            json: { email, password: DEFAULT_PASSWORD },
            ip: randomIp(),
          }),
          200,
        ).body;
        expectError(
          await deleteTenant(h, signedIn.access_token, { password: DEFAULT_PASSWORD }),
          403,
          "forbidden",
        );
      }
      const wrong = expectError(
        await deleteTenant(h, bearer, { password: "not the password" }),
        401,
        "unauthorized",
      );
      expect(wrong.message).toMatch(/password/);
      expectInvalidFields(await deleteTenant(h, bearer), [["password"]]);
      expectInvalidFields(await deleteTenant(h, bearer, { password: DEFAULT_PASSWORD, confirm: true }), [
        ["confirm"],
      ]);
      expectInvalidFields(await deleteTenant(h, bearer, { password: 42 }), [["password"]]);
      expectStatus(await h.api.get("/v1/auth/me", { bearer }), 200);
      expect((await h.backdoor.tenant(owner.tenant.id))?.status).toBe("active");
    });

    it("an account without a password deletes within 5 minutes of a Google sign-in; later, 401 sign_in_too_old until it signs in again", async () => {
      const h = subject();
      const email = uniqueEmail();
      const sub = `1${Date.now()}${Math.floor(Math.random() * 1e6)}`;
      const google = async () =>
        expectStatus(
          await h.api.post<GoogleSignedIn>("/v1/auth/google", {
            json: { id_token: h.google.signIdToken({ sub, email }) },
            ip: randomIp(),
          }),
          200,
        ).body;
      const first = await google();
      h.clock.advance(5 * MINUTE);
      const stale = expectError(await deleteTenant(h, first.access_token, {}), 401, "unauthorized");
      expect(stale.details).toStrictEqual({ reason: "sign_in_too_old", max_age_seconds: 300 });
      // A refresh keeps the sign-in's time: its tokens are no fresher.
      const refreshed = expectStatus(
        await h.api.post<{ access_token: string }>("/v1/auth/refresh", {
          json: { refresh_token: first.refresh_token },
          ip: randomIp(),
        }),
        200,
      ).body;
      expectError(await deleteTenant(h, refreshed.access_token), 401, "unauthorized");
      // A password it does not have is wrong.
      expectError(
        await deleteTenant(h, first.access_token, { password: DEFAULT_PASSWORD }),
        401,
        "unauthorized",
      );
      const fresh = await google();
      h.clock.advance(4 * MINUTE);
      expectNoContent(await deleteTenant(h, fresh.access_token));
      expectError(await h.api.get("/v1/auth/me", { bearer: fresh.access_token }), 401, "unauthorized");
      await eventually(
        "the tenant's rows are removed",
        async () => Object.keys(await h.backdoor.rowsOfTenant(first.user.tenant_id)).length === 0,
      );
      // The identity is free again: a new account.
      const reborn = expectStatus(
        await h.api.post<GoogleSignedIn>("/v1/auth/google", {
          json: { id_token: h.google.signIdToken({ sub, email }) },
          ip: randomIp(),
        }),
        200,
      ).body;
      expect(reborn.created).toBe(true);
      expect(reborn.user.tenant_id).not.toBe(first.user.tenant_id);
    });
  });
};

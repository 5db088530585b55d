import { describe, expect, it } from "vitest";
import {
  type Credential,
  createApiKey,
  credentialOptions,
  expectError,
  expectInvalidFields,
  expectNoContent,
  expectStatus,
  expectUnauthorized,
  type GoogleSignedIn,
  type HttpClient,
  type ListedApiKey,
  logIn,
  type MakeHttpSubject,
  type MeBody,
  randomIp,
  sessionIdOf,
  sharedSubject,
  signUp,
  uniqueEmail,
  withSubject,
} from "./client.js";

const signIn = (api: HttpClient, idToken: string) =>
  api.post<GoogleSignedIn>("/v1/auth/google", { json: { id_token: idToken }, ip: randomIp() });

const createWebhook = async (api: HttpClient, credential: Credential) =>
  expectStatus(
    await api.post<{ webhook: { id: string } }>("/v1/webhooks", {
      ...credentialOptions(credential),
      json: { url: "http://127.0.0.1:9/hook", events: ["*"] },
    }),
    201,
  ).body.webhook;

/** POST /v1/auth/google against a fake Google the host trusts. */
export const describeGoogleSignIn = (makeSubject: MakeHttpSubject): void => {
  describe("Google sign-in", () => {
    // Webhooks on 127.0.0.1 are allowed: a claim deletes the tenant's; no worker sends anything.
    const subject = sharedSubject(makeSubject, { VOD_WEBHOOKS_ALLOW_PRIVATE: "true" });

    it("creates an account for a new identity (created true, email verified) and links it", async () => {
      const { api, backdoor, clock, google } = subject();
      const email = uniqueEmail();
      const sub = `1${Date.now()}${Math.floor(Math.random() * 1e6)}`;
      const reply = await signIn(api, google.signIdToken({ sub, email, name: "Grace Hopper" }));
      expect(reply.status).toBe(200);
      expect(reply.headers.get("cache-control")).toBe("no-store");
      expect(reply.body).toStrictEqual({
        user: {
          id: expect.any(String),
          tenant_id: expect.any(String),
          email,
          email_verified: true,
          name: "Grace Hopper",
          role: "owner",
          created_at: clock.now(),
        },
        access_token: expect.any(String),
        refresh_token: expect.any(String),
        token_type: "bearer",
        expires_in: 900,
        created: true,
      });
      const { user } = reply.body;
      expect(await backdoor.identity("google", sub)).toStrictEqual({
        provider: "google",
        subject: sub,
        user_id: user.id,
        tenant_id: user.tenant_id,
        created_at: clock.now(),
      });
      expect((await backdoor.user(user.id))?.password_hash).toBeNull();
      const me = expectStatus(await api.get<MeBody>("/v1/auth/me", { bearer: reply.body.access_token }), 200);
      expect(me.body.tenant).toMatchObject({ id: user.tenant_id, name: email.split("@")[0], plan: "free" });

      // An account made by Google sign-in has no password to sign in with.
      expectUnauthorized(
        await api.post("/v1/auth/login", {
          json: { email, password: "any password at all" },
          ip: randomIp(),
        }),
      );

      // The same identity again signs in to the same user.
      const again = expectStatus(await signIn(api, google.signIdToken({ sub, email })), 200).body;
      expect(again.created).toBe(false);
      expect(again.user.id).toBe(user.id);

      // A current password it does not have is wrong; without one, it sets its first.
      const owner = { bearer: again.access_token };
      expectUnauthorized(
        await api.post("/v1/auth/password", {
          ...owner,
          json: { current_password: "any password at all", new_password: "a first passphrase" },
        }),
      );
      expectNoContent(
        await api.post("/v1/auth/password", { ...owner, json: { new_password: "a first passphrase" } }),
      );
      await logIn(api, email, "a first passphrase");
      expectStatus(await api.get("/v1/auth/me", owner), 200);
    });

    it('takes email_verified sent as the string "true" as verified', async () => {
      const { api, google } = subject();
      const reply = expectStatus(await signIn(api, google.signIdToken({ email_verified: "true" })), 200).body;
      expect(reply.user.email_verified).toBe(true);
    });

    it("keeps an unverified email unverified on a new account", async () => {
      const { api, google } = subject();
      const reply = expectStatus(await signIn(api, google.signIdToken({ email_verified: false })), 200).body;
      expect(reply.created).toBe(true);
      expect(reply.user.email_verified).toBe(false);
    });

    it("lets a verified Google identity claim an unverified signup: the signup's password, sessions, keys and webhooks end", async () => {
      const { api, backdoor, clock, google } = subject();
      // Someone signs up first with the victim's email, and makes credentials of every kind.
      const attacker = await signUp(api);
      const again = await logIn(api, attacker.email, attacker.password);
      const key = await createApiKey(api, { bearer: attacker.access_token }, ["admin"]);
      const webhook = await createWebhook(api, { apiKey: key.key });
      const sub = `2${Date.now()}${Math.floor(Math.random() * 1e6)}`;

      const reply = expectStatus(
        await signIn(
          api,
          google.signIdToken({ sub, email: attacker.email.toUpperCase(), email_verified: true }),
        ),
        200,
      );
      expect(reply.headers.get("cache-control")).toBe("no-store");
      const victim = reply.body;
      expect(victim.created).toBe(false);
      expect(victim.user).toStrictEqual({ ...attacker.user, email_verified: true });
      expect(await backdoor.identity("google", sub)).toMatchObject({
        user_id: attacker.user.id,
        tenant_id: attacker.tenant.id,
      });

      // Nothing the signup made works any more.
      expectUnauthorized(
        await api.post("/v1/auth/login", {
          json: { email: attacker.email, password: attacker.password },
          ip: randomIp(),
        }),
      );
      for (const tokens of [attacker, again]) {
        expectUnauthorized(await api.get("/v1/auth/me", { bearer: tokens.access_token }));
        expectUnauthorized(
          await api.post("/v1/auth/refresh", {
            json: { refresh_token: tokens.refresh_token },
            ip: randomIp(),
          }),
        );
      }
      expectUnauthorized(await api.get("/v1/auth/me", { apiKey: key.key }));
      expect(await backdoor.user(attacker.user.id)).toMatchObject({
        password_hash: null,
        email_verified: true,
      });
      for (const tokens of [attacker, again])
        expect(await backdoor.refreshSession(sessionIdOf(tokens.access_token))).toMatchObject({
          revoked_at: clock.now(),
          revoked_reason: "account_claimed",
        });
      expect((await backdoor.apiKey(key.id))?.revoked_at).toBe(clock.now());
      expect((await backdoor.webhook(webhook.id))?.deleted_at).toBe(clock.now());

      // The claimant's session works: the key listed as revoked, the webhook gone.
      const owner = { bearer: victim.access_token };
      const me = expectStatus(await api.get<MeBody>("/v1/auth/me", owner), 200).body;
      expect(me.user).toStrictEqual(victim.user);
      const keys = expectStatus(await api.get<{ data: ListedApiKey[] }>("/v1/api-keys", owner), 200).body;
      expect(keys.data).toMatchObject([{ id: key.id, revoked_at: clock.now() }]);
      expect(expectStatus(await api.get("/v1/webhooks", owner), 200).body).toStrictEqual({ data: [] });
      expectError(await api.get(`/v1/webhooks/${webhook.id}`, owner), 404, "not_found");

      // The claimant sets a password of their own, with no current one, and signs in with it.
      const chosen = "the owner's own passphrase";
      expectNoContent(await api.post("/v1/auth/password", { ...owner, json: { new_password: chosen } }));
      await logIn(api, attacker.email, chosen);
      expectStatus(await api.get("/v1/auth/me", owner), 200);
      // From now on a change needs it.
      expectInvalidFields(
        await api.post("/v1/auth/password", { ...owner, json: { new_password: "yet another passphrase" } }),
        [["current_password"]],
      );
    });

    it("links an account whose email is verified already, ending nothing", async () => {
      const { api, backdoor, google } = subject();
      const account = await signUp(api);
      // A first Google identity verifies the email (claiming the signup); the owner then sets a password.
      const first = expectStatus(await signIn(api, google.signIdToken({ email: account.email })), 200).body;
      const owner = { bearer: first.access_token };
      const password = "the owner's own passphrase";
      expectNoContent(await api.post("/v1/auth/password", { ...owner, json: { new_password: password } }));
      const key = await createApiKey(api, owner, ["admin"]);
      const webhook = await createWebhook(api, owner);

      const sub = `4${Date.now()}${Math.floor(Math.random() * 1e6)}`;
      const second = expectStatus(
        await signIn(api, google.signIdToken({ sub, email: account.email, email_verified: true })),
        200,
      ).body;
      expect(second.created).toBe(false);
      expect(second.user).toStrictEqual({ ...account.user, email_verified: true });
      expect(await backdoor.identity("google", sub)).toMatchObject({ user_id: account.user.id });

      // Every credential made before goes on working.
      expectStatus(await api.get("/v1/auth/me", owner), 200);
      expectStatus(await api.get("/v1/auth/me", { apiKey: key.key }), 200);
      await logIn(api, account.email, password);
      expect((await backdoor.refreshSession(sessionIdOf(first.access_token)))?.revoked_at).toBeNull();
      expect((await backdoor.apiKey(key.id))?.revoked_at).toBeNull();
      expect((await backdoor.webhook(webhook.id))?.deleted_at).toBeNull();
      expectStatus(await api.get(`/v1/webhooks/${webhook.id}`, { bearer: second.access_token }), 200);
    });

    it("refuses to link an existing email the provider has not verified (409), linking nothing", async () => {
      const { api, backdoor, google } = subject();
      const account = await signUp(api);
      const sub = `3${Date.now()}${Math.floor(Math.random() * 1e6)}`;
      const reply = await signIn(
        api,
        google.signIdToken({ sub, email: account.email, email_verified: false }),
      );
      expectError(reply, 409, "conflict");
      expect(await backdoor.identity("google", sub)).toBeUndefined();
      expect((await backdoor.user(account.user.id))?.email_verified).toBe(false);
    });

    it("answers 401 for a token for another audience, signed with a foreign key, expired, or garbage", async () => {
      const { api, google } = subject();
      const now = Math.floor(Date.now() / 1000);
      expectUnauthorized(
        await signIn(api, google.signIdToken({ aud: "someone-else.apps.googleusercontent.com" })),
      );
      expectUnauthorized(await signIn(api, google.signIdToken({}, { foreignKey: true })));
      expectUnauthorized(await signIn(api, google.signIdToken({ iat: now - 7200, exp: now - 3600 })));
      expectUnauthorized(await signIn(api, "not-a-token"));
    });

    it("refuses an empty id_token with 400", async () => {
      const { api } = subject();
      expectInvalidFields(await signIn(api, ""), [["id_token"]]);
    });

    it("answers 503 playback_unavailable on a host without a Google client id", async () => {
      await withSubject(makeSubject, { VOD_GOOGLE_CLIENT_ID: "" }, async ({ api, google }) => {
        expectError(await signIn(api, google.signIdToken()), 503, "playback_unavailable");
      });
    });

    it("answers 503 playback_unavailable when Google's certificates are unreachable", async () => {
      await withSubject(makeSubject, {}, async ({ api, google }) => {
        const token = google.signIdToken();
        await google.close();
        expectError(await signIn(api, token), 503, "playback_unavailable");
      });
    });
  });
};

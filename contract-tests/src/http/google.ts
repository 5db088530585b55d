import { describe, expect, it } from "vitest";
import {
  expectError,
  expectInvalidFields,
  expectStatus,
  expectUnauthorized,
  type GoogleSignedIn,
  type HttpClient,
  type MakeHttpSubject,
  type MeBody,
  randomIp,
  sharedSubject,
  signUp,
  uniqueEmail,
  withSubject,
} from "./client.js";

const signIn = (api: HttpClient, idToken: string) =>
  api.post<GoogleSignedIn>("/v1/auth/google", { json: { id_token: idToken }, ip: randomIp() });

/** POST /v1/auth/google against a fake Google the host trusts. */
export const describeGoogleSignIn = (makeSubject: MakeHttpSubject): void => {
  describe("Google sign-in", () => {
    const subject = sharedSubject(makeSubject);

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

    it("links a password account whose email the provider verified (created false, same user)", async () => {
      const { api, backdoor, google } = subject();
      const account = await signUp(api);
      const sub = `2${Date.now()}${Math.floor(Math.random() * 1e6)}`;
      const reply = await signIn(
        api,
        google.signIdToken({ sub, email: account.email.toUpperCase(), email_verified: true }),
      );
      expect(reply.status).toBe(200);
      expect(reply.body.created).toBe(false);
      expect(reply.body.user).toStrictEqual({ ...account.user, email_verified: true });
      expect(await backdoor.identity("google", sub)).toMatchObject({
        provider: "google",
        subject: sub,
        user_id: account.user.id,
        tenant_id: account.tenant.id,
      });
      expect((await backdoor.user(account.user.id))?.email_verified).toBe(true);
      // The password keeps working.
      expectStatus(
        await api.post("/v1/auth/login", {
          json: { email: account.email, password: account.password },
          ip: randomIp(),
        }),
        200,
      );
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

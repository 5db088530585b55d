import { randomUUID } from "node:crypto";
import { TenantId } from "@vod/core";
import { describe, expect, it } from "vitest";
import {
  accessClaims,
  createApiKey,
  DAY,
  DEFAULT_PASSWORD,
  expectError,
  expectInvalidFields,
  expectNoContent,
  expectStatus,
  expectUnauthorized,
  logIn,
  type MakeHttpSubject,
  type MeBody,
  randomIp,
  SECOND,
  type SignedIn,
  type SignedUp,
  sessionIdOf,
  sha256Hex,
  sharedSubject,
  signUp,
  uniqueEmail,
  type WireAsset,
  type WireTokens,
} from "./client.js";

const SLUG_SUFFIX = "-[0-9a-z]{6}";
const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Sign-up, sign-in, the current principal, refresh rotation, logout and password change. */
export const describeAccounts = (makeSubject: MakeHttpSubject): void => {
  describe("accounts and sessions", () => {
    const subject = sharedSubject(makeSubject);

    describe("POST /v1/auth/signup", () => {
      it("creates a tenant and its owner, signs in, and answers 201 with the whole shape", async () => {
        const { api, backdoor, clock } = subject();
        const email = uniqueEmail();
        const now = clock.now();
        const reply = await api.post<SignedUp>("/v1/auth/signup", {
          json: { email, password: DEFAULT_PASSWORD, name: "Ada Lovelace", tenantName: "Acme Studios" },
          ip: randomIp(),
        });
        expect(reply.status).toBe(201);
        expect(reply.headers.get("content-type")).toMatch(/^application\/json\b/);
        expect(reply.headers.get("cache-control")).toBe("no-store");
        const body = reply.body;
        expect(body).toStrictEqual({
          user: {
            id: expect.any(String),
            tenant_id: body.tenant.id,
            email,
            email_verified: false,
            name: "Ada Lovelace",
            role: "owner",
            created_at: now,
          },
          tenant: {
            id: expect.any(String),
            slug: expect.stringMatching(new RegExp(`^acme-studios${SLUG_SUFFIX}$`)),
            name: "Acme Studios",
            plan: "free",
            status: "active",
            created_at: now,
          },
          access_token: expect.any(String),
          refresh_token: expect.any(String),
          token_type: "bearer",
          expires_in: 900,
        });

        // What was stored: the rows behind the reply, the password only as an argon2id hash.
        expect(await backdoor.tenant(body.tenant.id)).toStrictEqual(body.tenant);
        const row = await backdoor.user(body.user.id);
        expect(row).toStrictEqual({ ...body.user, password_hash: expect.stringMatching(/^\$argon2id\$/) });
        expect(JSON.stringify(row)).not.toContain(DEFAULT_PASSWORD);

        // The access token names the user, the tenant and its session; the refresh token is
        // stored only as its SHA-256.
        const claims = accessClaims(body.access_token);
        expect(claims).toMatchObject({ sub: body.user.id, tid: body.tenant.id, sid: expect.any(String) });
        expect(Number(claims.exp) - Number(claims.iat)).toBe(900);
        const sid = sessionIdOf(body.access_token);
        expect(await backdoor.refreshSession(sid)).toMatchObject({
          id: sid,
          user_id: body.user.id,
          tenant_id: body.tenant.id,
          revoked_at: null,
          revoked_reason: null,
        });
        const tokens = await backdoor.refreshTokensOfSession(sid);
        expect(tokens).toHaveLength(1);
        expect(tokens[0]).toMatchObject({
          token_hash: sha256Hex(body.refresh_token),
          session_id: sid,
          used_at: null,
          expires_at: now + 30 * DAY,
        });
        expect(JSON.stringify(tokens)).not.toContain(body.refresh_token);
      });

      it("names the tenant after the email's local part when tenantName is omitted", async () => {
        const { api } = subject();
        const local = `u-${randomUUID()}`;
        const account = await signUp(api, { email: `${local}@example.com` });
        expect(account.user.name).toBeNull();
        expect(account.tenant.name).toBe(local);
        expect(account.tenant.slug).toMatch(new RegExp(`^${escapeRegExp(local)}${SLUG_SUFFIX}$`));
      });

      it("slugs an accented, punctuated tenant name to lowercase ASCII", async () => {
        const { api } = subject();
        const account = await signUp(api, { tenantName: "Café Ünïon — Studios!" });
        expect(account.tenant.name).toBe("Café Ünïon — Studios!");
        expect(account.tenant.slug).toMatch(new RegExp(`^cafe-union-studios${SLUG_SUFFIX}$`));
      });

      it("refuses an email already taken, in another case, with 409 conflict", async () => {
        const { api } = subject();
        const account = await signUp(api);
        const reply = await api.post("/v1/auth/signup", {
          json: { email: account.email.toUpperCase(), password: DEFAULT_PASSWORD },
          ip: randomIp(),
        });
        expectError(reply, 409, "conflict");
      });

      it("refuses a password of 7 characters with details.fields, and does not echo it", async () => {
        const { api } = subject();
        const reply = await api.post("/v1/auth/signup", {
          json: { email: uniqueEmail(), password: "Sev7nCh" },
          ip: randomIp(),
        });
        expectInvalidFields(reply, [["password"]]);
        expect(reply.text).not.toContain("Sev7nCh");
      });

      it("lets exactly one of two concurrent signups of one email succeed; the other is 409", async () => {
        const { api } = subject();
        const email = uniqueEmail();
        const replies = await Promise.all(
          [randomIp(), randomIp()].map((ip) =>
            api.post<SignedUp>("/v1/auth/signup", { json: { email, password: DEFAULT_PASSWORD }, ip }),
          ),
        );
        expect(replies.map((r) => r.status).sort()).toEqual([201, 409]);
        const loser = replies.find((r) => r.status === 409);
        if (loser) expectError(loser, 409, "conflict");
        const winner = replies.find((r) => r.status === 201)?.body;
        const me = await logIn(api, email, DEFAULT_PASSWORD);
        expect(me.user.id).toBe(winner?.user.id);
      });

      it("refuses an empty tenantName", async () => {
        const { api } = subject();
        const reply = await api.post("/v1/auth/signup", {
          json: { email: uniqueEmail(), password: DEFAULT_PASSWORD, tenantName: "" },
          ip: randomIp(),
        });
        expectInvalidFields(reply, [["tenantName"]]);
      });

      it("refuses an email that is not one", async () => {
        const { api } = subject();
        const reply = await api.post("/v1/auth/signup", {
          json: { email: "not-an-email", password: DEFAULT_PASSWORD },
          ip: randomIp(),
        });
        expectInvalidFields(reply, [["email"]]);
      });

      it("refuses malformed JSON with 400 and details.fields", async () => {
        const { api } = subject();
        const reply = await api.post("/v1/auth/signup", {
          raw: '{"email": "a@example.com", "password": ',
          contentType: "application/json",
          ip: randomIp(),
        });
        const body = expectError(reply, 400, "invalid_request");
        expect(body.details?.fields).toEqual([{ path: expect.any(Array), message: expect.any(String) }]);
      });

      it("refuses a text/plain body with 400", async () => {
        const { api } = subject();
        const reply = await api.post("/v1/auth/signup", {
          raw: JSON.stringify({ email: uniqueEmail(), password: DEFAULT_PASSWORD }),
          contentType: "text/plain",
          ip: randomIp(),
        });
        const body = expectError(reply, 400, "invalid_request");
        expect(body.details?.fields).toEqual([{ path: expect.any(Array), message: expect.any(String) }]);
      });
    });

    describe("POST /v1/auth/login", () => {
      it("answers 200 with the user and a new token pair in a new session", async () => {
        const { api } = subject();
        const account = await signUp(api);
        const reply = await api.post<SignedIn>("/v1/auth/login", {
          json: { email: account.email, password: account.password },
          ip: randomIp(),
        });
        expect(reply.status).toBe(200);
        expect(reply.headers.get("cache-control")).toBe("no-store");
        expect(reply.body).toStrictEqual({
          user: account.user,
          access_token: expect.any(String),
          refresh_token: expect.any(String),
          token_type: "bearer",
          expires_in: 900,
        });
        expect(reply.body.refresh_token).not.toBe(account.refresh_token);
        expect(sessionIdOf(reply.body.access_token)).not.toBe(sessionIdOf(account.access_token));
        expectStatus(await api.get("/v1/auth/me", { bearer: reply.body.access_token }), 200);
      });

      it("answers 401 with a Bearer challenge, and the same message for an unknown email", async () => {
        const { api } = subject();
        const account = await signUp(api);
        const wrong = await api.post("/v1/auth/login", {
          json: { email: account.email, password: `${account.password}!` },
          ip: randomIp(),
        });
        const unknown = await api.post("/v1/auth/login", {
          json: { email: uniqueEmail(), password: account.password },
          ip: randomIp(),
        });
        const a = expectUnauthorized(wrong);
        const b = expectUnauthorized(unknown);
        expect(a.message).toBe(b.message);
      });

      it("matches the email without regard to case", async () => {
        const { api } = subject();
        const account = await signUp(api);
        const signedIn = await logIn(api, account.email.toUpperCase(), account.password);
        expect(signedIn.user.id).toBe(account.user.id);
      });

      it("refuses an email longer than 254 characters with 400", async () => {
        const { api } = subject();
        const email = `${"a".repeat(243)}@example.com`;
        expect(email.length).toBe(255);
        const reply = await api.post("/v1/auth/login", {
          json: { email, password: DEFAULT_PASSWORD },
          ip: randomIp(),
        });
        expectInvalidFields(reply, [["email"]]);
      });
    });

    describe("GET /v1/auth/me", () => {
      it("names the user, its role and tenant for an access token", async () => {
        const { api } = subject();
        const account = await signUp(api);
        const reply = await api.get<MeBody>("/v1/auth/me", { bearer: account.access_token });
        expect(reply.status).toBe(200);
        expect(reply.body).toStrictEqual({
          auth: { kind: "user", role: "owner" },
          user: account.user,
          tenant: account.tenant,
        });
        // The scheme is case-insensitive (RFC 9110).
        const lower = await api.get("/v1/auth/me", {
          headers: { authorization: `bearer ${account.access_token}` },
        });
        expect(lower.status).toBe(200);
      });

      it("names the key, its scopes and tenant for an API key, and no user", async () => {
        const { api } = subject();
        const account = await signUp(api);
        const key = await createApiKey(api, { bearer: account.access_token }, ["read"]);
        const reply = await api.get<MeBody>("/v1/auth/me", { apiKey: key.key });
        expect(reply.status).toBe(200);
        expect(reply.body).toStrictEqual({
          auth: { kind: "api_key", key_id: key.id, scopes: ["read"] },
          tenant: account.tenant,
        });
        expect(reply.body).not.toHaveProperty("user");
      });

      it("answers 401 without a credential, and for a garbage bearer token or API key", async () => {
        const { api } = subject();
        expectUnauthorized(await api.get("/v1/auth/me"));
        expectUnauthorized(await api.get("/v1/auth/me", { bearer: "garbage" }));
        expectUnauthorized(await api.get("/v1/auth/me", { headers: { authorization: "Bearer" } }));
        expectUnauthorized(
          await api.get("/v1/auth/me", { headers: { authorization: "Basic Zm9vOmJhcg==" } }),
        );
        expectError(await api.get("/v1/auth/me", { apiKey: "vod_garbage" }), 401, "unauthorized");
      });

      it("answers 401 for an access token that is unsigned or altered", async () => {
        const { api } = subject();
        const account = await signUp(api);
        const [header, payload, signature] = account.access_token.split(".") as [string, string, string];
        const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
        const decodedHeader = JSON.parse(Buffer.from(header, "base64url").toString("utf8")) as object;
        const unsigned = `${b64({ ...decodedHeader, alg: "none" })}.${payload}.`;
        const claims = accessClaims(account.access_token);
        const altered = `${header}.${b64({ ...claims, exp: Number(claims.exp) + 3600 })}.${signature}`;
        for (const token of [unsigned, altered]) {
          expectUnauthorized(await api.get("/v1/auth/me", { bearer: token }));
        }
        expectStatus(await api.get("/v1/auth/me", { bearer: account.access_token }), 200);
      });

      it("answers 401 once the access token is past its 900 seconds", async () => {
        const { api, clock } = subject();
        const account = await signUp(api);
        clock.advance(899 * SECOND);
        expectStatus(await api.get("/v1/auth/me", { bearer: account.access_token }), 200);
        clock.advance(2 * SECOND);
        expectUnauthorized(await api.get("/v1/auth/me", { bearer: account.access_token }));
      });
    });

    describe("POST /v1/auth/refresh", () => {
      it("rotates: a new pair, and the old refresh token once more revokes the whole family", async () => {
        const { api, backdoor } = subject();
        const account = await signUp(api);
        const sid = sessionIdOf(account.access_token);
        const reply = await api.post<WireTokens>("/v1/auth/refresh", {
          json: { refresh_token: account.refresh_token },
          ip: randomIp(),
        });
        expect(reply.status).toBe(200);
        expect(reply.headers.get("cache-control")).toBe("no-store");
        expect(reply.body).toStrictEqual({
          access_token: expect.any(String),
          refresh_token: expect.any(String),
          token_type: "bearer",
          expires_in: 900,
        });
        const fresh = reply.body;
        expect(fresh.refresh_token).not.toBe(account.refresh_token);
        expect(sessionIdOf(fresh.access_token)).toBe(sid);
        expectStatus(await api.get("/v1/auth/me", { bearer: fresh.access_token }), 200);

        // The presented token is spent; presenting it again is theft.
        expectUnauthorized(
          await api.post("/v1/auth/refresh", {
            json: { refresh_token: account.refresh_token },
            ip: randomIp(),
          }),
        );
        expectUnauthorized(await api.get("/v1/auth/me", { bearer: fresh.access_token }));
        expectUnauthorized(await api.get("/v1/auth/me", { bearer: account.access_token }));
        expectUnauthorized(
          await api.post("/v1/auth/refresh", {
            json: { refresh_token: fresh.refresh_token },
            ip: randomIp(),
          }),
        );
        expect(await backdoor.refreshSession(sid)).toMatchObject({
          revoked_at: expect.any(Number),
          revoked_reason: "reuse_detected",
        });
        const rows = await backdoor.refreshTokensOfSession(sid);
        expect(rows.map((t) => t.token_hash).sort()).toEqual(
          [sha256Hex(account.refresh_token), sha256Hex(fresh.refresh_token)].sort(),
        );
        expect(rows.find((t) => t.token_hash === sha256Hex(account.refresh_token))?.used_at).toEqual(
          expect.any(Number),
        );
      });

      it("lets exactly one of two concurrent refreshes of one token win, and revokes the family", async () => {
        const { api, backdoor } = subject();
        const account = await signUp(api);
        const sid = sessionIdOf(account.access_token);
        const replies = await Promise.all(
          [randomIp(), randomIp()].map((ip) =>
            api.post<WireTokens>("/v1/auth/refresh", { json: { refresh_token: account.refresh_token }, ip }),
          ),
        );
        expect(replies.map((r) => r.status).sort()).toEqual([200, 401]);
        const winner = replies.find((r) => r.status === 200)?.body;
        if (winner === undefined) throw new Error("no refresh succeeded");
        expectUnauthorized(await api.get("/v1/auth/me", { bearer: winner.access_token }));
        expectUnauthorized(
          await api.post("/v1/auth/refresh", {
            json: { refresh_token: winner.refresh_token },
            ip: randomIp(),
          }),
        );
        expect(await backdoor.refreshSession(sid)).toMatchObject({ revoked_reason: "reuse_detected" });
      });

      it("refuses a refresh token 30 days after it was issued, counted per token", async () => {
        const { api, clock } = subject();
        const account = await signUp(api);
        const other = await logIn(api, account.email, account.password);
        clock.advance(29 * DAY);
        const rotated = expectStatus(
          await api.post<WireTokens>("/v1/auth/refresh", {
            json: { refresh_token: account.refresh_token },
            ip: randomIp(),
          }),
          200,
        ).body;
        clock.advance(DAY + SECOND);
        // Issued 30 days and a second ago: expired. Rotated a day ago: still good.
        expectUnauthorized(
          await api.post("/v1/auth/refresh", {
            json: { refresh_token: other.refresh_token },
            ip: randomIp(),
          }),
        );
        expectStatus(
          await api.post("/v1/auth/refresh", {
            json: { refresh_token: rotated.refresh_token },
            ip: randomIp(),
          }),
          200,
        );
      });

      it("answers 401 for an unknown refresh token and 400 for an empty one", async () => {
        const { api } = subject();
        expectUnauthorized(
          await api.post("/v1/auth/refresh", { json: { refresh_token: "vrt_not-a-token" }, ip: randomIp() }),
        );
        expectInvalidFields(
          await api.post("/v1/auth/refresh", { json: { refresh_token: "" }, ip: randomIp() }),
          [["refresh_token"]],
        );
      });
    });

    describe("POST /v1/auth/logout", () => {
      it("answers 204 with an empty body; the access token stops working at once", async () => {
        const { api, backdoor } = subject();
        const account = await signUp(api);
        const sid = sessionIdOf(account.access_token);
        expectNoContent(await api.post("/v1/auth/logout", { bearer: account.access_token }));
        expectUnauthorized(await api.get("/v1/auth/me", { bearer: account.access_token }));
        expectUnauthorized(
          await api.post("/v1/auth/refresh", {
            json: { refresh_token: account.refresh_token },
            ip: randomIp(),
          }),
        );
        expect(await backdoor.refreshSession(sid)).toMatchObject({
          revoked_at: expect.any(Number),
          revoked_reason: "logout",
        });
      });

      it("also ends the session of the refresh token given in the body", async () => {
        const { api, backdoor } = subject();
        const account = await signUp(api);
        const other = await logIn(api, account.email, account.password);
        expectNoContent(
          await api.post("/v1/auth/logout", {
            bearer: account.access_token,
            json: { refresh_token: other.refresh_token },
          }),
        );
        expectUnauthorized(
          await api.post("/v1/auth/refresh", {
            json: { refresh_token: other.refresh_token },
            ip: randomIp(),
          }),
        );
        expectUnauthorized(await api.get("/v1/auth/me", { bearer: other.access_token }));
        expect(await backdoor.refreshSession(sessionIdOf(other.access_token))).toMatchObject({
          revoked_reason: "logout",
        });
      });

      it("leaves another user's session alone when its refresh token is in the body", async () => {
        const { api, backdoor } = subject();
        const account = await signUp(api);
        const stranger = await signUp(api);
        expectNoContent(
          await api.post("/v1/auth/logout", {
            bearer: account.access_token,
            json: { refresh_token: stranger.refresh_token },
          }),
        );
        expect(await backdoor.refreshSession(sessionIdOf(stranger.access_token))).toMatchObject({
          revoked_at: null,
        });
        expectStatus(
          await api.post("/v1/auth/refresh", {
            json: { refresh_token: stranger.refresh_token },
            ip: randomIp(),
          }),
          200,
        );
      });

      it("refuses an empty refresh_token in the body with 400, and keeps the session", async () => {
        const { api } = subject();
        const account = await signUp(api);
        expectInvalidFields(
          await api.post("/v1/auth/logout", { bearer: account.access_token, json: { refresh_token: "" } }),
          [["refresh_token"]],
        );
        expectStatus(await api.get("/v1/auth/me", { bearer: account.access_token }), 200);
      });

      it("refuses an API key with 403", async () => {
        const { api } = subject();
        const account = await signUp(api);
        const key = await createApiKey(api, { bearer: account.access_token }, ["admin"]);
        expectError(await api.post("/v1/auth/logout", { apiKey: key.key }), 403, "forbidden");
        expectStatus(await api.get("/v1/auth/me", { bearer: account.access_token }), 200);
      });
    });

    describe("POST /v1/auth/password", () => {
      it("answers 204, ends every other session at once, keeps this one, and swaps the password", async () => {
        const { api, backdoor } = subject();
        const account = await signUp(api);
        const other = await logIn(api, account.email, account.password);
        const before = (await backdoor.user(account.user.id))?.password_hash;
        const next = "a much better passphrase";
        expectNoContent(
          await api.post("/v1/auth/password", {
            bearer: account.access_token,
            json: { current_password: account.password, new_password: next },
          }),
        );
        expectUnauthorized(await api.get("/v1/auth/me", { bearer: other.access_token }));
        expectUnauthorized(
          await api.post("/v1/auth/refresh", {
            json: { refresh_token: other.refresh_token },
            ip: randomIp(),
          }),
        );
        expectStatus(await api.get("/v1/auth/me", { bearer: account.access_token }), 200);
        expectStatus(
          await api.post("/v1/auth/refresh", {
            json: { refresh_token: account.refresh_token },
            ip: randomIp(),
          }),
          200,
        );
        expect(await backdoor.refreshSession(sessionIdOf(other.access_token))).toMatchObject({
          revoked_reason: "password_changed",
        });
        expect(await backdoor.refreshSession(sessionIdOf(account.access_token))).toMatchObject({
          revoked_at: null,
        });
        const after = (await backdoor.user(account.user.id))?.password_hash;
        expect(after).toMatch(/^\$argon2id\$/);
        expect(after).not.toBe(before);

        expectUnauthorized(
          await api.post("/v1/auth/login", {
            json: { email: account.email, password: account.password },
            ip: randomIp(),
          }),
        );
        await logIn(api, account.email, next);
      });

      it("answers 401 for a wrong current password, and changes nothing", async () => {
        const { api } = subject();
        const account = await signUp(api);
        expectUnauthorized(
          await api.post("/v1/auth/password", {
            bearer: account.access_token,
            json: { current_password: "not the password", new_password: "a much better passphrase" },
          }),
        );
        await logIn(api, account.email, account.password);
      });

      it("refuses a change without current_password (400 naming it) when the account has a password", async () => {
        const { api } = subject();
        const account = await signUp(api);
        const other = await logIn(api, account.email, account.password);
        expectInvalidFields(
          await api.post("/v1/auth/password", {
            bearer: account.access_token,
            json: { new_password: "a much better passphrase" },
          }),
          [["current_password"]],
        );
        await logIn(api, account.email, account.password);
        expectStatus(await api.get("/v1/auth/me", { bearer: other.access_token }), 200);
      });

      it("refuses an API key with 403", async () => {
        const { api } = subject();
        const account = await signUp(api);
        const key = await createApiKey(api, { bearer: account.access_token }, ["admin"]);
        const reply = await api.post("/v1/auth/password", {
          apiKey: key.key,
          json: { current_password: account.password, new_password: "a much better passphrase" },
        });
        expectError(reply, 403, "forbidden");
      });

      it("refuses a new password of 7 characters with 400", async () => {
        const { api } = subject();
        const account = await signUp(api);
        const reply = await api.post("/v1/auth/password", {
          bearer: account.access_token,
          json: { current_password: account.password, new_password: "Sev7nCh" },
        });
        expectInvalidFields(reply, [["new_password"]]);
        await logIn(api, account.email, account.password);
      });
    });

    describe("roles and tenant status", () => {
      it("lets a member create assets but neither create nor revoke API keys", async () => {
        const { api, backdoor, clock } = subject();
        const owner = await signUp(api);
        // A hash of a known password, made by the service itself.
        const donor = await signUp(api);
        const hash = (await backdoor.user(donor.user.id))?.password_hash;
        if (!hash) throw new Error("the donor account has no password hash");
        const email = uniqueEmail();
        const memberId = `usr_${randomUUID().replaceAll("-", "").slice(0, 20)}`;
        await backdoor.insertUser({
          id: memberId,
          tenant_id: TenantId(owner.tenant.id),
          email,
          email_verified: false,
          name: "Mia Member",
          role: "member",
          created_at: clock.now(),
          password_hash: hash,
        });
        const member = await logIn(api, email, donor.password);
        expect(member.user).toMatchObject({ id: memberId, tenant_id: owner.tenant.id, role: "member" });
        const me = expectStatus(await api.get<MeBody>("/v1/auth/me", { bearer: member.access_token }), 200);
        expect(me.body.auth).toStrictEqual({ kind: "user", role: "member" });

        const asset = await api.post<{ asset: WireAsset }>("/v1/assets", {
          bearer: member.access_token,
          json: { title: "By a member" },
        });
        expect(asset.status).toBe(201);
        expectStatus(await api.get("/v1/api-keys", { bearer: member.access_token }), 200);
        expectError(
          await api.post("/v1/api-keys", {
            bearer: member.access_token,
            json: { name: "nope", scopes: ["read"] },
          }),
          403,
          "forbidden",
        );
        const key = await createApiKey(api, { bearer: owner.access_token }, ["read"]);
        expectError(
          await api.del(`/v1/api-keys/${key.id}`, { bearer: member.access_token }),
          403,
          "forbidden",
        );
        expect((await backdoor.apiKey(key.id))?.revoked_at).toBeNull();
      });

      it("answers 403 to every credential of a suspended tenant", async () => {
        const { api, backdoor } = subject();
        const account = await signUp(api);
        const key = await createApiKey(api, { bearer: account.access_token }, ["read"]);
        await backdoor.setTenantStatus(account.tenant.id, "suspended");
        expectError(await api.get("/v1/auth/me", { bearer: account.access_token }), 403, "forbidden");
        expectError(await api.get("/v1/auth/me", { apiKey: key.key }), 403, "forbidden");
        expectError(await api.get("/v1/assets", { apiKey: key.key }), 403, "forbidden");
        expectError(
          await api.post("/v1/auth/login", {
            json: { email: account.email, password: account.password },
            ip: randomIp(),
          }),
          403,
          "forbidden",
        );
        await backdoor.setTenantStatus(account.tenant.id, "active");
        expectStatus(await api.get("/v1/auth/me", { apiKey: key.key }), 200);
      });
    });
  });
};

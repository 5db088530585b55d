import type { ReceivedMail } from "@vod/test-services";
import { describe, expect, it } from "vitest";
import {
  createApiKey,
  DAY,
  DEFAULT_PASSWORD,
  expectError,
  expectInvalidFields,
  expectNoContent,
  expectStatus,
  expectUnauthorized,
  type Harness,
  logIn,
  type MakeHttpSubject,
  type MeBody,
  MINUTE,
  randomIp,
  SECOND,
  type SignedIn,
  sha256Hex,
  sharedSubject,
  signUp,
  uniqueEmail,
  type WireUser,
} from "./client.js";

const NEW_PASSWORD = "a new and longer passphrase";

/** The token of the one link of a mail to `page` (`{app_url}/{page}#token=…`). */
const tokenOf = (mail: ReceivedMail | undefined, page: "verify-email" | "reset-password"): string => {
  const match = mail?.text.match(new RegExp(`https?://\\S+/${page}#token=([A-Za-z0-9]+)`));
  if (!match?.[1]) throw new Error(`no ${page} link in the mail: ${mail?.text ?? "(no mail)"}`);
  return match[1];
};

/** Waits for what `probe` answers to pass `done`, polling; fails after `timeoutMs`. */
const until = async <A>(probe: () => Promise<A> | A, done: (a: A) => boolean, timeoutMs = 20_000) => {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value)) return value;
    if (Date.now() > end) throw new Error(`gave up waiting: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};

/** The headers of a reply that must not differ between two requests alike (no date, no request id). */
const comparableHeaders = (headers: Headers) =>
  [...headers.entries()].filter(([name]) => !["date", "x-request-id"].includes(name));

/**
 * Email verification and password reset (DECISIONS "Account security"): the mail goes over real
 * SMTP to the subject's test server, whose links are followed as a user would.
 */
export const describeAccountMail = (makeSubject: MakeHttpSubject): void => {
  describe("email verification and password reset", () => {
    // Mail is sent by the job queue's worker, retried within a second when the server refuses.
    const subject = sharedSubject(makeSubject, {
      VOD_WORKER_CONCURRENCY: "1",
      VOD_JOB_RETRY_DELAY_SECONDS: "1",
      // A webhook on 127.0.0.1 is allowed: a reset may delete the tenant's; none has events to send.
      VOD_WEBHOOKS_ALLOW_PRIVATE: "true",
    });

    const forgot = (h: Harness, email: string, ip = randomIp()) =>
      h.api.post("/v1/auth/password/forgot", { json: { email }, ip });

    /** Asks for a reset of `email` and answers the token of the link that arrives. */
    const resetToken = async (h: Harness, email: string) => {
      const before = h.mail.received(email).length;
      expect((await forgot(h, email)).status).toBe(202);
      const mails = await h.mail.waitFor(email, before + 1);
      return tokenOf(mails[before], "reset-password");
    };

    describe("POST /v1/auth/email/verify and /v1/auth/email/confirm", () => {
      it("mails a link to the user's address over SMTP; its token confirms the email once", async () => {
        const h = subject();
        const account = await signUp(h.api);
        const reply = await h.api.post("/v1/auth/email/verify", { bearer: account.access_token });
        expect(reply.status).toBe(202);
        expect(reply.text).toBe("");

        const [mail] = await h.mail.waitFor(account.email);
        expect(mail?.envelopeTo).toEqual([account.email]);
        expect(mail?.to).toBe(account.email);
        expect(mail?.from).toContain("no-reply@vod.test");
        expect(mail?.subject).toBe("Confirm your email address");
        const token = tokenOf(mail, "verify-email");
        expect(token).toMatch(/^[A-Za-z0-9]{43}$/);

        // Stored only as its hash, valid 24 hours.
        const rows = await h.backdoor.emailTokensOfUser(account.user.id);
        expect(rows).toEqual([
          {
            token_hash: sha256Hex(token),
            purpose: "verify_email",
            tenant_id: account.tenant.id,
            user_id: account.user.id,
            email: account.email,
            created_at: expect.any(Number),
            expires_at: (rows[0]?.created_at ?? 0) + DAY,
            used_at: null,
          },
        ]);
        expect(JSON.stringify(rows)).not.toContain(token);

        const confirmed = await h.api.post<{ user: WireUser }>("/v1/auth/email/confirm", {
          json: { token },
          ip: randomIp(),
        });
        expect(confirmed.status).toBe(200);
        expect(confirmed.body).toStrictEqual({ user: { ...account.user, email_verified: true } });
        expect((await h.backdoor.user(account.user.id))?.email_verified).toBe(true);
        // The session signed in before sees it at once.
        const me = await h.api.get<MeBody>("/v1/auth/me", { bearer: account.access_token });
        expect(me.body.user?.email_verified).toBe(true);

        const again = await h.api.post("/v1/auth/email/confirm", { json: { token }, ip: randomIp() });
        expectInvalidFields(again, [["token"]]);
        // Nothing left to verify.
        expectError(
          await h.api.post("/v1/auth/email/verify", { bearer: account.access_token }),
          409,
          "conflict",
        );
      });

      it("refuses a token that is unknown or of a reset link, and an API key asking for a link", async () => {
        const h = subject();
        const account = await signUp(h.api);
        const unknown = await h.api.post("/v1/auth/email/confirm", {
          json: { token: "A".repeat(43) },
          ip: randomIp(),
        });
        expectInvalidFields(unknown, [["token"]]);
        const reset = await resetToken(h, account.email);
        expectInvalidFields(
          await h.api.post("/v1/auth/email/confirm", { json: { token: reset }, ip: randomIp() }),
          [["token"]],
        );
        expect((await h.backdoor.user(account.user.id))?.email_verified).toBe(false);
        expectUnauthorized(await h.api.post("/v1/auth/email/verify"));
        const key = await createApiKey(h.api, { bearer: account.access_token }, ["admin"]);
        expectError(await h.api.post("/v1/auth/email/verify", { apiKey: key.key }), 403, "forbidden");
      });

      it("limits verification mails per user: 429 with Retry-After past the hourly limit", async () => {
        const h = subject();
        const account = await signUp(h.api);
        for (let i = 0; i < 5; i++)
          expect((await h.api.post("/v1/auth/email/verify", { bearer: account.access_token })).status).toBe(
            202,
          );
        const over = await h.api.post("/v1/auth/email/verify", { bearer: account.access_token });
        expectError(over, 429, "rate_limited");
        expect(Number(over.headers.get("retry-after"))).toBeGreaterThan(0);
      });
    });

    describe("POST /v1/auth/password/forgot and /v1/auth/password/reset", () => {
      it("mails a reset link; the reset sets the password, verifies the email and ends every session", async () => {
        const h = subject();
        const account = await signUp(h.api);
        const other = await logIn(h.api, account.email, account.password);
        const reply = await forgot(h, account.email.toUpperCase());
        expect(reply.status).toBe(202);
        expect(reply.text).toBe("");

        const [mail] = await h.mail.waitFor(account.email);
        expect(mail?.subject).toBe("Reset your password");
        const token = tokenOf(mail, "reset-password");
        const [row] = await h.backdoor.emailTokensOfUser(account.user.id);
        expect(row).toMatchObject({ token_hash: sha256Hex(token), purpose: "reset_password", used_at: null });
        expect(row?.expires_at).toBe((row?.created_at ?? 0) + 30 * MINUTE);
        expect(JSON.stringify(row)).not.toContain(token);

        const reset = await h.api.post("/v1/auth/password/reset", {
          json: { token, new_password: NEW_PASSWORD },
          ip: randomIp(),
        });
        expectNoContent(reset);

        // The old password is refused, the new one signs in.
        expectUnauthorized(
          await h.api.post("/v1/auth/login", {
            json: { email: account.email, password: account.password },
            ip: randomIp(),
          }),
        );
        const fresh = await logIn(h.api, account.email, NEW_PASSWORD);
        expect(fresh.user.email_verified).toBe(true);
        const stored = await h.backdoor.user(account.user.id);
        expect(stored?.email_verified).toBe(true);
        expect(stored?.password_hash).toMatch(/^\$argon2id\$/);
        expect(JSON.stringify(stored)).not.toContain(NEW_PASSWORD);

        // Every access and refresh token from before the reset is refused.
        for (const earlier of [account, other]) {
          expectUnauthorized(await h.api.get("/v1/auth/me", { bearer: earlier.access_token }));
          expectUnauthorized(
            await h.api.post("/v1/auth/refresh", {
              json: { refresh_token: earlier.refresh_token },
              ip: randomIp(),
            }),
          );
        }
        expect((await h.api.get("/v1/auth/me", { bearer: fresh.access_token })).status).toBe(200);

        // The link works once.
        const again = await h.api.post("/v1/auth/password/reset", {
          json: { token, new_password: `${NEW_PASSWORD} again` },
          ip: randomIp(),
        });
        expectInvalidFields(again, [["token"]]);
        expect((await h.backdoor.emailTokensOfUser(account.user.id))[0]?.used_at).not.toBeNull();
      });

      it("a reset of an account whose email nobody proved ends the tenant's keys and webhooks, as a Google claim does", async () => {
        // Someone signed up with the owner's email first; the owner takes the account back by mail.
        const h = subject();
        const squatter = await signUp(h.api);
        const key = await createApiKey(h.api, { bearer: squatter.access_token }, ["admin"]);
        const webhook = expectStatus(
          await h.api.post<{ webhook: { id: string } }>("/v1/webhooks", {
            apiKey: key.key,
            json: { url: "http://127.0.0.1:9/hook", events: ["*"] },
          }),
          201,
        ).body.webhook;
        const token = await resetToken(h, squatter.email);
        expectNoContent(
          await h.api.post("/v1/auth/password/reset", {
            json: { token, new_password: NEW_PASSWORD },
            ip: randomIp(),
          }),
        );

        // The squatter's key, session and password are refused; the rows say why.
        expectUnauthorized(await h.api.get("/v1/assets", { apiKey: key.key }));
        expectUnauthorized(await h.api.get("/v1/auth/me", { bearer: squatter.access_token }));
        expectUnauthorized(
          await h.api.post("/v1/auth/login", {
            json: { email: squatter.email, password: squatter.password },
            ip: randomIp(),
          }),
        );
        expect((await h.backdoor.apiKey(key.id))?.revoked_at).not.toBeNull();
        expect((await h.backdoor.webhook(webhook.id))?.deleted_at).not.toBeNull();
        const owner = await logIn(h.api, squatter.email, NEW_PASSWORD);
        expect(
          expectStatus(await h.api.get("/v1/webhooks", { bearer: owner.access_token }), 200).body,
        ).toEqual({
          data: [],
        });

        // Once the email is proven, a later reset ends the user's sessions only.
        const key2 = await createApiKey(h.api, { bearer: owner.access_token }, ["admin"]);
        const token2 = await resetToken(h, squatter.email);
        expectNoContent(
          await h.api.post("/v1/auth/password/reset", {
            json: { token: token2, new_password: `${NEW_PASSWORD} two` },
            ip: randomIp(),
          }),
        );
        expect((await h.api.get("/v1/assets", { apiKey: key2.key })).status).toBe(200);
        expect((await h.backdoor.apiKey(key2.id))?.revoked_at).toBeNull();
      });

      it("answers an unknown email as a known one (status, body, headers) and mails nothing", async () => {
        const h = subject();
        const account = await signUp(h.api);
        const nobody = uniqueEmail();
        const known = await forgot(h, account.email);
        const unknown = await forgot(h, nobody);
        expect({ status: unknown.status, text: unknown.text }).toEqual({ status: 202, text: "" });
        expect({ status: known.status, text: known.text }).toEqual({ status: 202, text: "" });
        expect(comparableHeaders(unknown.headers)).toEqual(comparableHeaders(known.headers));

        await h.mail.waitFor(account.email);
        // The unknown email's job has run to its end, and sent nothing.
        await until(
          () => h.backdoor.jobs(),
          (jobs) =>
            jobs.some(
              (j) =>
                j.name === "send-account-mail" &&
                (j.data as { email?: string }).email === nobody &&
                j.state === "completed",
            ),
        );
        expect(h.mail.received(nobody)).toEqual([]);
      });

      it("answers 202 before the mail server has accepted the mail", async () => {
        const h = subject();
        const account = await signUp(h.api);
        const held = h.mail.hold();
        try {
          expect((await forgot(h, account.email)).status).toBe(202);
          // The mail reaches the server's DATA phase and waits there, not accepted.
          await until(
            () => h.mail.held(),
            (n) => n >= 1,
          );
          expect(h.mail.received(account.email)).toEqual([]);
        } finally {
          held.release();
        }
        await h.mail.waitFor(account.email);
      });

      it("refuses a reset link from 30 minutes on; one used before works", async () => {
        const h = subject();
        const account = await signUp(h.api);
        const late = await resetToken(h, account.email);
        h.clock.advance(30 * MINUTE);
        const refused = await h.api.post("/v1/auth/password/reset", {
          json: { token: late, new_password: NEW_PASSWORD },
          ip: randomIp(),
        });
        expectInvalidFields(refused, [["token"]]);
        expect((await logIn(h.api, account.email, account.password)).user.id).toBe(account.user.id);

        const inTime = await resetToken(h, account.email);
        h.clock.advance(30 * MINUTE - SECOND);
        expectNoContent(
          await h.api.post("/v1/auth/password/reset", {
            json: { token: inTime, new_password: NEW_PASSWORD },
            ip: randomIp(),
          }),
        );
        expect((await logIn(h.api, account.email, NEW_PASSWORD)).user.id).toBe(account.user.id);
      });

      it("a new password ends the user's other reset links", async () => {
        const h = subject();
        const account = await signUp(h.api);
        const first = await resetToken(h, account.email);
        const second = await resetToken(h, account.email);
        expectNoContent(
          await h.api.post("/v1/auth/password/reset", {
            json: { token: second, new_password: NEW_PASSWORD },
            ip: randomIp(),
          }),
        );
        expectInvalidFields(
          await h.api.post("/v1/auth/password/reset", {
            json: { token: first, new_password: `${NEW_PASSWORD}!` },
            ip: randomIp(),
          }),
          [["token"]],
        );
        const rows = await h.backdoor.emailTokensOfUser(account.user.id);
        expect(rows.map((r) => r.used_at !== null)).toEqual([true, true]);
      });

      it("limits requests per email from any address, and per client address: 429 with Retry-After", async () => {
        const h = subject();
        const email = uniqueEmail();
        for (let i = 0; i < 5; i++) expect((await forgot(h, email)).status).toBe(202);
        const overEmail = await forgot(h, email.toUpperCase());
        expectError(overEmail, 429, "rate_limited");
        expect(Number(overEmail.headers.get("retry-after"))).toBeGreaterThan(0);

        const ip = randomIp();
        const statuses: number[] = [];
        for (let i = 0; i < 21; i++) statuses.push((await forgot(h, uniqueEmail(), ip)).status);
        expect(statuses.slice(0, 20).every((s) => s === 202)).toBe(true);
        expect(statuses[20]).toBe(429);
      });

      it("sends the mail again when the server refuses it for a while: nothing is lost", async () => {
        const h = subject();
        const account = await signUp(h.api);
        h.mail.refuseNext(1);
        expect((await forgot(h, account.email)).status).toBe(202);
        const [mail] = await h.mail.waitFor(account.email);
        expect(mail?.subject).toBe("Reset your password");
        // The operator sees the refused attempt counted, and the sent mail once its run has ended.
        const count = (text: string, result: string) =>
          Number(new RegExp(`^vod_account_mails_total\\{result="${result}"\\} (\\d+)`, "m").exec(text)?.[1]);
        const metrics = await until(
          async () => (await fetch(`${h.baseUrl}/metrics`)).text(),
          (text) => count(text, "sent") > 0,
        );
        expect(count(metrics, "retrying")).toBeGreaterThan(0);
        const token = tokenOf(mail, "reset-password");
        expectNoContent(
          await h.api.post("/v1/auth/password/reset", {
            json: { token, new_password: NEW_PASSWORD },
            ip: randomIp(),
          }),
        );
      });

      it("refuses a new password of 7 characters without echoing it, and spends no link", async () => {
        const h = subject();
        const account = await signUp(h.api);
        const token = await resetToken(h, account.email);
        const reply = await h.api.post("/v1/auth/password/reset", {
          json: { token, new_password: "Sev7nCh" },
          ip: randomIp(),
        });
        expectInvalidFields(reply, [["new_password"]]);
        expect(reply.text).not.toContain("Sev7nCh");
        expect((await h.backdoor.emailTokensOfUser(account.user.id))[0]?.used_at).toBeNull();
        const signedIn: SignedIn = await logIn(h.api, account.email, DEFAULT_PASSWORD);
        expect(signedIn.user.id).toBe(account.user.id);
      });
    });
  });
};

import { randomInt } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  createApiKey,
  expectError,
  expectNoContent,
  expectStatus,
  expectUnauthorized,
  type HttpClient,
  type MakeHttpSubject,
  MINUTE,
  type Reply,
  randomIp,
  signUp,
  uniqueEmail,
  withSubject,
} from "./client.js";

/** A 429 whose Retry-After header is a whole number of seconds, at least 1 and at most `max`, echoed in details. */
export const expectRateLimited = (reply: Reply<unknown>, max: number): number => {
  const body = expectError(reply, 429, "rate_limited");
  const header = reply.headers.get("retry-after");
  expect(header).toMatch(/^\d+$/);
  const seconds = Number(header);
  expect(seconds).toBeGreaterThanOrEqual(1);
  expect(seconds).toBeLessThanOrEqual(max);
  expect(body.details).toStrictEqual({ retry_after: seconds });
  return seconds;
};

/** The per-IP bucket of signup, login, google and refresh, by default (DECISIONS). */
const AUTH_PER_MINUTE = 20;

const login = (api: HttpClient, email: string, password: string, ip: string) =>
  api.post("/v1/auth/login", { json: { email, password }, ip });

/** The default buckets, each on a host of its own with a low limit. */
export const describeRateLimits = (makeSubject: MakeHttpSubject): void => {
  describe("rate limits", () => {
    it("limits signup, login, google and refresh per client IP, in one bucket", async () => {
      await withSubject(
        makeSubject,
        { VOD_RATE_LIMIT_AUTH_PER_MINUTE: "3" },
        async ({ api, clock, google }) => {
          const account = await signUp(api);
          const ip = randomIp();
          for (let i = 0; i < 3; i++)
            expectStatus(await login(api, account.email, account.password, ip), 200);
          expectRateLimited(await login(api, account.email, account.password, ip), 60);
          // The same bucket serves the other unauthenticated operations.
          expectRateLimited(
            await api.post("/v1/auth/refresh", { json: { refresh_token: account.refresh_token }, ip }),
            60,
          );
          expectRateLimited(
            await api.post("/v1/auth/signup", {
              json: { email: uniqueEmail(), password: account.password },
              ip,
            }),
            60,
          );
          expectRateLimited(
            await api.post("/v1/auth/google", { json: { id_token: google.signIdToken() }, ip }),
            60,
          );
          // Another address is still served, and the first is again after the window.
          expectStatus(await login(api, account.email, account.password, randomIp()), 200);
          clock.advance(MINUTE);
          expectStatus(await login(api, account.email, account.password, ip), 200);
        },
      );
    });

    it("counts the address the trusted proxy saw, whatever the client wrote left of it in X-Forwarded-For", async () => {
      // The hosts under test trust one hop (VOD_TRUST_PROXY=1): the test is the proxy, and the
      // last entry is the client's address; the entries before it are the client's own words.
      await withSubject(makeSubject, {}, async ({ api }) => {
        const real = randomIp();
        const statuses: number[] = [];
        for (let i = 0; i < 30; i++) {
          const reply = await api.post("/v1/auth/refresh", {
            json: { refresh_token: `not-a-token-${i}` },
            headers: { "x-forwarded-for": `${randomIp()}, ${real}` },
          });
          statuses.push(reply.status);
          if (i >= AUTH_PER_MINUTE) expectRateLimited(reply, 60);
        }
        expect(statuses).toEqual([
          ...Array<number>(AUTH_PER_MINUTE).fill(401),
          ...Array<number>(30 - AUTH_PER_MINUTE).fill(429),
        ]);
        // The spoofed addresses are not limited: another client still is served.
        const other = await signUp(api);
        expectStatus(await login(api, other.email, other.password, `${real}, ${randomIp()}`), 200);
      });
    });

    it("with trusted CIDRs, counts the first address from the right that is not a trusted proxy's", async () => {
      // The test calls from 127.0.0.1; a proxy of 10.0.0.0/8 sits between it and the client.
      await withSubject(
        makeSubject,
        { VOD_TRUST_PROXY: "127.0.0.1/32, 10.0.0.0/8", VOD_RATE_LIMIT_AUTH_PER_MINUTE: "3" },
        async ({ api }) => {
          const account = await signUp(api);
          const real = `203.0.113.${randomInt(1, 255)}`;
          const via = (client: string) => `${randomIp()}, ${client}, ${randomIp()}`;
          for (let i = 0; i < 3; i++)
            expectStatus(await login(api, account.email, account.password, via(real)), 200);
          expectRateLimited(await login(api, account.email, account.password, via(real)), 60);
          // Another client behind the same proxies has a bucket of its own.
          expectStatus(await login(api, account.email, account.password, via("203.0.113.0")), 200);
          // Straight from a trusted address with no X-Forwarded-For: that address is the client.
          expectStatus(
            await api.post("/v1/auth/login", { json: { email: account.email, password: account.password } }),
            200,
          );
        },
      );
    });

    it("counts failed logins per email and client IP: ten lock that address out, not the owner elsewhere", async () => {
      // The documented defaults: 10 failures per (email, IP), 100 per email, each per 15 minutes.
      await withSubject(makeSubject, {}, async ({ api, clock }) => {
        const account = await signUp(api);
        const guesser = randomIp();
        for (let i = 0; i < 10; i++)
          expectError(await login(api, account.email, `wrong guess ${i}`, guesser), 401, "unauthorized");
        // The owner, elsewhere, signs in.
        expectStatus(await login(api, account.email, account.password, randomIp()), 200);
        // The guesser's address is refused before the password is looked at, even a right one.
        expectRateLimited(await login(api, account.email, account.password, guesser), 15 * 60);
        expectRateLimited(await login(api, account.email.toUpperCase(), "wrong guess", guesser), 15 * 60);
        // That address may still sign in to another account.
        const other = await signUp(api);
        expectStatus(await login(api, other.email, other.password, guesser), 200);
        clock.advance(15 * MINUTE);
        expectStatus(await login(api, account.email, account.password, guesser), 200);
      });
    });

    it("counts failed logins per email from all addresses, and only failures", async () => {
      await withSubject(
        makeSubject,
        { VOD_RATE_LIMIT_LOGIN_PER_EMAIL: "4", VOD_RATE_LIMIT_LOGIN_PER_EMAIL_AND_IP: "3" },
        async ({ api, clock }) => {
          const account = await signUp(api);
          const other = await signUp(api);
          for (let i = 0; i < 3; i++)
            expectError(await login(api, account.email, "a wrong password", randomIp()), 401, "unauthorized");
          // Right passwords are not counted: the limit is of failures.
          for (let i = 0; i < 5; i++)
            expectStatus(await login(api, account.email, account.password, randomIp()), 200);
          expectError(await login(api, account.email, "a wrong password", randomIp()), 401, "unauthorized");
          // Four failures, each from another address: the email is refused from every address.
          expectRateLimited(await login(api, account.email, account.password, randomIp()), 15 * 60);
          expectStatus(await login(api, other.email, other.password, randomIp()), 200);
          clock.advance(15 * MINUTE);
          expectStatus(await login(api, account.email, account.password, randomIp()), 200);
        },
      );
    });

    it("checks at most the limit's passwords of a burst of concurrent guesses, and not one more", async () => {
      // Each guess is counted before its password is checked: a look first and a count after
      // would let the whole burst past the look.
      await withSubject(makeSubject, { VOD_RATE_LIMIT_LOGIN_PER_EMAIL: "5" }, async ({ api }) => {
        const account = await signUp(api);
        const answers = await Promise.all(
          Array.from({ length: 20 }, (_, i) => login(api, account.email, `burst guess ${i}`, randomIp())),
        );
        const statuses = answers.map((a) => a.status).sort();
        expect(statuses).toEqual([...Array(5).fill(401), ...Array(15).fill(429)]);
        // Settled: the email stays refused, a right password included.
        expectRateLimited(await login(api, account.email, account.password, randomIp()), 15 * 60);
      });
    });

    it("counts a wrong current password as a failed login of the email, and refuses a change over the limit", async () => {
      await withSubject(makeSubject, { VOD_RATE_LIMIT_LOGIN_PER_EMAIL_AND_IP: "3" }, async ({ api }) => {
        const account = await signUp(api);
        const change = (current: string, ip: string) =>
          api.post("/v1/auth/password", {
            bearer: account.access_token,
            json: { current_password: current, new_password: "a much better passphrase" },
            ip,
          });
        const guesser = randomIp();
        for (let i = 0; i < 3; i++) expectUnauthorized(await change(`wrong guess ${i}`, guesser));
        // Over the limit, the right current password is not even checked; nor does the login take it.
        expectRateLimited(await change(account.password, guesser), 15 * 60);
        expectRateLimited(await login(api, account.email, account.password, guesser), 15 * 60);
        // The password is unchanged.
        expectStatus(await login(api, account.email, account.password, randomIp()), 200);

        // Failed logins count against the change the same way.
        const elsewhere = randomIp();
        for (let i = 0; i < 3; i++)
          expectError(await login(api, account.email, `wrong guess ${i}`, elsewhere), 401, "unauthorized");
        expectRateLimited(await change(account.password, elsewhere), 15 * 60);
        expectNoContent(await change(account.password, randomIp()));
      });
    });

    it("limits authenticated calls per credential, and serves it again after a minute", async () => {
      await withSubject(makeSubject, { VOD_RATE_LIMIT_API_PER_MINUTE: "3" }, async ({ api, clock }) => {
        const account = await signUp(api);
        const key = await createApiKey(api, { bearer: account.access_token }, ["read"]);
        for (let i = 0; i < 3; i++) expectStatus(await api.get("/v1/assets", { apiKey: key.key }), 200);
        expectRateLimited(await api.get("/v1/assets", { apiKey: key.key }), 60);
        // Another credential of the same tenant has its own bucket.
        expectStatus(await api.get("/v1/assets", { bearer: account.access_token }), 200);
        clock.advance(MINUTE);
        expectStatus(await api.get("/v1/assets", { apiKey: key.key }), 200);
      });
    });
  });
};

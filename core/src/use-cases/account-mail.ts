import { Effect, Option } from "effect";
import type { VodConfig } from "../config.js";
import { type EmailToken, type EmailTokenPurpose, emailTokenLifetimeMs } from "../domain/email-token.js";
import type { TenantId } from "../domain/ids.js";
import { normalizeEmail, publicUser } from "../domain/user.js";
import { Conflict, InvalidRequest, type StorageError } from "../errors.js";
import { type Job, JobFailed } from "../ports/job-queue.js";
import type { MailMessage } from "../ports/mailer.js";
import type { Repositories } from "../ports/repositories.js";
import type { Requests } from "../schema/index.js";
import type { VodPorts } from "../tokens.js";
import type { Forget, Principal } from "./authenticate.js";
import { proveEmail } from "./email-proof.js";
import { enforceRate, limitAuthByIp as limitByIp, randomBase62, sha256Hex } from "./support.js";

type ResetInput = typeof Requests.PasswordResetBody.Type;

const ONE_HOUR = 60 * 60 * 1000;

/** What one mail job did, for the worker's log line. */
export type AccountMailOutcome =
  | { readonly status: "sent"; readonly purpose: EmailTokenPurpose; readonly user_id: string }
  /** Nothing to send: no account with that email, the user is gone, or the email is verified already. */
  | { readonly status: "skipped"; readonly purpose: EmailTokenPurpose };

/** The answer to a link that cannot be used: the same whether it is unknown, used or expired. */
const invalidToken = () =>
  new InvalidRequest({
    message: "the link is invalid, used or expired; ask for a new one",
    details: { fields: [{ path: ["token"], message: "is invalid, used or expired" }] },
  });

/**
 * Spends a link of `purpose` and answers its user, if the account still has the email the link
 * was sent to; an unknown, used or expired link, or one whose account changed email, is refused.
 */
const spendLink = (tx: Repositories, token: string, purpose: EmailTokenPurpose, now: number) =>
  Effect.gen(function* () {
    const used = yield* tx.emailTokens.use(sha256Hex(token), purpose, now);
    if (Option.isNone(used)) return yield* Effect.fail(invalidToken());
    const { tenant_id, user_id, email } = used.value;
    const user = yield* tx.users.get(tenant_id, user_id);
    if (Option.isNone(user) || normalizeEmail(user.value.email) !== normalizeEmail(email))
      return yield* Effect.fail(invalidToken());
    return user.value;
  });

const mailOf = (purpose: EmailTokenPurpose, to: string, link: string): MailMessage =>
  purpose === "verify_email"
    ? {
        to,
        subject: "Confirm your email address",
        text: `Open this link to confirm that ${to} is your email address:\n\n${link}\n\nThe link works once, for 24 hours. If you did not ask for it, ignore this mail.\n`,
      }
    : {
        to,
        subject: "Reset your password",
        text: `Open this link to choose a new password:\n\n${link}\n\nThe link works once, for 30 minutes, and signs you out everywhere. If you did not ask for it, ignore this mail: your password stays as it is.\n`,
      };

/**
 * Email verification and password reset (DECISIONS "Account security"). The requests only
 * enqueue a mail job: the token is made, stored (its hash) and mailed by the job, with the
 * queue's retries, so no request waits on the mail server, and a reset request answers alike
 * whether or not the email has an account, since it never looks.
 */
export const makeAccountMail = (ports: VodPorts, config: VodConfig, forget: Forget) => {
  const { clock, ids, storage, passwordHasher, rateLimiter } = ports;

  const limit = (key: string, rule: { limit: number; windowMs: number }) =>
    enforceRate(rateLimiter, key, rule, clock.now());
  const limitAuthByIp = (clientIp: string) => limitByIp(ports, config, clientIp);
  const mailRule = () => ({ limit: config.rateLimits.accountMailPerHour, windowMs: ONE_HOUR });

  /** The spec's email verification request: a link to the user's own address. */
  const requestVerification = (principal: Principal & { kind: "user" }) =>
    Effect.gen(function* () {
      if (principal.user.email_verified)
        return yield* Effect.fail(new Conflict({ message: "the email is verified already" }));
      yield* limit(`mail:user:${principal.user.id}`, mailRule());
      yield* storage.jobs.enqueue("send-account-mail", {
        purpose: "verify_email",
        tenant_id: principal.tenant.id,
        user_id: principal.user.id,
      });
    });

  /** The spec's email confirmation: the link's token proves the address. */
  const confirmEmail = (token: string, clientIp: string) =>
    Effect.gen(function* () {
      yield* limitAuthByIp(clientIp);
      // The link is spent if and only if the email is marked verified.
      const user = yield* storage.transaction((tx) =>
        Effect.gen(function* () {
          const found = yield* spendLink(tx, token, "verify_email", clock.now());
          yield* tx.users.setEmailVerified(found.tenant_id, found.id, true);
          return found;
        }),
      );
      // The identity every session of the user reads (`me`) shows the verified email at once.
      yield* forget({ kind: "user", id: user.id });
      return { user: publicUser({ ...user, email_verified: true }) };
    });

  /**
   * A forgotten password: the same work for any email (two rate-limit hits and an
   * enqueue), so neither the answer nor its time tells whether the email has an account.
   */
  const forgotPassword = (email: string, clientIp: string) =>
    Effect.gen(function* () {
      yield* limitAuthByIp(clientIp);
      const normalized = normalizeEmail(email);
      yield* limit(`mail:email:${normalized}`, mailRule());
      yield* storage.jobs.enqueue("send-account-mail", { purpose: "reset_password", email: normalized });
    });

  /**
   * A password reset: the new password, every session of the user ended, the other
   * reset links spent, and the email proven (the mail reached it; an unproven account's keys and
   * webhooks end, as a Google claim's do): one transaction.
   */
  const resetPassword = (input: ResetInput, clientIp: string) =>
    Effect.gen(function* () {
      yield* limitAuthByIp(clientIp);
      const passwordHash = yield* passwordHasher.hash(input.new_password);
      const now = clock.now();
      const reset = yield* storage.transaction((tx) =>
        Effect.gen(function* () {
          const user = yield* spendLink(tx, input.token, "reset_password", now);
          const { tenant_id, id: user_id } = user;
          yield* tx.users.setPasswordHash(tenant_id, user_id, passwordHash);
          const claimed = yield* proveEmail(tx, user, now);
          yield* tx.refreshSessions.revokeUserSessions(tenant_id, user_id, null, now, "password_changed");
          yield* tx.emailTokens.useAllOfUser(tenant_id, user_id, "reset_password", now);
          return { tenant_id, user_id, claimed };
        }),
      );
      // Every access token of the user is refused from now on, on every node; and when the
      // email was never proven, every key of the tenant too.
      yield* forget(
        reset.claimed ? { kind: "tenant", id: reset.tenant_id } : { kind: "user", id: reset.user_id },
      );
    });

  /** Makes a token for the user, stores its hash, and mails the link. */
  const mailLink = (
    purpose: EmailTokenPurpose,
    user: { readonly id: string; readonly tenant_id: TenantId; readonly email: string },
  ) =>
    Effect.gen(function* () {
      const mailer = ports.mailer;
      if (!mailer) return yield* Effect.fail(jobFailed("this process has no mailer"));
      const token = randomBase62(ids, 43); // 43 base62 characters: 256 bits
      const now = clock.now();
      const row: EmailToken = {
        token_hash: sha256Hex(token),
        purpose,
        tenant_id: user.tenant_id,
        user_id: user.id,
        email: user.email,
        created_at: now,
        expires_at: now + emailTokenLifetimeMs[purpose],
        used_at: null,
      };
      yield* storage.emailTokens.insert(row);
      const page = purpose === "verify_email" ? "verify-email" : "reset-password";
      yield* Effect.mapError(
        mailer.send(mailOf(purpose, user.email, `${config.appUrl}/${page}#token=${token}`)),
        (e) => jobFailed(e.message, e),
      );
      return { status: "sent", purpose, user_id: user.id } as const;
    });

  /**
   * One run of a mail job. A failed send fails the run, which the queue retries with backoff;
   * each run makes a token of its own, so a link mailed by a run that then failed still works.
   */
  const sendAccountMail = (job: Job<"send-account-mail">): Effect.Effect<AccountMailOutcome, JobFailed> =>
    Effect.gen(function* () {
      const data = job.data;
      const skipped = { status: "skipped", purpose: data.purpose } as const;
      if (data.purpose === "verify_email") {
        const user = yield* storage.users.get(data.tenant_id, data.user_id);
        if (Option.isNone(user) || user.value.email_verified) return skipped;
        return yield* mailLink("verify_email", user.value);
      }
      const user = yield* storage.users.findByEmail(data.email);
      if (Option.isNone(user)) return skipped;
      return yield* mailLink("reset_password", user.value);
    }).pipe(
      Effect.catchTag("StorageError", (e: StorageError) => Effect.fail(jobFailed(e.message, e))),
      Effect.withSpan("sendAccountMail"),
    );

  return { requestVerification, confirmEmail, forgotPassword, resetPassword, sendAccountMail };
};

const jobFailed = (message: string, cause?: unknown): JobFailed => new JobFailed({ message, cause });

export type AccountMail = ReturnType<typeof makeAccountMail>;

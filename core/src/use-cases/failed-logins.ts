import { Effect, Exit } from "effect";
import type { VodConfig } from "../config.js";
import { normalizeEmail } from "../domain/user.js";
import type { RateLimited, StorageError } from "../errors.js";
import type { RateRule } from "../ports/rate-limiter.js";
import type { VodPorts } from "../tokens.js";
import { rateLimited } from "./support.js";

const FIFTEEN_MINUTES = 15 * 60 * 1000;

/**
 * The failed-login limits (DECISIONS "Account security"): failures only are counted, per (email,
 * client IP) and per email from all IPs, so that a stranger's guesses from elsewhere cannot lock
 * the owner out while a right password is within the limits. A wrong password on the way in and
 * a wrong current password on a password change are both failures of the email.
 *
 * Each attempt is reserved (counted) before the password is checked and given back when it was
 * no failure: a burst of concurrent guesses gets at most the limit checked, where a look before
 * and a count after let every guess of the burst through the look.
 */
export const makeFailedLogins = (
  { clock, rateLimiter }: Pick<VodPorts, "clock" | "rateLimiter">,
  config: VodConfig,
) => {
  const buckets = (email: string, clientIp: string): ReadonlyArray<readonly [string, RateRule]> => {
    const who = normalizeEmail(email);
    const windowMs = FIFTEEN_MINUTES;
    // An email holds no whitespace (the schema's pattern): the space keeps the two kinds of key apart.
    return [
      [`login-failures:${who}`, { limit: config.rateLimits.loginFailuresPerEmailPer15Minutes, windowMs }],
      [
        `login-failures:${who} ${clientIp}`,
        { limit: config.rateLimits.loginFailuresPerEmailAndIpPer15Minutes, windowMs },
      ],
    ];
  };

  /**
   * Runs `check` as one attempt of the email from the address, 429 instead when either limit has
   * been reached (before the password is looked at, so that it is no oracle then). The attempt
   * stays counted when `failed` says its outcome is a failure, and is given back otherwise (a
   * right password, or trouble that decided nothing).
   */
  const attempt = <A, E>(
    email: string,
    clientIp: string,
    check: Effect.Effect<A, E>,
    failed: (outcome: A) => boolean,
  ): Effect.Effect<A, E | RateLimited | StorageError> =>
    Effect.gen(function* () {
      const now = clock.now();
      const rules = buckets(email, clientIp);
      const giveBack = Effect.forEach(rules, ([key, rule]) => rateLimiter.release(key, rule, now), {
        discard: true,
      });
      const decisions = yield* Effect.forEach(rules, ([key, rule]) => rateLimiter.hit(key, rule, now));
      const waits = decisions.flatMap((d) => (d.allowed ? [] : [d.retryAfterMs]));
      if (waits.length > 0) {
        yield* giveBack;
        return yield* Effect.fail(rateLimited(Math.max(...waits)));
      }
      const outcome = yield* Effect.exit(check);
      if (!(Exit.isSuccess(outcome) && failed(outcome.value))) yield* giveBack;
      return yield* outcome;
    });

  return { attempt };
};

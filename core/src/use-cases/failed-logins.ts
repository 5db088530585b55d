import { Effect } from "effect";
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

  /** 429 when either limit has been reached: checked before the password, so that it is no oracle then. */
  const refuseWhenOver = (email: string, clientIp: string): Effect.Effect<void, RateLimited | StorageError> =>
    Effect.flatMap(
      Effect.forEach(buckets(email, clientIp), ([key, rule]) => rateLimiter.peek(key, rule, clock.now())),
      (decisions) => {
        const waits = decisions.flatMap((d) => (d.allowed ? [] : [d.retryAfterMs]));
        return waits.length === 0 ? Effect.void : Effect.fail(rateLimited(Math.max(...waits)));
      },
    );

  /** Counts one failure of the email from the address. */
  const count = (email: string, clientIp: string): Effect.Effect<void, StorageError> =>
    Effect.forEach(buckets(email, clientIp), ([key, rule]) => rateLimiter.hit(key, rule, clock.now()), {
      discard: true,
    });

  return { refuseWhenOver, count };
};

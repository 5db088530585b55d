import type { Mailer } from "@vod/core";
import { Effect } from "effect";

/**
 * Writes each message to the log at info instead of sending it: where no mail server is
 * configured (the embedded default), whoever reads the log follows the link. The link carries a
 * credential, so this is for development and single-operator installs only.
 */
export const logMailer = (log: { info(details: object, message: string): void }): Mailer => ({
  send: (message) =>
    Effect.sync(() =>
      log.info(
        { to: message.to, subject: message.subject, text: message.text },
        "mail written to the log, not sent",
      ),
    ),
});

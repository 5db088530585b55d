import { Data, type Effect } from "effect";

/** One plain-text mail to one address. */
export interface MailMessage {
  readonly to: string;
  readonly subject: string;
  readonly text: string;
}

/** The mail was not accepted by the server (refused, unreachable, timed out). */
export class MailNotSent extends Data.TaggedError("MailNotSent")<{
  readonly message: string;
  readonly cause?: unknown;
}> {}

/**
 * Sends account mail (verification and password reset links). Network I/O, so an adapter: SMTP,
 * the log (development), memory (tests). Resolves once the server has accepted the message.
 */
export interface Mailer {
  send(message: MailMessage): Effect.Effect<void, MailNotSent>;
}

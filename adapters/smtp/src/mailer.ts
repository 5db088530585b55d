import { type Mailer, type MailMessage, MailNotSent } from "@vod/core";
import { Effect } from "effect";
import { createTransport } from "nodemailer";

export interface SmtpMailerOptions {
  /**
   * `smtp://user:password@host:587` (STARTTLS when the server offers it) or
   * `smtps://user:password@host:465` (TLS from the start); user and password URL-encoded.
   */
  readonly url: string;
  /** The From header: `no-reply@example.com` or `"Example" <no-reply@example.com>`. */
  readonly from: string;
  /** Connection, greeting and idle socket limits, in milliseconds (default 10 s, 10 s, 30 s). */
  readonly timeouts?: {
    readonly connectionMs?: number;
    readonly greetingMs?: number;
    readonly socketMs?: number;
  };
}

export interface SmtpMailer extends Mailer {
  close(): void;
}

/** Sends each message over SMTP with nodemailer; resolves once the server accepted it. */
export const smtpMailer = (options: SmtpMailerOptions): SmtpMailer => {
  const url = new URL(options.url);
  if (url.protocol !== "smtp:" && url.protocol !== "smtps:")
    throw new Error("the SMTP URL must start with smtp:// or smtps://");
  const transport = createTransport({
    host: url.hostname,
    port: url.port === "" ? (url.protocol === "smtps:" ? 465 : 587) : Number(url.port),
    secure: url.protocol === "smtps:",
    ...(url.username
      ? { auth: { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } }
      : {}),
    connectionTimeout: options.timeouts?.connectionMs ?? 10_000,
    greetingTimeout: options.timeouts?.greetingMs ?? 10_000,
    socketTimeout: options.timeouts?.socketMs ?? 30_000,
  });
  return {
    send: (message: MailMessage) =>
      Effect.tryPromise({
        try: (signal) => {
          const sending = transport.sendMail({
            from: options.from,
            to: message.to,
            subject: message.subject,
            text: message.text,
          });
          signal.addEventListener("abort", () => transport.close(), { once: true });
          return sending;
        },
        catch: (cause) =>
          new MailNotSent({
            // nodemailer's message names the server's reply or the network error, never the text.
            message: `SMTP send failed: ${cause instanceof Error ? cause.message : String(cause)}`,
            cause,
          }),
      }).pipe(Effect.asVoid),
    close: () => transport.close(),
  };
};

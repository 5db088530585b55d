import { type Mailer, type MailMessage, MailNotSent } from "@vod/core";
import { Effect } from "effect";

export interface MemoryMailer extends Mailer {
  /** Every message accepted, in the order sent. */
  readonly sent: ReadonlyArray<MailMessage>;
  /** Refuses the next `count` sends, as a mail server that is down would. */
  failNext(count: number): void;
}

/** Keeps mail in memory, for embedders' tests: read `sent` instead of a mailbox. */
export const memoryMailer = (): MemoryMailer => {
  const sent: MailMessage[] = [];
  let failures = 0;
  return {
    sent,
    failNext: (count) => {
      failures = count;
    },
    send: (message) =>
      Effect.suspend(() => {
        if (failures > 0) {
          failures--;
          return Effect.fail(new MailNotSent({ message: "the memory mailer refused it" }));
        }
        sent.push(message);
        return Effect.void;
      }),
  };
};

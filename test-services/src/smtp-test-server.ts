import type { AddressInfo } from "node:net";
import { simpleParser } from "mailparser";
import { SMTPServer } from "smtp-server";

/** One message as the server accepted it. */
export interface ReceivedMail {
  /** The envelope's sender and recipients (MAIL FROM, RCPT TO). */
  readonly envelopeFrom: string;
  readonly envelopeTo: ReadonlyArray<string>;
  /** Headers and body as parsed from the DATA. */
  readonly from: string;
  readonly to: string;
  readonly subject: string;
  readonly text: string;
}

export interface SmtpTestServer {
  /** `smtp://user:password@127.0.0.1:<port>`: a client must log in with these. */
  readonly url: string;
  /** Messages accepted so far to `to` (every one when absent), in the order accepted. */
  received(to?: string): ReadonlyArray<ReceivedMail>;
  /** Waits for `count` messages to `to`; fails after `timeoutMs` naming what came. */
  waitFor(to: string, count?: number, timeoutMs?: number): Promise<ReadonlyArray<ReceivedMail>>;
  /**
   * From now on the DATA of each message is read but not answered until `release` is called:
   * the client waits for the server's acceptance meanwhile. `held()` counts those waiting.
   */
  hold(): { release(): void };
  /** Messages whose DATA is read and waits for `release`. */
  held(): number;
  /** Answers the next `count` messages' DATA with 451 (try again later). */
  refuseNext(count: number): void;
  close(): Promise<void>;
}

/**
 * A real SMTP server on 127.0.0.1 (smtp-server), which collects what it is sent: tests of
 * account mail check what a mailbox would get, over the protocol, without a mock of the mailer.
 * It asks for AUTH (PLAIN or LOGIN, without TLS on this loopback address) and offers no STARTTLS.
 */
export const startSmtpTestServer = async (): Promise<SmtpTestServer> => {
  const user = "vod-test";
  const password = `p-${Math.random().toString(36).slice(2)}`;
  const got: ReceivedMail[] = [];
  let gate: Promise<void> | undefined;
  let waiting = 0;
  let refusals = 0;
  const server = new SMTPServer({
    logger: false,
    // A client still connected at close is cut off after this, not after smtp-server's 30 s.
    closeTimeout: 1_000,
    disabledCommands: ["STARTTLS"],
    allowInsecureAuth: true,
    authMethods: ["PLAIN", "LOGIN"],
    onAuth: (auth, _session, callback) =>
      auth.username === user && auth.password === password
        ? callback(null, { user })
        : callback(new Error("invalid username or password")),
    onData: (stream, session, callback) => {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", async () => {
        if (refusals > 0) {
          refusals--;
          return callback(Object.assign(new Error("try again later"), { responseCode: 451 }));
        }
        const held = gate;
        if (held) {
          waiting++;
          await held;
          waiting--;
        }
        try {
          const parsed = await simpleParser(Buffer.concat(chunks));
          const address = (a: typeof parsed.to) =>
            (Array.isArray(a) ? a : a ? [a] : []).map((x) => x.text).join(", ");
          got.push({
            envelopeFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
            envelopeTo: session.envelope.rcptTo.map((r) => r.address),
            from: parsed.from?.text ?? "",
            to: address(parsed.to),
            subject: parsed.subject ?? "",
            text: parsed.text ?? "",
          });
          callback();
        } catch (error) {
          callback(error as Error);
        }
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.server.address() as AddressInfo;
  const received = (to?: string) =>
    got.filter((m) => to === undefined || m.envelopeTo.some((r) => r.toLowerCase() === to.toLowerCase()));
  return {
    url: `smtp://${user}:${password}@127.0.0.1:${port}`,
    received,
    waitFor: async (to, count = 1, timeoutMs = 20_000) => {
      const end = Date.now() + timeoutMs;
      while (received(to).length < count) {
        if (Date.now() > end)
          throw new Error(
            `${to} got ${received(to).length} of ${count} mails; the server has ${got.length} in all`,
          );
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return received(to);
    },
    hold: () => {
      let release = () => {};
      gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      return {
        release: () => {
          gate = undefined;
          release();
        },
      };
    },
    held: () => waiting,
    refuseNext: (count) => {
      refusals = count;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
};

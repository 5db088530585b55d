import { createServer } from "node:net";
import { logMailer, smtpMailer } from "@vod/adapter-smtp";
import { type SmtpTestServer, startSmtpTestServer } from "@vod/test-services";
import { Effect, Either } from "effect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/** A port nothing listens on: bound, then let go. */
const closedPort = () =>
  new Promise<number>((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

describe("smtpMailer", () => {
  let server: SmtpTestServer;
  beforeAll(async () => {
    server = await startSmtpTestServer();
  });
  afterAll(() => server.close());

  it("logs in and sends a plain-text message the server accepts", async () => {
    const mailer = smtpMailer({ url: server.url, from: "Example <no-reply@example.com>" });
    const to = `ann-${Date.now()}@example.com`;
    await Effect.runPromise(
      mailer.send({ to, subject: "Hello", text: "Line one\nhttps://x.test/#token=abc\n" }),
    );
    const [mail] = await server.waitFor(to);
    expect(mail).toMatchObject({
      envelopeFrom: "no-reply@example.com",
      envelopeTo: [to],
      from: '"Example" <no-reply@example.com>',
      to,
      subject: "Hello",
    });
    expect(mail?.text).toContain("https://x.test/#token=abc");
    mailer.close();
  });

  it("fails with MailNotSent on wrong credentials, a refusal, or no server, naming no password", async () => {
    const wrong = new URL(server.url);
    wrong.password = "not-the-password";
    const attempts = [
      smtpMailer({ url: wrong.href, from: "no-reply@example.com" }),
      smtpMailer({ url: `smtp://127.0.0.1:${await closedPort()}`, from: "no-reply@example.com" }),
    ];
    for (const mailer of attempts) {
      const result = await Effect.runPromise(
        Effect.either(mailer.send({ to: "ann@example.com", subject: "s", text: "t" })),
      );
      expect(Either.isLeft(result) && result.left._tag).toBe("MailNotSent");
      if (Either.isLeft(result)) expect(result.left.message).not.toContain("not-the-password");
    }
    server.refuseNext(1);
    const refused = await Effect.runPromise(
      Effect.either(
        smtpMailer({ url: server.url, from: "no-reply@example.com" }).send({
          to: "b@example.com",
          subject: "s",
          text: "t",
        }),
      ),
    );
    expect(Either.isLeft(refused) && refused.left.message).toMatch(/451/);
  });

  it("refuses a URL of another scheme at construction", () => {
    expect(() => smtpMailer({ url: "http://smtp.example.com", from: "a@example.com" })).toThrow(/smtp:\/\//);
  });
});

describe("logMailer", () => {
  it("writes the whole message at info", async () => {
    const lines: Array<{ details: object; message: string }> = [];
    const mailer = logMailer({ info: (details, message) => lines.push({ details, message }) });
    await Effect.runPromise(mailer.send({ to: "ann@example.com", subject: "S", text: "link" }));
    expect(lines).toEqual([
      { details: { to: "ann@example.com", subject: "S", text: "link" }, message: expect.any(String) },
    ]);
  });
});

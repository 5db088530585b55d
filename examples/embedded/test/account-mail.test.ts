import { memoryJobQueue, memoryMailer, memoryStorage } from "@vod/adapter-memory";
import { embeddedVod } from "@vod/example-embedded";
import { Effect } from "effect";
import { expect, it } from "vitest";

const until = async (done: () => boolean) => {
  const end = Date.now() + 10_000;
  while (!done()) {
    if (Date.now() > end) throw new Error("gave up waiting");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

it("resets a password by a mailed link with the memory mailer, sending again when a send fails", async () => {
  const storage = memoryStorage();
  const mailer = memoryMailer();
  const vod = await embeddedVod({ storage, mailer });
  // Mail goes out from the job queue: an embedder runs the mail jobs where its jobs run.
  const worker = await Effect.runPromise(
    memoryJobQueue(storage, { retryDelayMs: 10 }).work("send-account-mail", { concurrency: 1 }, (job) =>
      Effect.asVoid(vod.accountMail.sendAccountMail(job)),
    ),
  );
  try {
    const email = `reset-${Date.now()}@example.com`;
    await Effect.runPromise(vod.accounts.signup({ email, password: "correct horse battery" }, "127.0.0.1"));
    mailer.failNext(1);
    await Effect.runPromise(vod.accountMail.forgotPassword(email, "127.0.0.1"));
    await until(() => mailer.sent.length === 1);
    const [mail] = mailer.sent;
    expect(mail).toMatchObject({ to: email, subject: "Reset your password" });
    const token = /\/reset-password#token=([A-Za-z0-9]{43})/.exec(mail?.text ?? "")?.[1] ?? "";
    await Effect.runPromise(
      vod.accountMail.resetPassword({ token, new_password: "another horse battery" }, "127.0.0.1"),
    );
    const signedIn = await Effect.runPromise(
      vod.accounts.login({ email, password: "another horse battery" }, "127.0.0.1"),
    );
    expect(signedIn.user).toMatchObject({ email, email_verified: true });
  } finally {
    await Effect.runPromise(worker.stop);
  }
});

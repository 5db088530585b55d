#!/usr/bin/env node
// issue 24: does POST /v1/auth/password/forgot take as long for an email with an account as for
// one without? Known and unknown emails are sent one request at a time, in a shuffled order, to a
// host whose worker sends the reset mails over real SMTP (the contract tests' SMTP server)
// meanwhile. Shuffled, not alternated: a known email's mail work runs beside the requests after
// it, and a fixed alternation would always put it beside the same kind.
import { join } from "node:path";
import {
  benchArgs,
  benchScratch,
  callJson,
  cli,
  describeBuild,
  expectStatus,
  fmt,
  fromRepo,
  loadAverage,
  median,
  startVodHost,
  table,
} from "./lib.mjs";

const args = benchArgs({
  requests: { type: "string", default: "400" },
  accounts: { type: "string", default: "20" },
  sets: { type: "string", default: "embedded,server" },
});
const requests = Number(args.requests);
const accounts = Number(args.accounts);
const sets = args.sets.split(",");
const databaseUrl = args["database-url"];
const log = (message) => process.stderr.write(`[forgot-timing] ${message}\n`);

const tag = `${process.pid}_${Date.now().toString(36)}`;
const schema = `vod_bench_forgot_${tag}`;
const { startSmtpTestServer } = await fromRepo("test-services", "dist/smtp-test-server.js");
const smtp = await startSmtpTestServer();
const {
  dir: scratch,
  track,
  cleanup,
} = await benchScratch({
  dirPrefix: "vod-bench-forgot-",
  log,
  server: sets.includes("server") && { databaseUrl, schema },
});

const quantile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};

const measure = async (set) => {
  const vod = await startVodHost({
    cli,
    dataDir: join(scratch, set),
    env: {
      VOD_WORKER_CONCURRENCY: "1",
      VOD_SMTP_URL: smtp.url,
      VOD_MAIL_FROM: "no-reply@bench.test",
      // The bench measures the answer, not the limiter's refusals.
      VOD_RATE_LIMIT_AUTH_PER_MINUTE: "100000000",
      VOD_RATE_LIMIT_ACCOUNT_MAIL_PER_HOUR: "100000000",
      ...(set === "server" ? { VOD_DATABASE_URL: databaseUrl, VOD_DATABASE_SCHEMA: schema } : {}),
    },
    track,
  });
  const known = [];
  for (let i = 0; i < accounts; i++) {
    const email = `bench-known-${tag}-${i}@example.com`;
    const signup = await callJson(vod.base, "/v1/auth/signup", {
      body: { email, password: "correct horse battery staple" },
    });
    expectStatus("signup", signup, 201);
    known.push(email);
  }
  const forgot = async (email) => {
    const started = performance.now();
    const reply = await callJson(vod.base, "/v1/auth/password/forgot", { body: { email } });
    const ms = performance.now() - started;
    expectStatus("forgot", reply, 202);
    return ms;
  };
  // Warm-up of both paths, then the measured requests, known and unknown in turn.
  for (let i = 0; i < 20; i++)
    await forgot(i % 2 ? known[i % accounts] : `bench-warm-${tag}-${i}@example.com`);
  const times = { known: [], unknown: [] };
  const order = Array.from({ length: requests }, (_, i) => (i % 2 === 0 ? "known" : "unknown"));
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  for (const [i, kind] of order.entries()) {
    const email = kind === "known" ? known[i % accounts] : `bench-nobody-${tag}-${i}@example.com`;
    times[kind].push(await forgot(email));
  }
  const sent = smtp.received().filter((m) => m.envelopeTo.some((to) => to.includes(tag))).length;
  log(`${set}: ${requests} requests, ${sent} reset mails accepted by the SMTP server so far`);
  return times;
};

try {
  log(`load average ${loadAverage()}; ${describeBuild()}`);
  const names = { embedded: "embedded default (PGlite)", server: "server set (Postgres)" };
  const rows = [];
  for (const set of sets) {
    const times = await measure(set);
    for (const kind of ["known", "unknown"]) {
      const t = times[kind];
      rows.push([
        names[set],
        kind === "known" ? "email with an account" : "email without one",
        String(t.length),
        fmt(median(t)),
        fmt(quantile(t, 0.9)),
        fmt(quantile(t, 0.99)),
        fmt(t.reduce((a, b) => a + b, 0) / t.length),
      ]);
    }
    const ratio = median(times.known) / median(times.unknown);
    rows.push([names[set], "median known / unknown", "", fmt(ratio), "", "", ""]);
  }
  console.log(
    `\nPOST /v1/auth/password/forgot, one request at a time, known and unknown emails in a shuffled order; ` +
      `reset mails sent over SMTP by the host's worker meanwhile; load average at the end ${loadAverage()} ${describeBuild()}\n`,
  );
  console.log(table(["set", "email", "requests", "median ms", "p90 ms", "p99 ms", "mean ms"], rows));
} finally {
  await cleanup();
  await smtp.close();
}

#!/usr/bin/env node
// Webhook events delivered per second to a receiver on 127.0.0.1: `vod serve` on the embedded
// default (PGlite) with its worker, one webhook subscribed to asset.created, and assets created
// 8 at a time; each event is recorded with its asset and delivered, signed, by the job queue.
// The receiver answers 204 at once, so the figure is the platform's side: outbox, queue, signing.
//
//   node bench/webhooks.mjs                 # 500 events, 3 rounds
//   options: --events N, --rounds N
import { createServer } from "node:http";
import { join } from "node:path";
import { parseArgs } from "node:util";
import {
  benchScratch,
  callJson,
  cli,
  describeBuild,
  expectStatus,
  fmt,
  loadAverage,
  median,
  pool,
  sleep,
  spread,
  startVodHost,
  table,
} from "./lib.mjs";

const { values: args } = parseArgs({
  options: { events: { type: "string", default: "500" }, rounds: { type: "string", default: "3" } },
});
const events = Number(args.events);
const rounds = Number(args.rounds);
const log = (message) => process.stderr.write(`[webhooks] ${message}\n`);

/** Counts the requests it gets, by path, and the moment of each. */
let received = [];
const receiver = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    received.push({ path: req.url, at: performance.now() });
    res.writeHead(204).end();
  });
});
await new Promise((resolve) => receiver.listen(0, "127.0.0.1", resolve));
const receiverUrl = `http://127.0.0.1:${receiver.address().port}`;

const {
  dir: scratch,
  track,
  cleanup,
} = await benchScratch({
  dirPrefix: "vod-bench-webhooks-",
  log,
  also: async () => {
    receiver.closeAllConnections();
    await new Promise((resolve) => receiver.close(resolve));
  },
});

const arrived = async (path, count) => {
  const until = Date.now() + 10 * 60_000;
  while (received.filter((r) => r.path === path).length < count) {
    if (Date.now() > until)
      throw new Error(`${path}: only ${received.length} of ${count} events in 10 minutes`);
    await sleep(5);
  }
  return received.filter((r) => r.path === path);
};

try {
  log(`load average ${loadAverage()}; ${describeBuild()}`);
  const vod = await startVodHost({
    cli,
    dataDir: join(scratch, "embedded"),
    env: {
      VOD_WORKER_CONCURRENCY: "1",
      VOD_WEBHOOKS_ALLOW_PRIVATE: "true",
      VOD_RATE_LIMIT_API_PER_MINUTE: "100000000",
    },
    track,
  });
  const perSecond = [];
  const lagMs = [];
  for (let round = 0; round < rounds; round++) {
    const path = `/round-${round}`;
    received = [];
    const created = await callJson(vod.base, "/v1/webhooks", {
      body: { url: `${receiverUrl}${path}`, events: ["asset.created"] },
      headers: vod.auth,
    });
    expectStatus("create webhook", created, 201);
    const started = performance.now();
    await pool(
      Array.from({ length: events }, (_, i) => i),
      8,
      async (i) =>
        expectStatus(
          "create asset",
          await callJson(vod.base, "/v1/assets", { body: { title: `r${round} ${i}` }, headers: vod.auth }),
          201,
        ),
    );
    const allCreated = performance.now();
    const got = await arrived(path, events);
    const last = Math.max(...got.map((r) => r.at));
    perSecond.push(events / ((last - started) / 1000));
    lagMs.push(last - allCreated);
    log(`round ${round + 1}: ${events} events in ${fmt((last - started) / 1000)} s`);
    expectStatus(
      "delete webhook",
      await callJson(vod.base, `/v1/webhooks/${created.body.webhook.id}`, {
        method: "DELETE",
        headers: vod.auth,
      }),
      204,
    );
  }
  console.log(
    `\nWebhooks: ${events} asset.created events per round, assets created 8 at a time, median of ${rounds} round(s); ` +
      `load average at the end ${loadAverage()} ${describeBuild()}\n`,
  );
  console.log(
    table(
      ["set", "events delivered per second", "last event after the last create (ms)"],
      [
        [
          "embedded default (PGlite), worker concurrency 1",
          `${fmt(median(perSecond), 0)}${spread(perSecond, 0)}`,
          `${fmt(median(lagMs), 0)}${spread(lagMs, 0)}`,
        ],
      ],
    ),
  );
} finally {
  await cleanup();
}

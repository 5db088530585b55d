// Issue 26: how long `POST /v1/uploads` of a 100 GiB file takes on a bucket (the GCS test server),
// its 9,310 part URLs signed with the service account's HMAC key (GOOG4-HMAC-SHA256) or with its
// RSA key (the test server's fake service account, as a key file gives it), median of a few runs;
// beside it, the longest wait of a /healthz probe sent every 5 ms while the start runs: how long
// the host's event loop was held.
//
//   node bench/gcs-upload-start.mjs [--runs N]
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
  repo,
  sleep,
  spawnNode,
  startVodHost,
  table,
  verdict,
} from "./lib.mjs";

const { values: args } = parseArgs({ options: { runs: { type: "string", default: "5" } } });
const runs = Number(args.runs);
const SIZE = 107_374_182_400;
const TARGET_MS = 200;
const log = (line) => process.stderr.write(`${line}\n`);

const { dir, track, cleanup } = await benchScratch({ dirPrefix: "vod-bench-gcs-start-", log });
try {
  const server = track(spawnNode([join(repo, "test-services/bin/gcs-test-server.mjs")]));
  const bucket = JSON.parse((await server.waitFor(/^\{.*\}$/m))[0]);
  const gcsEnv = {
    VOD_OBJECT_STORE: "gcs",
    VOD_GCS_BUCKET: bucket.bucket,
    VOD_GCS_API_ENDPOINT: bucket.endpoint,
    GOOGLE_APPLICATION_CREDENTIALS: bucket.credentials,
    VOD_WORKER_CONCURRENCY: "0",
  };
  const signings = [
    {
      name: "HMAC key (GOOG4-HMAC-SHA256)",
      env: { VOD_GCS_HMAC_ACCESS_ID: bucket.hmac_access_id, VOD_GCS_HMAC_SECRET: bucket.hmac_secret },
      target: TARGET_MS,
    },
    { name: "service-account key (GOOG4-RSA-SHA256)", env: {} },
  ];

  /** The longest /healthz round trip while `work` runs, probes 5 ms apart. */
  const longestProbe = async (base, work) => {
    let done = false;
    let longest = 0;
    const probing = (async () => {
      while (!done) {
        const t = performance.now();
        await fetch(`${base}/healthz`).then((r) => r.arrayBuffer());
        longest = Math.max(longest, performance.now() - t);
        await sleep(5);
      }
    })();
    try {
      return { result: await work(), longest };
    } finally {
      done = true;
      await probing;
    }
  };

  const rows = [];
  for (const [i, signing] of signings.entries()) {
    log(`host with the ${signing.name}`);
    const vod = await startVodHost({
      cli,
      dataDir: join(dir, `host-${i}`),
      env: { ...gcsEnv, ...signing.env },
      track,
    });
    const times = [];
    const probes = [];
    let parts = 0;
    // One start not timed: the first signs with a cold key (parsed, identity fetched).
    for (let run = 0; run <= runs; run++) {
      const created = await callJson(vod.base, "/v1/assets", {
        body: { title: `start ${run}` },
        headers: vod.auth,
      });
      expectStatus("create asset", created, 201);
      const { result: started, longest } = await longestProbe(vod.base, async () => {
        const t = performance.now();
        const reply = await callJson(vod.base, "/v1/uploads", {
          body: { asset_id: created.body.asset.id, size_bytes: SIZE },
          headers: vod.auth,
        });
        return { reply, ms: performance.now() - t };
      });
      expectStatus("start upload", started.reply, 201);
      parts = started.reply.body.upload.parts.length;
      const aborted = await callJson(vod.base, `/v1/uploads/${started.reply.body.upload.id}`, {
        method: "DELETE",
        headers: vod.auth,
      });
      expectStatus("abort", aborted, 204);
      if (run === 0) continue;
      times.push(started.ms);
      probes.push(longest);
      log(`  run ${run}: ${fmt(started.ms, 0)} ms, longest /healthz ${fmt(longest, 0)} ms`);
    }
    await vod.host.stop();
    rows.push([
      signing.name,
      parts,
      fmt(median(times), 0),
      `${fmt(Math.min(...times), 0)}-${fmt(Math.max(...times), 0)}`,
      fmt(median(probes), 0),
      signing.target === undefined
        ? "-"
        : `<= ${signing.target} ms: ${verdict(median(times) <= signing.target)}`,
    ]);
  }

  console.log(`# POST /v1/uploads of ${SIZE} bytes on the GCS test server, median of ${runs} runs`);
  console.log(`build ${describeBuild()}; load average ${loadAverage()}\n`);
  console.log(
    table(
      ["part URLs signed with", "URLs", "start (ms)", "range (ms)", "longest /healthz (ms)", "target"],
      rows,
    ),
  );
} finally {
  await cleanup();
}

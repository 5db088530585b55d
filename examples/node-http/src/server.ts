/**
 * The whole platform on node:http, in one file an embedder copies: every route of the API, the
 * media app (part uploads, playlists, segments, images) and the DRM app on one port, with the
 * memory adapters, and the jobs that uploads enqueue (processing with ffmpeg, object removal)
 * run by a worker loop in this same process. Nothing survives a restart; swap the memory storage
 * and queue for `@vod/adapter-postgres`'s to keep data and to run the loop in other processes.
 *
 *   PORT=8080 node src/server.ts    # Node 24 runs TypeScript by stripping the types
 *
 * ffmpeg and ffprobe are found on PATH (or at FFMPEG_PATH, FFPROBE_PATH).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { argon2PasswordHasher } from "@vod/adapter-argon2";
import { ffmpegImageMaker, ffmpegMediaProcessor } from "@vod/adapter-ffmpeg";
import { googleIdentityVerifier } from "@vod/adapter-google-identity";
import { generateSigningKeys, joseTokenSigner } from "@vod/adapter-jose";
import {
  memoryJobQueue,
  memoryObjectStore,
  memoryRateLimiter,
  memoryRevocationStore,
  memoryStorage,
  memoryTelemetrySink,
  randomIds,
  systemClock,
} from "@vod/adapter-memory";
import { createVod, type Job, type JobFailed, type JobName } from "@vod/core";
import { catalogLinks, createHttpHandler, sweepIdempotencyKeys } from "@vod/http";
import { Effect } from "effect";
import { pino } from "pino";

const logger = pino({ level: process.env.LOG_LEVEL ?? "info" });
const keys = await generateSigningKeys();

// Listen before the platform is made: the part upload and playback URLs it hands out name the
// port really bound (PORT=0 picks a free one). No request is read before the handler is attached
// below, in the same turn of the event loop.
const server = createServer();
await new Promise<void>((resolve) =>
  server.listen(Number(process.env.PORT ?? 8080), process.env.HOST ?? "127.0.0.1", resolve),
);
const { address, port } = server.address() as AddressInfo;
const url = process.env.PUBLIC_URL ?? `http://${address.includes(":") ? `[${address}]` : address}:${port}`;

const tools = { ffmpegPath: process.env.FFMPEG_PATH, ffprobePath: process.env.FFPROBE_PATH };
const storage = memoryStorage();
// Runs the jobs that `storage`'s transactions enqueue (an upload completed, an asset deleted).
const jobQueue = memoryJobQueue(storage);
const vod = createVod({
  clock: systemClock(),
  ids: randomIds(),
  storage,
  jobQueue,
  objectStore: memoryObjectStore(),
  passwordHasher: argon2PasswordHasher(),
  // Access tokens name this server as issuer and audience; keep `keys` (JSON) to survive restarts.
  tokenSigner: joseTokenSigner({ issuer: url, audience: url, keys }),
  // Google sign-in answers 503 until a client id is given.
  identityVerifier: googleIdentityVerifier({ clientId: process.env.GOOGLE_CLIENT_ID }),
  rateLimiter: memoryRateLimiter(),
  revocationStore: memoryRevocationStore(),
  telemetrySink: memoryTelemetrySink(),
  mediaProcessor: ffmpegMediaProcessor({ ...tools, log: logger }),
  imageMaker: ffmpegImageMaker(tools),
  // Where clients are sent: the API, media and DRM routes all answer on this one server.
  links: catalogLinks({ media: url, drm: url }),
});
server.on("request", createHttpHandler(vod, { logger, urls: { base: url, media: url, drm: url } }));

/** One kind of job taken from the queue, each run's outcome logged. */
const work = <N extends JobName>(
  name: N,
  concurrency: number,
  run: (job: Job<N>) => Effect.Effect<unknown, JobFailed>,
) =>
  jobQueue.work(name, { concurrency }, (job) =>
    run(job).pipe(
      Effect.tap((outcome) =>
        Effect.sync(() => logger.info({ job: name, job_id: job.id, outcome }, "job done")),
      ),
      Effect.tapError((e) =>
        Effect.sync(() => logger.warn({ job: name, job_id: job.id, err: e.message }, "job failed")),
      ),
      Effect.asVoid,
    ),
  );
// The worker loop. A long source is cut into chunks (`encode-chunk`), joined by `package-chunks`.
// Webhook deliveries and account mail need a sender and a mailer (`@vod/adapter-webhook-http`,
// `@vod/adapter-smtp`) and their own `work` lines; without them their jobs wait in the queue.
const workers = await Effect.runPromise(
  Effect.all([
    work("process-asset", 1, vod.processing.processAsset),
    work("encode-chunk", 1, vod.processing.encodeChunk),
    work("package-chunks", 1, vod.processing.packageChunks),
    work("delete-asset", 2, vod.assets.removeObjects),
  ]),
);
// Upload sessions past their 24 hours are closed, and Idempotency-Key records forgotten, now and then.
const sweep = setInterval(
  () =>
    void Effect.runPromise(
      Effect.ignore(Effect.all([vod.uploads.sweepExpired(), sweepIdempotencyKeys(vod)])),
    ),
  10 * 60_000,
);
sweep.unref();
logger.info({ url }, "listening");

const stop = async () => {
  logger.info("stopping");
  clearInterval(sweep);
  // No new connections; requests in flight finish. Running jobs get 5 s, then go back to the queue.
  const closed = new Promise((resolve) => server.close(resolve));
  server.closeIdleConnections();
  await Effect.runPromise(Effect.all(workers.map((worker) => worker.drain(5_000))));
  await closed;
  logger.info("stopped");
};
process.once("SIGTERM", () => void stop());
process.once("SIGINT", () => void stop());

#!/usr/bin/env node
// Upload throughput, host memory and processing time of the VOD host against their baselines,
// in one run on the same bytes. Traffic goes to 127.0.0.1 only; latest figures in bench/README.md.
//
// The bytes: one file of --size-mib random bytes, streamed from disk by one client (8 MiB per
// request, 4 in flight) to each server in a process of its own: the limit (bare node:http PUT
// piped to a file), the peer (@tus/server with its FileStore, four uploads of a quarter at once),
// and `vod serve` (part PUTs to the URLs of one upload; `complete` timed apart). Each server gets a
// warm-up; each round starts at another server, from a dropped page cache (as root, unless
// --keep-page-cache), so that no server writes into a cache another left. Seconds are medians over
// rounds; a ratio is the median of the per-round ratios, so load from elsewhere moves a round,
// not a ratio. Memory: the host's VmRSS every 50 ms while it takes the parts, against its idle
// RSS; on the embedded set its database process is sampled and printed apart.
// Processing: a --video-seconds 720p testsrc2 + sine source; baseline one plain ffmpeg making the
// same ladder (processing.mjs), against a host with one worker timed from `complete` to the first
// poll (--poll-ms) that reads the asset ready, the two alternating; CPU seconds of both beside.
// --store gcs adds a host on a bucket (the GCS test server, its own process): part PUTs to the
// signed URLs, the host's CPU per GiB, and processing against the filesystem set.
//
//   node bench/upload-and-processing.mjs [--size-mib 1024] [--rounds 5] [--quick]
//     [--vod-storage postgres|memory|server] [--database-url postgres://postgres@127.0.0.1:5432/postgres]
//     [--store filesystem|gcs]
import { execFile, execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs, promisify } from "node:util";
import { Effect } from "effect";
import {
  childPids,
  cleanUpOnSignals,
  cli,
  cpuSeconds,
  describeBuild,
  dropBenchSchema,
  expectStatus,
  fmt,
  fromRepo,
  keepAliveAgent,
  loadAverage,
  MiB,
  makeRandomFile,
  median,
  pageCacheLeveller,
  partsOf,
  putPartsToServer,
  repo,
  sampleRss,
  sendFileRange,
  sleep,
  spawnNode,
  spread,
  startVodHost,
  statusKiB,
  table,
  verdict,
} from "./lib.mjs";
import { makeVideo, plainFfmpegArgs, VIDEO } from "./processing.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const { planRenditions, resolveTools } = await fromRepo("adapters/ffmpeg");
const { defaultLadder } = await fromRepo("core");

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    "size-mib": { type: "string" },
    rounds: { type: "string" },
    "video-seconds": { type: "string" },
    "processing-rounds": { type: "string" },
    "vod-storage": { type: "string", default: "postgres" },
    "database-url": { type: "string", default: "postgres://postgres@127.0.0.1:5432/postgres" },
    "skip-upload": { type: "boolean", default: false },
    "skip-processing": { type: "boolean", default: false },
    "poll-ms": { type: "string", default: "250" },
    "keep-page-cache": { type: "boolean", default: false },
    store: { type: "string", default: "filesystem" },
  },
});
const quick = args.quick;
const sizeMiB = Number(args["size-mib"] ?? (quick ? 256 : 1024));
const rounds = Number(args.rounds ?? (quick ? 1 : 5));
const videoSeconds = Number(args["video-seconds"] ?? (quick ? 10 : 30));
const processingRounds = Number(args["processing-rounds"] ?? (quick ? 1 : 3));
const vodStorage = args["vod-storage"];
if (!["postgres", "memory", "server"].includes(vodStorage))
  throw new Error(`bad --vod-storage: ${vodStorage}`);
const databaseUrl = args["database-url"];
// --store gcs: besides the filesystem set, a host on a bucket (the GCS test server, a process of
// its own), whose part PUTs go to the bucket's signed URLs and whose worker reads and writes there.
const withGcs = args.store === "gcs";
if (!["filesystem", "gcs"].includes(args.store)) throw new Error(`bad --store: ${args.store}`);
if (vodStorage === "server" && !["127.0.0.1", "localhost"].includes(new URL(databaseUrl).hostname))
  throw new Error(`--database-url must point at 127.0.0.1: ${databaseUrl}`);
for (const [name, value] of Object.entries({ sizeMiB, rounds, videoSeconds, processingRounds }))
  if (!Number.isInteger(value) || value < 1 || value > 100_000) throw new Error(`bad ${name}: ${value}`);

const SIZE = sizeMiB * MiB;
const PART = 8 * MiB; // the host's part size for 1 GiB (partSizeFor); tus PATCHes the same chunks
const PARALLEL = 4;
const WARMUP = 64 * MiB;
const MB = 1e6;
// How often the asset is polled while processing: what the host's own tests poll at; finer polls
// cost the host CPU (each GET verifies a token and reads the database) that ffmpeg then lacks.
const POLL_MS = Number(args["poll-ms"]);

if (!existsSync(cli)) throw new Error(`${cli} is missing: build first (cd ${repo} && npx tsc -b)`);
const tools = resolveTools();
const execFileP = promisify(execFile);
const log = (...parts) => console.error(`[${new Date().toISOString().slice(11, 19)}]`, ...parts);
const syncDisks = () => execFileSync("sync");
// The three servers of a round leave each other different caches (the host's `complete` writes
// a second GiB): each timed upload starts from a levelled one (lib.mjs), unless --keep-page-cache.
const evenPageCache = pageCacheLeveller(Boolean(args["keep-page-cache"]));
/** A difference of CPU times, back on their 1/100 s ticks (no -0.00 from float error). */
const ticks = (cpuSeconds) => Math.round(cpuSeconds * 100) / 100 || 0;
const seconds = (start) => Number(process.hrtime.bigint() - start) / 1e9;
const now = () => process.hrtime.bigint();
// --vod-storage server: each host the run starts gets a schema of its own (and its queue one more,
// `<schema>_jobs`), named after this process; all are dropped on the way out.
const schemaBase = `vod_bench_${process.pid}_${Date.now().toString(36)}`;
const { connectPostgres } = vodStorage === "server" ? await fromRepo("adapters/postgres") : {};
/** Where the vod hosts keep their data, for the header and the table. */
const storageName = {
  postgres: "PGlite",
  memory: "memory",
  server: "Postgres server",
}[vodStorage];
const vodName = `vod host (${storageName})`;
const vodGcsName = `vod host (${storageName}, gcs)`;
const GiB = 1024 * MiB;

// ---------------------------------------------------------------------------------------------
// Scratch space, children, and cleanup on every way out.

const scratch = await mkdtemp(join(tmpdir(), "vod-bench-"));
const children = new Set();
/** The schemas the hosts of this run were given (--vod-storage server). */
const schemas = [];
const dropSchemas = async () => {
  if (schemas.length === 0) return;
  const admin = connectPostgres({ connectionString: databaseUrl, poolSize: 1 });
  try {
    for (const schema of schemas.flatMap((s) => [s, `${s}_jobs`])) await dropBenchSchema(admin, schema);
    log(`dropped schemas ${schemas.map((s) => `${s}, ${s}_jobs`).join(", ")}`);
  } finally {
    await admin.close();
  }
};
let cleaning;
/** Stops the hosts, drops the schemas, removes the scratch space: once, whoever asks first. */
const cleanup = () => {
  cleaning ??= (async () => {
    await Promise.all([...children].map((c) => c.stop()));
    await dropSchemas().catch((error) => log(`cleanup: dropping schemas: ${error?.message ?? error}`));
    await rm(scratch, { recursive: true, force: true });
  })();
  // A signal and the way out of the main block wait for the same work to finish.
  return cleaning;
};
cleanUpOnSignals(cleanup, log);
const track = (spawned) => {
  children.add(spawned);
  const stop = spawned.stop;
  return {
    ...spawned,
    stop: async () => {
      await stop();
      children.delete(spawned);
    },
  };
};

const emptyDir = async (dir) => {
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
};

// ---------------------------------------------------------------------------------------------
// The three upload servers: each in a process of its own, driven by the same client.

/** The limit: PUT /part/<n> piped to a file by bare node:http. */
const bareServer = async () => {
  const dir = join(scratch, "bare");
  await emptyDir(dir);
  const server = track(spawnNode([join(here, "servers/bare-put.mjs"), dir]));
  const port = Number((await server.waitFor(/listening (\d+)/))[1]);
  const agent = keepAliveAgent(PARALLEL);
  return {
    name: "bare",
    pid: server.child.pid,
    note: "",
    stop: server.stop,
    clean: () => emptyDir(dir),
    upload: async (file, size) => {
      const parts = partsOf(size, PART);
      const start = now();
      await putPartsToServer({ agent, port, file, size, partSize: PART, parallel: PARALLEL, name: "bare" });
      return { seconds: seconds(start), requests: parts.length };
    },
  };
};

/**
 * The peer: @tus/server with FileStore. A tus upload is written in order, so the file goes as four
 * uploads of a quarter each, PATCHed in 8 MiB chunks, the four at once (Upload-Concat partials and
 * a final concatenation when the store has the extension, else four separate uploads).
 */
const tusServer = async () => {
  const dir = join(scratch, "tus");
  await emptyDir(dir);
  const server = track(spawnNode([join(here, "servers/tus.mjs"), dir]));
  const extensions = (await server.waitFor(/extensions (\S*)/))[1].split(",");
  const port = Number((await server.waitFor(/listening (\d+)/))[1]);
  const version = (await server.waitFor(/version (\S+)/))[1];
  // @tus/utils spells the extension "concatentation"; accept either spelling.
  const concat = extensions.includes("concatentation") || extensions.includes("concatenation");
  const agent = keepAliveAgent(PARALLEL);
  const base = `http://127.0.0.1:${port}`;
  const tusHeaders = { "tus-resumable": "1.0.0" };
  const create = async (length, extra = {}) => {
    const reply = await sendFileRange({
      agent,
      url: `${base}/files`,
      method: "POST",
      headers: { ...tusHeaders, "upload-length": String(length), ...extra },
      length: 0,
    });
    expectStatus("tus create", reply, 201);
    return new URL(reply.headers.location, base).href;
  };
  return {
    name: "tus",
    version,
    pid: server.child.pid,
    note: concat ? "4 partial uploads + Upload-Concat final" : "4 separate uploads (no concatenation ext.)",
    stop: server.stop,
    clean: () => emptyDir(dir),
    upload: async (file, size) => {
      const quarter = Math.ceil(size / PARALLEL / PART) * PART;
      const quarters = partsOf(size, quarter);
      // Creating the uploads is not timed, as starting an upload on the host is not.
      const urls = await Promise.all(
        quarters.map((q) => create(q.length, concat ? { "upload-concat": "partial" } : {})),
      );
      let requests = 0;
      const start = now();
      await Promise.all(
        quarters.map(async (q, i) => {
          for (const chunk of partsOf(q.length, PART)) {
            const reply = await sendFileRange({
              agent,
              url: urls[i],
              method: "PATCH",
              headers: {
                ...tusHeaders,
                "upload-offset": String(chunk.start),
                "content-type": "application/offset+octet-stream",
              },
              file,
              start: q.start + chunk.start,
              length: chunk.length,
            });
            expectStatus(`tus patch ${i}@${chunk.start}`, reply, 204);
            if (Number(reply.headers["upload-offset"]) !== chunk.start + chunk.length)
              throw new Error(`tus patch ${i}: offset ${reply.headers["upload-offset"]}`);
            requests++;
          }
        }),
      );
      if (concat) {
        const reply = await sendFileRange({
          agent,
          url: `${base}/files`,
          method: "POST",
          headers: {
            ...tusHeaders,
            "upload-concat": `final;${urls.map((u) => new URL(u).pathname).join(" ")}`,
          },
          length: 0,
        });
        expectStatus("tus concat", reply, 201);
        requests++;
      }
      return { seconds: seconds(start), requests };
    },
  };
};

/** The env that puts a host on the configured storage; `role` names its schema on a server. */
const storageEnv = (role) => {
  if (vodStorage !== "server") return { VOD_STORAGE: vodStorage };
  const schema = `${schemaBase}_${role}`;
  schemas.push(schema);
  return { VOD_STORAGE: "postgres", VOD_DATABASE_URL: databaseUrl, VOD_DATABASE_SCHEMA: schema };
};

/** Starts `vod serve` on 127.0.0.1 with its data in `dataDir` and the configured storage. */
const startHost = (dataDir, workers, role, extraEnv = {}) =>
  startVodHost({
    cli,
    dataDir,
    env: {
      ...storageEnv(role),
      ...extraEnv,
      VOD_WORKER_CONCURRENCY: String(workers),
      VOD_FFMPEG_PATH: tools.ffmpeg,
      VOD_FFPROBE_PATH: tools.ffprobe,
    },
    parallel: PARALLEL,
    track,
  });

/** The VOD host's media app: part PUTs of one upload (8 MiB parts), then complete, timed apart. */
const vodServer = async () => {
  const dataDir = join(scratch, "vod-upload");
  const host = await startHost(dataDir, 0, "upload");
  let uploads = 0;
  return {
    name: "vod",
    pid: host.host.child.pid,
    note: "",
    stop: host.host.stop,
    // The assembled origins are the only large files left once an upload completed.
    clean: () => rm(join(dataDir, "objects", "origins"), { recursive: true, force: true }),
    upload: async (file, size, { onBegun, onPartsDone } = {}) => {
      const upload = await host.begin(size, `bench ${++uploads}`);
      await onBegun?.();
      const start = now();
      await host.putParts(file, upload);
      const partSeconds = seconds(start);
      await onPartsDone?.();
      const completeStart = now();
      await host.complete(upload);
      return {
        seconds: partSeconds,
        requests: upload.parts.length,
        partSize: upload.part_size,
        completeSeconds: seconds(completeStart),
      };
    },
  };
};

/**
 * The bucket: `npm run gcs-test-server`'s script in a process of its own (its CPU is the bucket's,
 * not the host's), and the object store of the gcs adapter on it, to empty it between rounds.
 */
const gcsBucket = async () => {
  const server = track(spawnNode([join(repo, "test-services/bin/gcs-test-server.mjs")]));
  const { endpoint, bucket, credentials } = JSON.parse((await server.waitFor(/^\{.*\}$/m))[0]);
  const { gcsObjectStore } = await fromRepo("adapters/gcs");
  const store = gcsObjectStore({
    bucket,
    apiEndpoint: endpoint,
    keyFilename: credentials,
    delivery: "proxy",
  });
  return {
    pid: server.child.pid,
    stop: server.stop,
    env: {
      VOD_OBJECT_STORE: "gcs",
      VOD_GCS_BUCKET: bucket,
      VOD_GCS_API_ENDPOINT: endpoint,
      GOOGLE_APPLICATION_CREDENTIALS: credentials,
    },
    deletePrefix: (prefix) => Effect.runPromise(store.deletePrefix(prefix)),
  };
};

/** The VOD host on the bucket: part PUTs straight to the bucket's signed URLs, then complete. */
const vodGcsServer = async (bucket) => {
  const host = await startHost(join(scratch, "vod-gcs-upload"), 0, "gcs_upload", bucket.env);
  let uploads = 0;
  return {
    name: "vod-gcs",
    pid: host.host.child.pid,
    note: "",
    stop: host.host.stop,
    clean: () => bucket.deletePrefix("origins/"),
    upload: async (file, size, { onBegun, onPartsDone } = {}) => {
      const upload = await host.begin(size, `bench gcs ${++uploads}`);
      await onBegun?.();
      const bucketUrl = new URL(bucket.env.VOD_GCS_API_ENDPOINT).origin;
      if (upload.parts.some((p) => new URL(p.url).origin !== bucketUrl))
        throw new Error(`a part URL is not the bucket's: ${upload.parts[0]?.url}`);
      const bucketBefore = await cpuSeconds(bucket.pid);
      const start = now();
      await host.putParts(file, upload);
      const partSeconds = seconds(start);
      const bucketAfter = await cpuSeconds(bucket.pid);
      await onPartsDone?.();
      const completeStart = now();
      await host.complete(upload);
      return {
        seconds: partSeconds,
        requests: upload.parts.length,
        partSize: upload.part_size,
        completeSeconds: seconds(completeStart),
        bucketCpu: ticks(bucketAfter.user + bucketAfter.system - bucketBefore.user - bucketBefore.system),
      };
    },
  };
};

// ---------------------------------------------------------------------------------------------
// Upload throughput and host memory.

const uploadBench = async (file, bucket) => {
  const servers = [
    await bareServer(),
    await tusServer(),
    await vodServer(),
    ...(bucket ? [await vodGcsServer(bucket)] : []),
  ];
  const results = Object.fromEntries(servers.map((s) => [s.name, []]));
  const idleKiB = {};
  for (const server of servers) {
    log(`warming up ${server.name} with ${WARMUP / MiB} MiB`);
    await server.upload(file, WARMUP);
    await server.clean();
    idleKiB[server.name] = await statusKiB(server.pid);
  }
  // The host's embedded database runs in a child process (PGlite): its memory is reported beside
  // the host's, so the host's figure is not read as the whole footprint.
  const vodPid = servers[2].pid;
  const databasePid = vodStorage === "postgres" ? (await childPids(vodPid))[0] : undefined;
  const database =
    databasePid === undefined
      ? undefined
      : { pid: databasePid, idleKiB: await statusKiB(databasePid), peakKiB: 0 };
  for (let round = 0; round < rounds; round++) {
    // Each round starts at another server, so drift on a shared machine falls on each in turn.
    const order = servers.map((_, i) => servers[(i + round) % servers.length]);
    for (const server of order) {
      syncDisks();
      await evenPageCache?.(file);
      await sleep(500);
      const sampler = sampleRss(server.pid, 50);
      const databaseSampler = server.name === "vod" && database ? sampleRss(database.pid, 50) : undefined;
      const cpuBefore = await cpuSeconds(server.pid);
      let cpuBegun;
      let cpuParts;
      let partsPeak;
      const result = await server.upload(file, SIZE, {
        // The host's CPU for starting the upload (on a bucket: signing every part URL), apart.
        onBegun: async () => {
          cpuBegun = await cpuSeconds(server.pid);
        },
        onPartsDone: async () => {
          cpuParts = await cpuSeconds(server.pid);
          partsPeak = (await sampler.stop()).peakKiB;
        },
      });
      const { peakKiB, samples } = await sampler.stop();
      if (databaseSampler)
        database.peakKiB = Math.max(database.peakKiB, (await databaseSampler.stop()).peakKiB);
      result.peakKiB = partsPeak ?? peakKiB;
      result.peakWithCompleteKiB = peakKiB;
      result.samples = samples;
      const cpuAfter = cpuParts ?? (await cpuSeconds(server.pid));
      const cpuFrom = cpuBegun ?? cpuBefore;
      result.cpu = ticks(cpuAfter.user + cpuAfter.system - cpuFrom.user - cpuFrom.system);
      result.beginCpu = ticks(cpuFrom.user + cpuFrom.system - cpuBefore.user - cpuBefore.system);
      results[server.name].push(result);
      log(
        `round ${round + 1} ${server.name}: ${result.seconds.toFixed(2)} s, ` +
          `${(SIZE / MB / result.seconds).toFixed(0)} MB/s, ${result.requests} requests, ` +
          `server CPU ${result.cpu.toFixed(2)} s, peak RSS ${(result.peakKiB / 1024).toFixed(0)} MiB` +
          (result.completeSeconds === undefined ? "" : `, complete ${result.completeSeconds.toFixed(2)} s`),
      );
      await server.clean();
    }
  }
  const hwmKiB = {};
  for (const server of servers) hwmKiB[server.name] = await statusKiB(server.pid, "VmHWM");
  if (database) database.hwmKiB = await statusKiB(database.pid, "VmHWM");
  const notes = Object.fromEntries(servers.map((s) => [s.name, s.note]));
  const tusVersion = servers[1].version;
  for (const server of servers) await server.stop();
  return { results, idleKiB, hwmKiB, notes, tusVersion, database };
};

// ---------------------------------------------------------------------------------------------
// Processing: the host from upload-complete to ready, against one plain ffmpeg command.

const processingBench = async (bucket) => {
  const source = join(scratch, "source.mp4");
  log(`making a ${videoSeconds} s ${VIDEO.width}x${VIDEO.height} ${VIDEO.fps} fps test video`);
  await makeVideo(tools.ffmpeg, source, videoSeconds);
  const sourceBytes = (await stat(source)).size;
  const planned = planRenditions(defaultLadder, VIDEO);
  const host = await startHost(join(scratch, "vod-processing"), 1, "processing");
  const gcsHost = bucket
    ? await startHost(join(scratch, "vod-gcs-processing"), 1, "gcs_processing", bucket.env)
    : undefined;
  // The embedded database's process (PGlite) is the host's only child before any job runs; its CPU
  // is nobody's "children" time until it exits, so it is read apart.
  const databasePid = vodStorage === "postgres" ? (await childPids(host.host.child.pid))[0] : undefined;
  const databaseCpu = async () => {
    if (databasePid === undefined) return 0;
    const cpu = await cpuSeconds(databasePid);
    return cpu.user + cpu.system;
  };
  const plain = [];
  const hosted = [];
  // Until the asset leaves "uploaded": the job waiting in the queue for the worker to poll it.
  const waits = [];
  // CPU seconds: of the plain ffmpeg; of the host itself and of the tools it ran (ffmpeg, packager).
  const plainCpu = [];
  const hostCpu = [];
  // The same for the host on the bucket, whose database (a server, or PGlite) is not measured.
  const gcs = { hosted: [], waits: [], hostCpu: [] };
  const runPlain = async (round) => {
    const out = join(scratch, `plain-${round}`);
    await mkdir(out);
    const cpuBefore = await cpuSeconds();
    const start = now();
    await execFileP(tools.ffmpeg, plainFfmpegArgs(source, out, planned), { maxBuffer: 16 * MiB });
    const took = seconds(start);
    plainCpu.push((await cpuSeconds()).children - cpuBefore.children);
    const made = await readdir(out);
    if (!made.includes("master.m3u8")) throw new Error(`plain ffmpeg made no master playlist: ${made}`);
    await rm(out, { recursive: true, force: true });
    plain.push(took);
    log(`round ${round + 1} plain ffmpeg: ${took.toFixed(2)} s`);
  };
  const runHost = async (round, on = host, into = { hosted, waits, hostCpu }, name = "vod host") => {
    const upload = await on.begin(sourceBytes, `processing ${round + 1}`);
    await on.putParts(source, upload);
    await on.complete(upload);
    const cpuBefore = await cpuSeconds(on.host.child.pid);
    const databaseBefore = on === host ? await databaseCpu() : 0;
    const start = now();
    const deadline = Date.now() + 15 * 60_000;
    let asset;
    let picked;
    for (;;) {
      asset = await on.asset(upload.assetId);
      if (picked === undefined && asset.status !== "uploaded") picked = seconds(start);
      if (asset.status === "ready" || asset.status === "failed") break;
      if (Date.now() > deadline) throw new Error(`asset still ${asset.status} after 15 minutes`);
      await sleep(POLL_MS);
    }
    const took = seconds(start);
    const cpuAfter = await cpuSeconds(on.host.child.pid);
    into.hostCpu.push({
      self: cpuAfter.user + cpuAfter.system - cpuBefore.user - cpuBefore.system,
      tools: cpuAfter.children - cpuBefore.children,
      database: on === host ? (await databaseCpu()) - databaseBefore : 0,
    });
    if (asset.status !== "ready")
      throw new Error(`processing failed: ${JSON.stringify(asset)}\n${on.host.output()}`);
    into.hosted.push(took);
    into.waits.push(picked);
    log(
      `round ${round + 1} ${name}: ${took.toFixed(2)} s, of which ${picked.toFixed(2)} s before the job started`,
    );
  };
  const runGcs = (round) => gcsHost && runHost(round, gcsHost, gcs, "vod host on gcs");
  for (let round = 0; round < processingRounds; round++) {
    syncDisks();
    // Alternate which goes first, so neither always runs on a cooler (or hotter) machine.
    if (round % 2 === 0) {
      await runPlain(round);
      await runHost(round);
      await runGcs(round);
    } else {
      await runGcs(round);
      await runHost(round);
      await runPlain(round);
    }
  }
  await host.host.stop();
  await gcsHost?.host.stop();
  return { plain, hosted, waits, plainCpu, hostCpu, sourceBytes, planned, gcs: gcsHost ? gcs : undefined };
};

// ---------------------------------------------------------------------------------------------

try {
  const ffmpegVersion = execFileSync(tools.ffmpeg, ["-version"], { encoding: "utf8" }).split("\n")[0];
  const roles = [!args["skip-upload"] && "upload", !args["skip-processing"] && "processing"]
    .filter(Boolean)
    .flatMap((r) => (withGcs ? [r, `gcs_${r}`] : [r]));
  const loadAtStart = loadAverage();
  const url = new URL(databaseUrl);
  const storage =
    vodStorage === "server"
      ? `server (${url.protocol}//${url.host}${url.pathname}, ` +
        `schema ${roles.map((r) => `${schemaBase}_${r}`).join(", ")}; dropped at the end)`
      : vodStorage;
  const header =
    `${new Date().toISOString()}  vod storage ${storage}  node ${process.version}  ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}  ` +
    `${ffmpegVersion.split(" Copyright")[0]}\nbuild measured: ${repo} ${describeBuild()}` +
    (withGcs ? "\nobject stores: filesystem and gcs (the GCS test server, a process of its own)" : "") +
    (args["skip-upload"]
      ? ""
      : `\npage cache before each upload: ${evenPageCache ? "dropped, then the source read back" : "as the last round left it"}`);
  const rows = [];
  const extra = [];
  const bucket = withGcs ? await gcsBucket() : undefined;

  if (!args["skip-upload"]) {
    const file = join(scratch, "random.bin");
    log(`writing ${sizeMiB} MiB of random bytes to ${file}`);
    await makeRandomFile(file, SIZE);
    syncDisks();
    const { results, idleKiB, hwmKiB, notes, tusVersion, database } = await uploadBench(file, bucket);
    const med = (name, key = "seconds") => median(results[name].map((r) => r[key]));
    const limit = med("bare");
    const tus = med("tus");
    const vod = med("vod");
    const mbps = (s) => fmt(SIZE / MB / s, 0);
    // Throughput ratios pair the servers within each round (minutes apart at most), then take the
    // median over rounds: load from elsewhere on a shared machine moves a round, not a ratio.
    const ratio = (name, base) => median(results[name].map((r, i) => results[base][i].seconds / r.seconds));
    const toLimit = ratio("vod", "bare");
    const toTus = ratio("vod", "tus");
    const secs = (name) => `${fmt(med(name))}${spread(results[name].map((r) => r.seconds))}`;
    rows.push(
      ["limit: bare node:http PUT → file", SIZE, secs("bare"), mbps(limit), "1.00", "—", "—"],
      [
        `peer: @tus/server ${tusVersion} FileStore, ${notes.tus}`,
        SIZE,
        secs("tus"),
        mbps(tus),
        fmt(ratio("tus", "bare")),
        "—",
        "—",
      ],
      [
        `${vodName}: part PUTs vs the limit`,
        SIZE,
        secs("vod"),
        mbps(vod),
        fmt(toLimit),
        "≥ 0.90",
        verdict(toLimit >= 0.9),
      ],
      [
        `${vodName}: part PUTs vs @tus/server`,
        SIZE,
        fmt(vod),
        mbps(vod),
        fmt(toTus),
        "≥ 1.00",
        verdict(toTus >= 1.0),
      ],
      [
        `${vodName}: complete (assemble, not in the above)`,
        SIZE,
        `${fmt(med("vod", "completeSeconds"))}${spread(results.vod.map((r) => r.completeSeconds))}`,
        mbps(med("vod", "completeSeconds")),
        "—",
        "info",
        "—",
      ],
    );
    if (results["vod-gcs"]) {
      const gcsRatio = ratio("vod-gcs", "bare");
      const cpuPerGiB = (name, key = "cpu") => (med(name, key) * GiB) / SIZE;
      const bucketCpuPerGiB = (median(results["vod-gcs"].map((r) => r.bucketCpu)) * GiB) / SIZE;
      rows.push(
        [
          `${vodGcsName}: part PUTs to the bucket's signed URLs vs the limit`,
          SIZE,
          secs("vod-gcs"),
          mbps(med("vod-gcs")),
          fmt(gcsRatio),
          "info",
          "—",
        ],
        [
          `${vodGcsName}: complete (the bucket joins the parts)`,
          SIZE,
          `${fmt(med("vod-gcs", "completeSeconds"))}${spread(results["vod-gcs"].map((r) => r.completeSeconds))}`,
          "—",
          "—",
          "info",
          "—",
        ],
        [
          `host CPU per GiB during part PUTs: ${vodName} (filesystem)`,
          SIZE,
          "—",
          "—",
          `${fmt(cpuPerGiB("vod"))} s`,
          "info",
          "—",
        ],
        [
          `host CPU per GiB during part PUTs: ${vodGcsName} (the bucket's own: ${fmt(bucketCpuPerGiB)} s)`,
          SIZE,
          "—",
          "—",
          `${fmt(cpuPerGiB("vod-gcs"))} s`,
          "< 0.10 s",
          verdict(cpuPerGiB("vod-gcs") < 0.1),
        ],
        [
          `host CPU per GiB starting the upload (create, start: ${results["vod-gcs"][0].requests} URLs): filesystem / gcs`,
          SIZE,
          "—",
          "—",
          `${fmt(cpuPerGiB("vod", "beginCpu"))} s / ${fmt(cpuPerGiB("vod-gcs", "beginCpu"))} s`,
          "info",
          "—",
        ],
      );
    }
    const peak = Math.max(...results.vod.map((r) => r.peakKiB)) / 1024;
    const peakComplete = Math.max(...results.vod.map((r) => r.peakWithCompleteKiB)) / 1024;
    const growth = peak - idleKiB.vod / 1024;
    rows.push([
      `${vodName}: peak RSS during ${sizeMiB} MiB upload (idle ${fmt(idleKiB.vod / 1024, 0)} MiB, +${fmt(growth, 0)} MiB; with complete ${fmt(peakComplete, 0)} MiB)`,
      SIZE,
      "—",
      "—",
      `${fmt(peak, 0)} MiB`,
      "< 200 MiB",
      verdict(peak < 200),
    ]);
    for (const name of ["bare", "tus"]) {
      const p = Math.max(...results[name].map((r) => r.peakKiB)) / 1024;
      extra.push(
        `${name}: peak RSS ${fmt(p, 0)} MiB during uploads (idle ${fmt(idleKiB[name] / 1024, 0)} MiB, VmHWM ${fmt(hwmKiB[name] / 1024, 0)} MiB)`,
      );
    }
    extra.push(
      `server CPU seconds (user + system) per upload, median: ${Object.keys(results)
        .map((name) => `${name} ${fmt(med(name, "cpu"))}`)
        .join(
          ", ",
        )} (vod: part PUTs only${results["vod-gcs"] ? "; vod-gcs: the host's, the bucket's apart" : ""})`,
    );
    extra.push(
      `vod: VmHWM over the whole run ${fmt(hwmKiB.vod / 1024, 0)} MiB (includes start-up and migrations)`,
    );
    if (results["vod-gcs"])
      extra.push(
        `vod-gcs: peak RSS ${fmt(Math.max(...results["vod-gcs"].map((r) => r.peakKiB)) / 1024, 0)} MiB during part PUTs ` +
          `(idle ${fmt(idleKiB["vod-gcs"] / 1024, 0)} MiB), ${results["vod-gcs"][0].requests} parts of ${results["vod-gcs"][0].partSize / MiB} MiB; ` +
          "the bucket is the GCS test server (node:http, each part streamed to a file with its MD5), the host only signs the URLs",
      );
    if (database)
      extra.push(
        `vod's embedded database (PGlite in a child process of the host, pid ${database.pid}): peak RSS ${fmt(database.peakKiB / 1024, 0)} MiB during uploads ` +
          `(idle ${fmt(database.idleKiB / 1024, 0)} MiB, VmHWM ${fmt(database.hwmKiB / 1024, 0)} MiB); host and database together at peak: ${fmt((database.peakKiB + Math.max(...results.vod.map((r) => r.peakKiB))) / 1024, 0)} MiB`,
      );
    extra.push(
      `${PARALLEL} requests in flight, ${PART / MiB} MiB per request, ${rounds} round(s): seconds are the median ` +
        `(each round in parentheses), ratios the median of the per-round ratios (throughput over the baseline's); ` +
        `vod: ${results.vod[0].requests} parts of ${results.vod[0].partSize / MiB} MiB; ` +
        `tus: ${results.tus[0].requests} PATCHes`,
    );
  }

  if (!args["skip-processing"]) {
    const { plain, hosted, waits, plainCpu, hostCpu, sourceBytes, planned, gcs } =
      await processingBench(bucket);
    const p = median(plain);
    const h = median(hosted);
    const r = median(hosted.map((t, i) => t / plain[i]));
    const rungs = planned.map((r) => r.rendition.name).join("/");
    rows.push(
      [
        `processing: one plain ffmpeg, ${rungs} + audio, HLS fMP4`,
        sourceBytes,
        `${fmt(p)}${spread(plain)}`,
        "—",
        "1.00",
        "—",
        "—",
      ],
      [
        `processing: ${vodName}, upload-complete → ready`,
        sourceBytes,
        `${fmt(h)}${spread(hosted)}`,
        "—",
        fmt(r),
        "≤ 1.10",
        verdict(r <= 1.1),
      ],
    );
    if (gcs) {
      const toFilesystem = median(gcs.hosted.map((t, i) => t / hosted[i]));
      rows.push([
        `processing: ${vodGcsName}, upload-complete → ready, vs the filesystem set`,
        sourceBytes,
        `${fmt(median(gcs.hosted))}${spread(gcs.hosted)}`,
        "—",
        fmt(toFilesystem),
        "info",
        "—",
      ]);
      extra.push(
        `vod host on gcs: upload-complete → job started ${fmt(median(gcs.waits))} s${spread(gcs.waits)}; ` +
          `CPU seconds, median: its tools ${fmt(median(gcs.hostCpu.map((c) => c.tools)))} + the host process ` +
          `${fmt(median(gcs.hostCpu.map((c) => c.self)))} (source read from the bucket, renditions written to it)`,
      );
    }
    extra.push(
      `processing source: ${videoSeconds} s ${VIDEO.width}x${VIDEO.height} ${VIDEO.fps} fps testsrc2 + sine, ` +
        `${processingRounds} round(s), the two alternating; ratio: median of per-round ratios`,
    );
    extra.push(
      `vod host: upload-complete → job started (asset leaves "uploaded", polled every ${POLL_MS} ms): ` +
        `${fmt(median(waits))} s${spread(waits)}; job started → ready: ${fmt(median(hosted.map((t, i) => t - waits[i])))} s`,
    );
    extra.push(
      `processing CPU seconds, median: plain ffmpeg ${fmt(median(plainCpu))}; vod host: its tools ` +
        `${fmt(median(hostCpu.map((c) => c.tools)))} + the host process itself ${fmt(median(hostCpu.map((c) => c.self)))}` +
        (vodStorage === "postgres"
          ? ` + its database process ${fmt(median(hostCpu.map((c) => c.database)))}`
          : ""),
    );
  }

  console.log(`\n${header}\n`);
  console.log(
    table(["scenario", "bytes", "seconds", "MB/s", "ratio (to baseline)", "target", "result"], rows),
  );
  console.log(`\n${extra.map((l) => `- ${l}`).join("\n")}\n`);
  console.log(`load average (1, 5, 15 min): at the start ${loadAtStart}, at the end ${loadAverage()}\n`);
} finally {
  await cleanup();
}

// Helpers of the benchmarks: child processes, memory sampling, one HTTP client for every server.

import { execFileSync, spawn } from "node:child_process";
import { randomFillSync } from "node:crypto";
import { createReadStream, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, open, readFile, rm } from "node:fs/promises";
import { Agent, request } from "node:http";
import { createServer } from "node:net";
import { loadavg, tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

export const MiB = 1024 * 1024;

/** `size` random bytes in a file, made once; every upload scenario streams this file from disk. */
export const makeRandomFile = async (path, size) => {
  const handle = await open(path, "w");
  const chunk = Buffer.allocUnsafe(8 * MiB);
  try {
    for (let written = 0; written < size; written += chunk.length) {
      const n = Math.min(chunk.length, size - written);
      randomFillSync(chunk, 0, n);
      await handle.write(chunk, 0, n);
    }
  } finally {
    await handle.close();
  }
};

/**
 * Whether each timed upload starts from the same page cache. How fast a server's writes go on
 * these VMs depends on what the page cache holds: the bare pipe was about twice as slow writing
 * new files beside the last round's, still cached, as rewriting the names of its last round
 * (each open truncates the cached file it replaces). So before each upload
 * the clean page cache is dropped (dirty pages are synced first by the caller) and the source file
 * read back into it: every server then writes into the same state. Needs root on Linux; returns
 * undefined where it cannot (or when `skip`), and the caller's header says which.
 */
export const pageCacheLeveller = (skip = false) => {
  if (skip || process.platform !== "linux") return undefined;
  try {
    writeFileSync("/proc/sys/vm/drop_caches", "1");
  } catch {
    return undefined;
  }
  return async (file) => {
    writeFileSync("/proc/sys/vm/drop_caches", "1");
    for await (const _ of createReadStream(file, { highWaterMark: 8 * MiB }));
  };
};

/**
 * The checkout whose build is measured: this repository, or the one named by VOD_BENCH_REPO (say a
 * clean `git archive` of a commit, built, while the working tree is mid-change). Its `dist/`
 * folders must be built (`npx tsc -b`).
 */
export const repo = resolve(process.env.VOD_BENCH_REPO ?? fileURLToPath(new URL("..", import.meta.url)));
export const cli = join(repo, "hosts/express/dist/bin/vod.js");
/**
 * A benchmark's command line: `options` as node:util's parseArgs takes them, with
 * `--database-url` (and `--redis-url` when `redis`) added, refused unless they name this machine:
 * a benchmark loads the server it is pointed at.
 */
export const benchArgs = (options, { redis = false } = {}) => {
  const { values } = parseArgs({
    options: {
      ...options,
      "database-url": { type: "string", default: "postgres://postgres@127.0.0.1:5432/postgres" },
      ...(redis ? { "redis-url": { type: "string", default: "redis://127.0.0.1:6379" } } : {}),
    },
  });
  for (const url of [values["database-url"], values["redis-url"]])
    if (url !== undefined && !/^\w+:\/\/([^@/]*@)?(127\.0\.0\.1|localhost)[:/]/.test(url))
      throw new Error(`only a local server is benchmarked against: ${url}`);
  return values;
};
/**
 * A benchmark's scratch: a temporary directory, the processes it `track`s, and `cleanup`, run once
 * at its end or on a signal: the processes stopped, the server schema (and its queue's) dropped
 * when `server` names it, `also` run, the directory removed.
 */
export const benchScratch = async ({ dirPrefix, log, server, also }) => {
  const dir = await mkdtemp(join(tmpdir(), dirPrefix));
  const children = new Set();
  let cleaning;
  const cleanup = () => {
    cleaning ??= (async () => {
      await Promise.all([...children].map((c) => c.stop()));
      if (server) {
        const { connectPostgres } = await fromRepo("adapters/postgres");
        const admin = connectPostgres({ connectionString: server.databaseUrl, poolSize: 1 });
        for (const s of [server.schema, `${server.schema}_jobs`])
          await dropBenchSchema(admin, s).catch(() => undefined);
        await admin.close();
      }
      await also?.();
      await rm(dir, { recursive: true, force: true });
    })();
    return cleaning;
  };
  cleanUpOnSignals(cleanup, log);
  const track = (spawned) => {
    children.add(spawned);
    return spawned;
  };
  return { dir, track, cleanup };
};

/** Imports a built workspace package of `repo` by folder, e.g. `fromRepo("adapters/ffmpeg")`. */
export const fromRepo = (dir, file = "dist/index.js") => import(pathToFileURL(join(repo, dir, file)).href);
/**
 * Drops a schema the benchmark made on a server, with the row-level security role its migrations
 * made for it (roles belong to the cluster, so they would otherwise pile up; none on older builds).
 */
export const dropBenchSchema = async (admin, schema) => {
  await admin.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  const { rows } = await admin.query("SELECT 'vod_app_' || current_database() || '_' || $1::text AS role", [
    schema,
  ]);
  await admin.exec(`DROP ROLE IF EXISTS "${rows[0].role}"`);
};
/** SIGINT and SIGTERM run the bench's cleanup (servers, schemas, scratch) before it exits 130. */
export const cleanUpOnSignals = (cleanup, log) => {
  for (const signal of ["SIGINT", "SIGTERM"])
    process.once(signal, () => {
      log(`${signal}: cleaning up`);
      void cleanup().then(() => process.exit(130));
    });
};
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export const freePort = () =>
  new Promise((resolve, reject) => {
    const server = createServer()
      .once("error", reject)
      .listen(0, "127.0.0.1", () => {
        const { port } = server.address();
        server.close(() => resolve(port));
      });
  });

/**
 * Spawns `node <args>` with piped output; `waitFor` resolves with the first match of `pattern`.
 * `wrapper`: a command that runs node, e.g. `["taskset", "-c", "0"]`.
 */
export const spawnNode = (args, env = {}, wrapper = []) => {
  let output = "";
  const [command, ...prefix] = [...wrapper, process.execPath];
  const child = spawn(command, [...prefix, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout.on("data", (d) => {
    output += d;
  });
  child.stderr.on("data", (d) => {
    output += d;
  });
  const waitFor = async (pattern, timeoutMs = 60_000) => {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const match = pattern.exec(output);
      if (match) return match;
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`${args.join(" ")} exited early:\n${output}`);
      if (Date.now() > until) throw new Error(`${args.join(" ")} never printed ${pattern}:\n${output}`);
      await sleep(50);
    }
  };
  const stop = () =>
    new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
      child.once("exit", () => {
        clearTimeout(timer);
        resolve();
      });
      child.kill("SIGTERM");
    });
  return { child, output: () => output, waitFor, stop };
};

/** Resident set size of a process in KiB, from /proc/<pid>/status (VmRSS, or VmHWM: its peak). */
export const statusKiB = async (pid, field = "VmRSS") => {
  const text = await readFile(`/proc/${pid}/status`, "utf8");
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text);
  return match ? Number(match[1]) : Number.NaN;
};

/**
 * CPU seconds a process has used so far, from /proc/<pid>/stat (clock ticks of 1/100 s): its own
 * (user, system) and that of its children it has waited for (children: ffmpeg and such, once exited).
 */
export const cpuSeconds = async (pid = process.pid) => {
  const text = await readFile(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name, which is in parentheses and may hold spaces.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  const tick = (i) => Number(fields[i]) / 100;
  return { user: tick(11), system: tick(12), children: tick(13) + tick(14) };
};

/** Process ids whose parent is `pid` (Linux /proc), e.g. the host's embedded database process. */
export const childPids = async (pid) => {
  const { readdir, readFile } = await import("node:fs/promises");
  const found = [];
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // The parent pid is the 2nd field after the command, which is in parentheses.
      const stat = await readFile(`/proc/${name}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1] === String(pid)) found.push(Number(name));
    } catch {
      // exited while listing
    }
  }
  return found;
};

/** Samples VmRSS of `pid` every `intervalMs` until `stop()`, which answers the peak and the count. */
export const sampleRss = (pid, intervalMs = 50) => {
  let peakKiB = 0;
  let samples = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        const kib = await statusKiB(pid);
        if (kib > peakKiB) peakKiB = kib;
        samples++;
      } catch {
        return;
      }
      await sleep(intervalMs);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return { peakKiB, samples };
    },
  };
};

/** One keep-alive agent per server, at most `sockets` connections: the client's parallelism. */
export const keepAliveAgent = (sockets) => new Agent({ keepAlive: true, maxSockets: sockets });

/**
 * Sends `length` bytes of `file` from `start` as the body of one request, streamed from disk, and
 * answers the status, headers and body text. Every upload client of the benchmark is this one.
 */
export const sendFileRange = ({
  agent,
  url,
  method,
  headers = {},
  file,
  start,
  length,
  timeoutMs = 120_000,
}) =>
  new Promise((resolve, reject) => {
    const target = new URL(url);
    const req = request(
      {
        agent,
        host: target.hostname,
        port: target.port,
        path: target.pathname + target.search,
        method,
        headers: { ...headers, "content-length": String(length) },
        timeout: timeoutMs,
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d) => {
          body += d;
        });
        res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body }));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`${method} ${url}: no answer in ${timeoutMs} ms`)));
    req.on("error", reject);
    if (length === 0) {
      req.end();
      return;
    }
    const source = createReadStream(file, { start, end: start + length - 1 });
    source.on("error", (e) => req.destroy(e));
    source.pipe(req);
  });

/** Runs `work(job)` over `jobs` with at most `concurrency` at once; fails on the first failure. */
export const pool = async (jobs, concurrency, work) => {
  let next = 0;
  const runners = Array.from({ length: Math.min(concurrency, jobs.length) }, async () => {
    while (next < jobs.length) {
      const job = jobs[next++];
      await work(job);
    }
  });
  await Promise.all(runners);
};

/**
 * PUTs `file` in parts of `partSize` to a server that takes `PUT /part/<n>` (the bare pipe and its
 * variants), `parallel` at a time, each expected to answer 200.
 */
export const putPartsToServer = ({ agent, port, file, size, partSize, parallel, name }) =>
  pool(partsOf(size, partSize), parallel, async (p) => {
    const reply = await sendFileRange({
      agent,
      url: `http://127.0.0.1:${port}/part/${p.number}`,
      method: "PUT",
      headers: { "content-type": "application/octet-stream" },
      file,
      ...p,
    });
    expectStatus(`${name} part ${p.number}`, reply, 200);
  });

/** A JSON call to a control endpoint (signup, create, start, complete): small bodies, fetch is fine. */
export const callJson = async (base, path, { method, body, headers = {} } = {}) => {
  const res = await fetch(`${base}${path}`, {
    method: method ?? (body === undefined ? "GET" : "POST"),
    headers: { ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(120_000),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
};

export const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** A plain-text table with a header and aligned columns, as markdown. */
export const table = (header, rows) => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => `| ${cells.map((c, i) => String(c).padEnd(widths[i])).join(" | ")} |`;
  return [line(header), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...rows.map(line)].join("\n");
};

export const expectStatus = (what, reply, status) => {
  if (reply.status !== status) throw new Error(`${what}: ${reply.status} ${JSON.stringify(reply.body)}`);
};

export const partsOf = (size, partSize) =>
  Array.from({ length: Math.ceil(size / partSize) }, (_, i) => ({
    number: i + 1,
    start: i * partSize,
    length: Math.min(partSize, size - i * partSize),
  }));

/** The node flags the image starts the host with (the Dockerfile's ENTRYPOINT), read from there. */
const HOST_NODE_FLAGS = (() => {
  const dockerfile = readFileSync(join(repo, "Dockerfile"), "utf8");
  const entry = /^ENTRYPOINT \[(.*)\]$/m.exec(dockerfile)?.[1] ?? "";
  return JSON.parse(`[${entry}]`).filter((arg) => arg.startsWith("--") && arg !== "--");
})();

/**
 * Starts `vod serve` (the built CLI at `cli`) on 127.0.0.1 with its data in `dataDir`, waits for
 * /healthz, signs up a tenant, and answers helpers that drive uploads through it with `parallel`
 * part PUTs in flight. The host runs with the image's node flags (`HOST_NODE_FLAGS`), then `nodeArgs`; `track` wraps the spawned process (the caller stops it on the way out).
 */
export const startVodHost = async ({
  cli,
  dataDir,
  env = {},
  nodeArgs = [],
  parallel = 4,
  track = (s) => s,
}) => {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const host = track(
    spawnNode([...HOST_NODE_FLAGS, ...nodeArgs, cli, "serve"], {
      PORT: String(port),
      VOD_HOST: "127.0.0.1",
      VOD_BASE_URL: base,
      VOD_MEDIA_URL: base,
      VOD_DRM_URL: base,
      VOD_DATA_DIR: dataDir,
      VOD_LOG_LEVEL: "warn",
      ...env,
    }),
  );
  for (let i = 0; ; i++) {
    if (host.child.exitCode !== null) throw new Error(`host exited early:\n${host.output()}`);
    const ok = await fetch(`${base}/healthz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) break;
    if (i >= 1200) throw new Error(`host did not answer /healthz in 120 s:\n${host.output()}`);
    await sleep(100);
  }
  const signup = await callJson(base, "/v1/auth/signup", {
    body: { email: `bench-${Date.now()}@example.com`, password: "correct horse battery staple" },
  });
  expectStatus("signup", signup, 201);
  const auth = { authorization: `Bearer ${signup.body.access_token}` };
  const agent = keepAliveAgent(parallel);

  /** Creates an asset and starts an upload of `size` bytes: the part URLs to PUT. */
  const begin = async (size, title) => {
    const created = await callJson(base, "/v1/assets", { body: { title }, headers: auth });
    expectStatus("create asset", created, 201);
    const started = await callJson(base, "/v1/uploads", {
      body: { asset_id: created.body.asset.id, size_bytes: size },
      headers: auth,
    });
    expectStatus("start upload", started, 201);
    return { assetId: created.body.asset.id, ...started.body.upload };
  };
  const putParts = (file, upload) =>
    pool(upload.parts, parallel, async (part) => {
      const start = (part.number - 1) * upload.part_size;
      const reply = await sendFileRange({
        agent,
        url: part.url,
        method: "PUT",
        headers: { "content-type": "application/octet-stream" },
        file,
        start,
        length: Math.min(upload.part_size, upload.size_bytes - start),
      });
      expectStatus(`vod part ${part.number}`, reply, 200);
    });
  const complete = async (upload) => {
    const reply = await callJson(base, `/v1/uploads/${upload.id}/complete`, { body: {}, headers: auth });
    expectStatus("complete", reply, 200);
    return reply.body;
  };
  const asset = async (id) => (await callJson(base, `/v1/assets/${id}`, { headers: auth })).body.asset;
  return { host, base, auth, begin, putParts, complete, asset };
};

/**
 * Issue 13's hot paths on a started host (`startVodHost`): gives its tenant 50 assets and a read
 * API key, checks that a page of 50 comes back, and answers the three paths with their headers.
 */
/**
 * `titlePad` lengthens each title by that many characters: two builds whose asset replies differ
 * in size (a field added) can then be compared with replies of the same bytes.
 */
export const apiHotPaths = async (vod, { titlePad = 0 } = {}) => {
  for (let i = 0; i < 50; i++)
    expectStatus(
      "create asset",
      await callJson(vod.base, "/v1/assets", {
        body: { title: `asset ${i}${"x".repeat(titlePad)}` },
        headers: vod.auth,
      }),
      201,
    );
  const key = await callJson(vod.base, "/v1/api-keys", {
    body: { name: "bench", scopes: ["read"] },
    headers: vod.auth,
  });
  expectStatus("create API key", key, 201);
  const apiKey = { "x-api-key": key.body.key };
  const list50 = await callJson(vod.base, "/v1/assets?limit=50", { headers: apiKey });
  if (list50.body.data.length !== 50) throw new Error(`expected 50 assets, got ${list50.body.data.length}`);
  return [
    {
      id: "limit50",
      name: "GET /v1/assets?limit=50, API key",
      url: `${vod.base}/v1/assets?limit=50`,
      headers: apiKey,
      bytes: Buffer.byteLength(JSON.stringify(list50.body)),
    },
    {
      id: "limit1",
      name: "GET /v1/assets?limit=1, API key",
      url: `${vod.base}/v1/assets?limit=1`,
      headers: apiKey,
    },
    { id: "me", name: "GET /v1/auth/me, bearer", url: `${vod.base}/v1/auth/me`, headers: vod.auth },
  ];
};

// ---------------------------------------------------------------------------------------------
// Reporting, shared by every benchmark.

export const fmt = (n, digits = 2) => n.toFixed(digits);
export const verdict = (ok) => (ok ? "pass" : "FAIL");
export const sum = (values) => values.reduce((a, b) => a + b, 0);
/** The rounds behind a median, for the table: " (a, b, c)". */
export const spread = (values, digits = 2) =>
  values.length > 1 ? ` (${values.map((v) => fmt(v, digits)).join(", ")})` : "";
export const loadAverage = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");

/** The commit of the measured checkout, and whether its working tree differs from it. */
export const describeBuild = () => {
  try {
    const git = (...a) =>
      execFileSync("git", ["-C", repo, ...a], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "ignore"],
      }).trim();
    const commit = git("rev-parse", "--short", "HEAD");
    const dirty = git("status", "--porcelain", "--untracked-files=no");
    return `(commit ${commit}${dirty ? ", with uncommitted changes" : ""})`;
  } catch {
    return "(not a git checkout)";
  }
};

/** Where a profiled function lives: a package, a workspace package, node itself, or native code. */
const placeOf = (url) => {
  if (!url) return "(native: bindings, gc, program)";
  if (url.startsWith("node:")) return "node: built-ins";
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  const own = /^file:\/\/(.+?)\/dist\//.exec(url);
  return own ? `@vod: ${relative(repo, own[1])}` : url;
};

/**
 * Self time of a V8 CPU profile's main thread by place and by function, counting only samples
 * inside `windows` ([from, to] pairs on the profile's microsecond clock).
 */
export const summarizeCpuProfile = (profile, windows, topFunctions = 30) => {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const byPlace = new Map();
  const byFunction = new Map();
  let total = 0;
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    if (!windows.some(([from, to]) => at >= from && at <= to)) continue;
    const { callFrame } = byId.get(profile.samples[i]);
    if (callFrame.functionName === "(idle)") continue;
    total += delta;
    const place = placeOf(callFrame.url);
    const line = callFrame.url ? `:${callFrame.lineNumber + 1}` : "";
    const file = callFrame.url.startsWith("node:") ? callFrame.url : callFrame.url.split("/").pop();
    const fn = `${callFrame.functionName || "(anonymous)"}  ${file}${line}  [${place}]`;
    byPlace.set(place, (byPlace.get(place) ?? 0) + delta);
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + delta);
  }
  const wall = windows.reduce((s, [from, to]) => s + (to - from), 0);
  const rows = (map, n) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, v]) => [k, (v / 1e6).toFixed(2), `${((100 * v) / total).toFixed(1)}%`]);
  return { total, wall, places: rows(byPlace, 15), functions: rows(byFunction, topFunctions) };
};

/**
 * autocannon in a process of its own against `url` for `seconds`: the mean requests per second,
 * every reply checked (any non-2xx, error or timeout throws). `body` is sent with `method`; with
 * `idReplacement`, each `[<id>]` in the request (headers included) becomes a fresh id. Its options
 * go as JSON through its programmatic API: its command line reads `[` as the start of a sub-argument.
 */
export const autocannonRps = async (
  url,
  { connections, seconds, headers = {}, method, body, idReplacement = false },
) => {
  const options = { url, connections, duration: seconds, headers, method, body, idReplacement };
  const runner = spawnNode(
    [
      "--input-type=module",
      "-e",
      `const { default: autocannon } = await import(${JSON.stringify(pathToFileURL(join(repo, "node_modules/autocannon/autocannon.js")).href)});
       const result = await autocannon(JSON.parse(process.env.VOD_BENCH_AUTOCANNON));
       process.stdout.write(JSON.stringify(result));`,
    ],
    { VOD_BENCH_AUTOCANNON: JSON.stringify(options) },
  );
  await new Promise((resolve) => runner.child.once("exit", resolve));
  const text = runner.output();
  const result = JSON.parse(text.slice(text.indexOf("{"), text.lastIndexOf("}") + 1));
  if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0)
    throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`);
  return result.requests.total / (result.duration || seconds);
};

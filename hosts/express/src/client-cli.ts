import { createHash } from "node:crypto";
import { mkdir, readFile, realpath, rename, rm, stat, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { basename, dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { createClient, type UploadProgress, type VodClient, VodError } from "@vod/client";

/** What a run of `vod upload` leaves for the next run of the same file: the asset and its session. */
interface UploadState {
  readonly file: string;
  readonly size: number;
  readonly mtimeMs: number;
  readonly apiUrl: string;
  readonly assetId: string;
  readonly uploadId?: string;
}

const MIB = 1024 * 1024;
const mib = (bytes: number) => `${(bytes / MIB).toFixed(1)} MiB`;

export const usageError = (message: string) => {
  process.stderr.write(`vod: ${message}\n`);
  process.exitCode = 2;
};

/** The client of VOD_API_URL with VOD_API_KEY; without them, undefined, said, and exit code 78 (config). */
const clientFromEnv = (
  command: string,
  env: NodeJS.ProcessEnv,
): { client: VodClient; apiUrl: string } | undefined => {
  const apiUrl = env.VOD_API_URL;
  const apiKey = env.VOD_API_KEY;
  if (!apiUrl || !apiKey) {
    process.stderr.write(
      `vod ${command}: set VOD_API_URL (the API's address) and VOD_API_KEY (an API key)\n`,
    );
    process.exitCode = 78;
    return undefined;
  }
  return { client: createClient({ baseUrl: apiUrl, apiKey }), apiUrl };
};

/**
 * Where upload states are kept: VOD_STATE_DIR, else $XDG_STATE_HOME/vod, else ~/.local/state/vod
 * (the XDG base directory for state that outlives a run but is no user data).
 */
export const stateDirectory = (env: NodeJS.ProcessEnv) =>
  join(env.VOD_STATE_DIR || join(env.XDG_STATE_HOME || join(homedir(), ".local", "state"), "vod"), "uploads");

/** One state file per API and file version: the real path, size and mtime say the file is the same. */
const stateFileOf = (dir: string, apiUrl: string, file: string, size: number, mtimeMs: number) =>
  join(
    dir,
    `${createHash("sha256")
      .update(JSON.stringify([apiUrl, file, size, mtimeMs]))
      .digest("hex")
      .slice(0, 32)}.json`,
  );

const readState = async (path: string): Promise<UploadState | undefined> => {
  try {
    return JSON.parse(await readFile(path, "utf8")) as UploadState;
  } catch {
    return undefined;
  }
};

/** Written whole or not at all: a run killed while writing leaves the previous state. */
const writeState = async (path: string, state: UploadState) => {
  await mkdir(dirname(path), { recursive: true });
  const partial = `${path}.${process.pid}.tmp`;
  await writeFile(partial, `${JSON.stringify(state, null, 2)}\n`);
  await rename(partial, path);
};

/** A bar with bytes, speed and ETA on a terminal; a plain line per part otherwise (logs, CI, pipes). */
const progressReporter = async (stream: NodeJS.WriteStream) => {
  const startedAt = Date.now();
  let firstBytes: number | undefined;
  const speed = (p: UploadProgress) => {
    const seconds = (Date.now() - startedAt) / 1000;
    return seconds > 0 ? (p.uploadedBytes - (firstBytes ?? p.uploadedBytes)) / seconds : 0;
  };
  if (stream.isTTY) {
    // Loaded for a terminal only: a piped run starts without it.
    const { default: cliProgress } = await import("cli-progress");
    const bar = new cliProgress.SingleBar(
      {
        stream,
        format: "{bar} {percentage}% | {sent} of {size} | {speed} | ETA {eta_formatted}",
        hideCursor: true,
        etaBuffer: 20,
      },
      cliProgress.Presets.shades_classic,
    );
    let started = false;
    return {
      progress: (p: UploadProgress) => {
        const values = { sent: mib(p.uploadedBytes), size: mib(p.totalBytes), speed: `${mib(speed(p))}/s` };
        if (!started) {
          started = true;
          firstBytes = p.uploadedBytes;
          bar.start(p.totalBytes, p.uploadedBytes, values);
        } else bar.update(p.uploadedBytes, values);
      },
      stop: () => bar.stop(),
    };
  }
  return {
    progress: (p: UploadProgress) => {
      if (firstBytes === undefined) {
        firstBytes = p.uploadedBytes;
        stream.write(
          p.resumedBytes > 0
            ? `resuming upload ${p.uploadId}: ${p.partsDone} of ${p.partCount} parts (${mib(p.resumedBytes)}) already stored\n`
            : `uploading ${mib(p.totalBytes)} in ${p.partCount} parts (upload ${p.uploadId})\n`,
        );
        return;
      }
      const rate = speed(p);
      const eta = rate > 0 ? Math.ceil((p.totalBytes - p.uploadedBytes) / rate) : undefined;
      stream.write(
        `uploaded ${mib(p.uploadedBytes)} of ${mib(p.totalBytes)} (${Math.floor((100 * p.uploadedBytes) / p.totalBytes)}%), ` +
          `${mib(rate)}/s${eta === undefined ? "" : `, ETA ${eta} s`}\n`,
      );
    },
    stop: () => undefined,
  };
};

/**
 * What a client command says when it fails: the API's code and message, an asset that failed
 * processing, or what went wrong on this side (the file changed, the network): exit code 1.
 */
const failed = (command: string, error: unknown) => {
  if (!(error instanceof Error)) return false;
  const said = error instanceof VodError ? `${error.code}: ${error.message}` : error.message;
  process.stderr.write(`vod ${command}: ${said}\n`);
  process.exitCode = 1;
  return true;
};

/**
 * `vod upload FILE [--title T] [--drm] [--parallel N] [--wait]`: creates an asset, sends the file
 * as its upload's parts and completes it. A state file (see `stateDirectory`) keeps the asset and
 * upload ids from before the first byte is sent, so a run killed or interrupted is resumed by
 * running the same command again: only the parts the session lacks are sent.
 */
export const uploadCommand = async (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv = process.env) => {
  let parsed: ReturnType<typeof parseUpload>;
  try {
    parsed = parseUpload(args);
  } catch (error) {
    return usageError(error instanceof Error ? error.message : String(error));
  }
  const { values, positionals } = parsed;
  const [given] = positionals;
  if (!given || positionals.length !== 1)
    return usageError("usage: vod upload FILE [--title T] [--drm] [--parallel N] [--wait]");
  const parallel = values.parallel === undefined ? 4 : Number(values.parallel);
  if (!Number.isInteger(parallel) || parallel < 1 || parallel > 32)
    return usageError("--parallel takes a whole number from 1 to 32");
  const configured = clientFromEnv("upload", env);
  if (!configured) return;
  const { client, apiUrl } = configured;
  let file: string;
  let info: Awaited<ReturnType<typeof stat>>;
  try {
    file = await realpath(given);
    info = await stat(file);
  } catch {
    process.stderr.write(`vod upload: cannot read ${given}\n`);
    process.exitCode = 66;
    return;
  }
  if (!info.isFile() || info.size === 0) {
    process.stderr.write(`vod upload: ${given} is not a non-empty file\n`);
    process.exitCode = 66;
    return;
  }
  const statePath = stateFileOf(stateDirectory(env), apiUrl, file, info.size, info.mtimeMs);
  const base = { file, size: info.size, mtimeMs: info.mtimeMs, apiUrl };

  const interrupt = new AbortController();
  const onSignal = () => interrupt.abort(new Error("interrupted"));
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const reporter = await progressReporter(process.stderr);
  try {
    let state = await readState(statePath);
    let asset = state
      ? await client.assets.get(state.assetId).catch((error: unknown) => {
          // The asset of an earlier run was deleted since: start over with a new one.
          if (error instanceof VodError && error.status === 404) return undefined;
          throw error;
        })
      : undefined;
    if (!state || !asset) {
      asset = await client.assets.create({ title: values.title ?? basename(file), drm: values.drm ?? false });
      state = { ...base, assetId: asset.id };
      await writeState(statePath, state);
    }
    console.log(`asset ${asset.id}`);
    if (asset.status === "pending") {
      const startedAt = Date.now();
      const current = state;
      const done = await client.uploads.upload({
        assetId: asset.id,
        file,
        parallel,
        uploadId: current.uploadId,
        signal: interrupt.signal,
        onSession: (session) => writeState(statePath, { ...current, uploadId: session.id }),
        onProgress: reporter.progress,
      });
      reporter.stop();
      const seconds = (Date.now() - startedAt) / 1000;
      console.log(
        `uploaded ${mib(done.upload.size_bytes)} in ${seconds.toFixed(2)} s ` +
          `(${mib(done.upload.size_bytes / seconds)}/s): asset ${asset.id} is ${done.asset.status}`,
      );
    } else console.log(`already uploaded: asset ${asset.id} is ${asset.status}`);

    if (values.wait) {
      process.stderr.write("waiting for the asset to be ready...\n");
      await client.assets.waitUntilReady(asset.id, { signal: interrupt.signal, timeoutMs: 3_600_000 });
      const session = await client.playback.createSession({ assetId: asset.id });
      console.log(`ready: ${session.urls.manifest}`);
    } else console.log(`\`vod play ${asset.id}\` gives its playback URLs once it is ready`);
    await rm(statePath, { force: true });
  } catch (error) {
    reporter.stop();
    if (interrupt.signal.aborted) {
      process.stderr.write("vod upload: interrupted; run the same command again to resume\n");
      process.exitCode = 130;
      return;
    }
    if (!failed("upload", error)) throw error;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
};

const parseUpload = (args: ReadonlyArray<string>) =>
  parseArgs({
    args: [...args],
    allowPositionals: true,
    options: {
      title: { type: "string" },
      drm: { type: "boolean" },
      parallel: { type: "string" },
      wait: { type: "boolean" },
    },
  });

/** `vod play ASSET_ID [--ttl SECONDS]`: mints a playback session and prints its token and URLs. */
export const playCommand = async (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv = process.env) => {
  let parsed: { values: { ttl?: string }; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...args], allowPositionals: true, options: { ttl: { type: "string" } } });
  } catch (error) {
    return usageError(error instanceof Error ? error.message : String(error));
  }
  const [assetId] = parsed.positionals;
  if (!assetId || parsed.positionals.length !== 1)
    return usageError("usage: vod play ASSET_ID [--ttl SECONDS]");
  const ttlSeconds = parsed.values.ttl === undefined ? undefined : Number(parsed.values.ttl);
  if (ttlSeconds !== undefined && !Number.isInteger(ttlSeconds))
    return usageError("--ttl takes whole seconds");
  const configured = clientFromEnv("play", env);
  if (!configured) return;
  const { client } = configured;
  try {
    const { session, token, urls } = await client.playback.createSession({ assetId, ttlSeconds });
    console.log(`manifest: ${urls.manifest}`);
    if (urls.entitlement) console.log(`entitlement: ${urls.entitlement}`);
    console.log(`telemetry: ${urls.telemetry}`);
    console.log(`token: ${token}`);
    console.log(`session: ${session.id} (expires ${new Date(session.expires_at).toISOString()})`);
  } catch (error) {
    if (!failed("play", error)) throw error;
  }
};

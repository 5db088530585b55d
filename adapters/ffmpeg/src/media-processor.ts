import { createHash, type Hash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative, sep } from "node:path";
import { pipeline } from "node:stream/promises";
import type {
  ByteStream,
  Encryption,
  MediaInput,
  MediaProcessor,
  OutputFile,
  PackagedOutput,
  PackagedTrack,
  PackageOptions,
  PartChecksums,
  ProbedSource,
  Rendition,
  SourceRange,
  StorageError,
} from "@vod/core";
import { timedStage } from "@vod/core";
import { Effect } from "effect";
import { mergeManifests } from "./dash.js";
import { type PlannedRendition, planRenditions } from "./ladder.js";
import { fileUrl, probeFile, readDecodableCodecs } from "./probe.js";
import { describeRun, type MediaRejectedError, rejected, runTool } from "./process.js";
import { resolveTools, type ToolConfig } from "./tools.js";

export interface FfmpegConfig extends ToolConfig {
  /**
   * Told once, when the processor is made, that ffmpeg or ffprobe is an old build shipped by an npm
   * package (`ResolvedTools.warning`); a host passes its logger, so that it shows at start.
   */
  readonly log?: { warn(details: object, message: string): void };
  /**
   * Where each job makes its scratch directory; default the OS temp directory. Directories left by
   * a worker that died are removed by the next processor here, which tells them by their maker's
   * pid: so this directory must not be shared with another machine or pid namespace.
   */
  readonly scratchDir?: string;
  /**
   * ffmpeg never reads past this much of a source, a guard against a container whose header
   * understates its length. Rejecting a longer source (source_too_long) is the caller's business.
   */
  readonly maxDurationMs?: number;
  /** x264 preset; default "veryfast". */
  readonly x264Preset?: string;
  /** x264 constant rate factor under each rung's bitrate cap; default 23. */
  readonly crf?: number;
  /**
   * x264 threads per rung; default x264's own choice. With more than one, x264's rate control under
   * the bitrate cap depends on timing, so two runs on the same source differ; 1 makes it repeatable.
   */
  readonly x264Threads?: number;
  /** Limit on each probing run of ffprobe/ffmpeg; default 60 s. */
  readonly probeTimeoutMs?: number;
  /** Limit on transcoding and packaging one source; default none (the caller can interrupt). */
  readonly packageTimeoutMs?: number;
  /**
   * Limit on the packager's run, which takes a small fraction of the source's duration: a hung
   * packager fails the run (processing_error, retried) instead of holding it. Default 60 s plus a
   * tenth of the source's duration.
   */
  readonly packagerTimeoutMs?: number;
}

const SEGMENT_SECONDS = 6;
/** Keyframes every 2 s, so every 6-second segment starts on one. */
const KEYFRAME_SECONDS = 2;
const MASTER = "master.m3u8";
const POSTER = "poster.jpg";
const DASH = "manifest.mpd";
/** The poster is the source's picture, no taller than this. */
const POSTER_MAX_HEIGHT = 1080;
/** Shaka Packager reads `--keys` from this variable (`--fromenv=keys`), so the key is in no argv. */
const KEYS_ENV = "FLAGS_keys";

const contentType = (path: string): string => {
  if (path.endsWith(".m3u8")) return "application/vnd.apple.mpegurl";
  if (path.endsWith(".mpd")) return "application/dash+xml";
  if (path.endsWith(".jpg")) return "image/jpeg";
  return path.startsWith("audio/") ? "audio/mp4" : "video/mp4";
};

/** Emission order: media and poster, then media playlists, then the DASH manifest, the master last. */
const rank = (path: string): number => {
  if (path === MASTER) return 3;
  if (path === DASH) return 2;
  return path.endsWith(".m3u8") ? 1 : 0;
};

/**
 * Scratch directories carry the pid of the process that made them: a worker killed mid-job (an
 * OOM kill, a SIGKILL at deploy) cannot remove its own, so the next processor in this directory
 * removes those whose process is gone. A live process's, this one's or another's, is never touched.
 */
const SCRATCH_PREFIX = "vod-ffmpeg-p";
const SCRATCH_OWNER = /^vod-ffmpeg-p(\d+)-/;

const processAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: it exists, under another user.
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
};

/** Removes the scratch directories in `parent` left by processes that are gone; their names. */
const sweepScratch = async (parent: string): Promise<string[]> => {
  let names: string[];
  try {
    names = await readdir(parent);
  } catch {
    return [];
  }
  const stale = names.filter((name) => {
    const owner = SCRATCH_OWNER.exec(name);
    if (!owner) return false;
    const pid = Number(owner[1]);
    return pid !== process.pid && !processAlive(pid);
  });
  await Promise.all(
    stale.map((name) => rm(join(parent, name), { recursive: true, force: true }).catch(() => undefined)),
  );
  return stale;
};

/** Each job's scratch directory, removed when the job ends; the first one sweeps dead workers' first. */
export const scratchSpace = (parent: string) => {
  let swept: Promise<unknown> | undefined;
  return <A, E>(use: (dir: string) => Effect.Effect<A, E>): Effect.Effect<A, E | MediaRejectedError> =>
    Effect.acquireUseRelease(
      Effect.tryPromise({
        try: async () => {
          swept ??= sweepScratch(parent);
          await swept;
          return mkdtemp(join(parent, `${SCRATCH_PREFIX}${process.pid}-`));
        },
        catch: (cause) =>
          rejected("processing_error", `Could not make a scratch directory in ${parent}`, cause),
      }),
      use,
      (dir) => Effect.promise(() => rm(dir, { recursive: true, force: true }).catch(() => undefined)),
    );
};

/** A declared part sha256 that the source's bytes do not match. */
class PartDiffers extends Error {
  constructor(readonly part: number) {
    super(`part ${part} of the upload: its sha256 differs from the one declared at completion`);
  }
}

/**
 * Hashes each declared part's byte range of a stream passing through, throwing PartDiffers at the
 * end of the first part whose sha256 is not the declared one.
 */
const partHasher = (parts: PartChecksums) => {
  let offset = 0;
  let hash: Hash | undefined;
  const finish = (part: number) => {
    if (hash && hash.digest("hex") !== parts.sha256.get(part)) throw new PartDiffers(part);
    hash = undefined;
  };
  return {
    update(chunk: Uint8Array) {
      let at = 0;
      while (at < chunk.byteLength) {
        const part = Math.floor(offset / parts.partSize) + 1;
        const inPart = offset % parts.partSize;
        if (inPart === 0 && parts.sha256.has(part)) hash = createHash("sha256");
        const take = Math.min(chunk.byteLength - at, parts.partSize - inPart);
        hash?.update(chunk.subarray(at, at + take));
        at += take;
        offset += take;
        if (offset % parts.partSize === 0) finish(part);
      }
    },
    /** The last part ends with the stream. */
    end() {
      if (offset % parts.partSize !== 0) finish(Math.floor(offset / parts.partSize) + 1);
    },
  };
};

/**
 * The source as a local file: in place, or copied into `dir` (containers need seeking), hashed on
 * the way (whole, and each declared part) when a sha256 is expected, so that the check costs no
 * second read.
 */
const localSource = (
  input: MediaInput,
  dir: string,
  name = "source",
): Effect.Effect<string, MediaRejectedError | StorageError> => {
  if ("path" in input) return Effect.succeed(input.path);
  const expected = input.expectedSha256;
  const hash = createHash("sha256");
  const parts = input.expectedPartSha256 && partHasher(input.expectedPartSha256);
  async function* hashed(source: AsyncIterable<Uint8Array>) {
    for await (const chunk of source) {
      if (expected !== undefined) hash.update(chunk);
      parts?.update(chunk);
      yield chunk;
    }
    parts?.end();
  }
  const copied = Effect.flatMap(input.open(), (stream) =>
    Effect.tryPromise({
      try: async (signal) => {
        const path = join(dir, name);
        if (expected === undefined && !parts) await pipeline(stream, createWriteStream(path), { signal });
        else await pipeline(stream, hashed, createWriteStream(path), { signal });
        return path;
      },
      catch: (cause) =>
        cause instanceof PartDiffers
          ? rejected("checksum_mismatch", cause.message)
          : rejected("processing_error", `Could not copy ${name} to scratch space`, cause),
    }),
  ).pipe(
    Effect.filterOrFail(
      () => expected === undefined || hash.digest("hex") === expected,
      () => rejected("checksum_mismatch", "The source's sha256 differs from the one declared at upload"),
    ),
  );
  // The source's copy is a stage of the job's log; a chunk's is part of the join.
  return name === "source" ? copied.pipe(timedStage("fetch")) : copied;
};

/** A file body opened only when read, so a body the store never reads holds no descriptor. */
const fileBody = (path: string): ByteStream => ({
  [Symbol.asyncIterator]: () => createReadStream(path)[Symbol.asyncIterator](),
});

/**
 * A packaged track as one fragmented MP4 in `path`: its init segment and media segments joined
 * byte for byte, in order (what an fMP4 rendition is). Local files are read in place.
 */
const joinTrack = (
  track: PackagedTrack,
  path: string,
): Effect.Effect<void, MediaRejectedError | StorageError> =>
  Effect.gen(function* () {
    const out = createWriteStream(path);
    yield* Effect.forEach(
      [track.init, ...track.segments],
      (piece) =>
        Effect.flatMap("path" in piece ? Effect.succeed(fileBody(piece.path)) : piece.open(), (body) =>
          Effect.tryPromise({
            try: (signal) => pipeline(body, out, { signal, end: false }),
            catch: (cause) =>
              rejected("processing_error", "Could not copy a stored segment to scratch space", cause),
          }),
        ),
      { discard: true },
    ).pipe(Effect.onError(() => Effect.sync(() => out.destroy())));
    yield* Effect.tryPromise({
      try: () =>
        new Promise<void>((resolve, reject) => out.end((e?: Error | null) => (e ? reject(e) : resolve()))),
      catch: (cause) => rejected("processing_error", "Could not write a track to scratch space", cause),
    });
  });

const listFiles = async (root: string): Promise<string[]> => {
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => relative(root, join(entry.parentPath, entry.name)).split(sep).join("/"));
};

const byEmissionOrder = (a: string, b: string) =>
  rank(a) - rank(b) || a.localeCompare(b, "en", { numeric: true });

/**
 * One ffmpeg run: the video decoded once, split and scaled per rung, each encoded to its own MP4
 * (none with no rung: the audio alone). With `range`, that part of the source only: an accurate
 * seek (`-ss` before `-i` decodes from the keyframe before and drops what precedes the start),
 * the output's clock starting at 0 there, so keyframes fall every 2 s from the range's start.
 */
export const transcodeArgs = (options: {
  readonly source: string;
  readonly work: string;
  readonly planned: ReadonlyArray<PlannedRendition>;
  readonly audioBitrateKbps: number | null;
  readonly fps: number | null;
  readonly preset: string;
  readonly crf: number;
  readonly threads?: number | undefined;
  readonly maxDurationMs: number | undefined;
  readonly range?: SourceRange | undefined;
}): string[] => {
  const { planned, range } = options;
  const split = `[0:V:0]split=${planned.length}${planned.map((_, i) => `[s${i}]`).join("")}`;
  const scales = planned.map(({ width, height }, i) => `[s${i}]scale=${width}:${height},setsar=1[v${i}]`);
  // No natural keyframe may come before the forced ones: the GOP limit is twice their spacing.
  const gop = String(Math.ceil((options.fps ?? 30) * KEYFRAME_SECONDS * 2));
  const args = ["-hide_banner", "-nostdin", "-v", "error", "-y", "-protocol_whitelist", "file"];
  const startMs = range?.startMs ?? 0;
  const endMs = Math.min(
    range?.endMs ?? Number.POSITIVE_INFINITY,
    options.maxDurationMs ?? Number.POSITIVE_INFINITY,
  );
  if (startMs > 0) args.push("-ss", String(startMs / 1000));
  if (Number.isFinite(endMs)) args.push("-t", String((endMs - startMs) / 1000));
  args.push("-i", fileUrl(options.source));
  if (planned.length > 0) args.push("-filter_complex", [split, ...scales].join(";"));
  planned.forEach(({ rendition }, i) => {
    const kbps = rendition.videoBitrateKbps;
    args.push(
      ...["-map", `[v${i}]`, "-an", "-sn", "-dn", "-map_metadata", "-1"],
      ...["-c:v", "libx264", "-preset", options.preset, "-profile:v", "high", "-pix_fmt", "yuv420p"],
      ...(options.threads === undefined ? [] : ["-threads", String(options.threads)]),
      ...["-crf", String(options.crf), "-maxrate", `${kbps}k`, "-bufsize", `${kbps * 2}k`],
      ...["-g", gop, "-sc_threshold", "0", "-force_key_frames", `expr:gte(t,n_forced*${KEYFRAME_SECONDS})`],
      join(options.work, `${rendition.name}.mp4`),
    );
  });
  if (options.audioBitrateKbps !== null) {
    args.push(
      ...["-map", "0:a:0", "-vn", "-sn", "-dn", "-map_metadata", "-1"],
      ...["-c:a", "aac", "-b:a", `${options.audioBitrateKbps}k`, "-ac", "2", "-ar", "48000"],
      join(options.work, "audio.mp4"),
    );
  }
  return args;
};

/**
 * Shaka Packager: fMP4 (CMAF) segments, an HLS media playlist per stream, the master and a static
 * DASH manifest (SegmentTemplate with a SegmentTimeline) over the same segments. Renditions are
 * packaged a few at a time, so both manifests are merged with the stored ones as they come.
 * `encrypted`: raw-key Common Encryption (`cenc`, AES-CTR) of every stream, video and audio, with
 * the one key of `packagerKeys` (read from the environment, never the command line), every segment
 * encrypted, the first included (`--clear_lead 0`), and a CommonSystem PSSH box (key IDs only) in
 * each init segment and in the MPD's ContentProtection, from which a ClearKey player asks the
 * licence for the KID.
 */
export const packagerArgs = (
  planned: ReadonlyArray<PlannedRendition>,
  withAudio: boolean,
  tempDir: string,
  encrypted = false,
): string[] => {
  const stream = (input: string, kind: "video" | "audio", dir: string, extra = "") =>
    `in=${input},stream=${kind},init_segment=${dir}/init.mp4,segment_template=${dir}/$Number$.m4s,` +
    `playlist_name=${dir}/playlist.m3u8${extra}`;
  return [
    ...planned.map(({ rendition }) => stream(`../work/${rendition.name}.mp4`, "video", rendition.name)),
    ...(withAudio
      ? [stream("../work/audio.mp4", "audio", "audio", ",hls_group_id=audio,hls_name=audio")]
      : []),
    "--segment_duration",
    String(SEGMENT_SECONDS),
    "--hls_playlist_type",
    "VOD",
    "--hls_master_playlist_output",
    MASTER,
    "--mpd_output",
    DASH,
    "--generate_static_live_mpd",
    "--temp_dir",
    tempDir,
    // Threaded I/O gives every file the packager opens a cache, 32 MiB by default; on local
    // scratch files its allocation alone (page faults) cost 10 times the packaging, 0.36 s against
    // 0.03 s with 1 MiB for a 30 s 720p ladder, byte-identical output. Not 0 (no threaded I/O):
    // that path hung, one thread waiting forever, in 3 of 400 loaded runs (1 MiB: none of 1,200).
    "--io_cache_size",
    String(1024 * 1024),
    ...(encrypted
      ? [
          ...["--enable_raw_key_encryption", "--fromenv=keys"],
          ...["--protection_scheme", "cenc", "--protection_systems", "CommonSystem", "--clear_lead", "0"],
        ]
      : []),
    "--quiet",
  ];
};

const HEX16 = /^[0-9a-f]{32}$/;

/** The encryption with both values as 32 lower-case hex digits, or a rejection naming the bad one (not its value). */
const checkEncryption = (encryption: Encryption): Effect.Effect<Encryption, MediaRejectedError> => {
  const keyId = encryption.keyId.toLowerCase();
  const key = encryption.key.toLowerCase();
  if (!HEX16.test(keyId))
    return Effect.fail(rejected("processing_error", "encryption.keyId is not 16 bytes in hex"));
  if (!HEX16.test(key))
    return Effect.fail(rejected("processing_error", "encryption.key is not 16 bytes in hex"));
  return Effect.succeed({ keyId, key });
};

/** The packager's environment for `packagerArgs(..., true)`: one key, no DRM label, so every stream uses it. */
export const packagerKeys = (encryption: Encryption): Record<string, string> => ({
  [KEYS_ENV]: `label=:key_id=${encryption.keyId}:key=${encryption.key}`,
});

/**
 * The key declaration of a media playlist, for EME players with the ClearKey key system. Why this
 * form, as hls.js 1.7 reads it (src/loader/level-key.ts, src/controller/eme-controller.ts):
 * - KEYFORMAT "org.w3.clearkey" is its ClearKey format, mapped to the EME key system of that name;
 *   with it METHOD SAMPLE-AES-CTR (cenc) is supported. An "identity" key, which is all Shaka
 *   Packager writes for a raw key, is supported only with SAMPLE-AES (MPEG-TS): hls.js drops it and
 *   never opens a session.
 * - For ClearKey, hls.js takes the key ID from the first 16 bytes of a `data:` URI (decoded from
 *   base64 after `;base64,`), so the URI holds exactly the KID's 16 bytes in standard base64. The
 *   KID must be the real one: hls.js waits for that KID's status in the key session.
 * - hls.js makes no licence request from the playlist key alone (it has no init data); it makes it
 *   on the "encrypted" event of the init segment, handing the CDM that segment's CommonSystem PSSH
 *   (the KIDs), from which the CDM makes the W3C request `{"kids": [...]}` sent to the licence URL.
 * The KID is no secret: it is also in every init segment and in the MPD.
 */
export const clearKeyLine = (keyId: string): string =>
  `#EXT-X-KEY:METHOD=SAMPLE-AES-CTR,URI="data:text/plain;base64,${Buffer.from(keyId, "hex").toString("base64")}",` +
  `KEYFORMAT="org.w3.clearkey",KEYFORMATVERSIONS="1"`;

/**
 * A media playlist as Shaka Packager wrote it for a raw key, with its KEY line(s) replaced by
 * `clearKeyLine(keyId)`, placed before EXT-X-MAP so that it covers the init section too (RFC 8216
 * 4.3.2.4; hls.js then has the key before it appends the init segment, whose "encrypted" event
 * needs it). Shaka's identity line goes: under RFC 8216 an identity key's URI is the key itself,
 * which this one (the KID) is not. `undefined` when the playlist declares no SAMPLE-AES-CTR key with
 * this KID, that is when the packager did not encrypt as asked.
 */
export const signalClearKey = (playlist: string, keyId: string): string | undefined => {
  const kid = Buffer.from(keyId, "hex").toString("base64");
  const lines = playlist.split("\n");
  const keys = lines.filter((line) => line.startsWith("#EXT-X-KEY:"));
  const ours = (line: string) => line.includes("METHOD=SAMPLE-AES-CTR,") && line.includes(`;base64,${kid}"`);
  if (keys.length === 0 || !keys.every(ours)) return undefined;
  const rest = lines.filter((line) => !line.startsWith("#EXT-X-KEY:"));
  let at = rest.findIndex((line) => line.startsWith("#EXT-X-MAP:"));
  if (at < 0) at = rest.findIndex((line) => line.startsWith("#EXTINF:"));
  if (at < 0) return undefined;
  rest.splice(at, 0, clearKeyLine(keyId));
  return rest.join("\n");
};

const attribute = (line: string, name: string): string | undefined =>
  new RegExp(`[:,]${name}=("[^"]*"|[^,]*)`).exec(line)?.[1];

/**
 * A master playlist listing the variants of `previous` and of `fresh` (one of `fresh` replacing
 * one of the same URI), highest BANDWIDTH first, with the header and the audio renditions of
 * `previous` (those of `fresh` when there is none): renditions packaged by separate runs listed
 * as one ladder. Each variant is a STREAM-INF line and its URI; other lines are kept in place.
 */
export const mergeMasters = (previous: string | undefined, fresh: string): string => {
  const parse = (text: string) => {
    const lines = text.split("\n").filter((line) => line.trim() !== "");
    const head: string[] = [];
    const media: string[] = [];
    const variants: Array<{ readonly inf: string; readonly uri: string }> = [];
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!;
      if (line.startsWith("#EXT-X-STREAM-INF:")) {
        const uri = lines[i + 1];
        if (uri !== undefined && !uri.startsWith("#")) variants.push({ inf: line, uri });
        i++;
      } else if (line.startsWith("#EXT-X-MEDIA:")) media.push(line);
      else head.push(line);
    }
    return { head, media, variants };
  };
  const next = parse(fresh);
  const base = previous === undefined ? next : parse(previous);
  const byUri = new Map(base.variants.map((v) => [v.uri, v]));
  for (const v of next.variants) byUri.set(v.uri, v);
  const bandwidth = (v: { readonly inf: string }) => Number(attribute(v.inf, "BANDWIDTH") ?? 0);
  const variants = [...byUri.values()].sort((a, b) => bandwidth(b) - bandwidth(a));
  return [
    ...base.head,
    "",
    ...base.media,
    ...(base.media.length > 0 ? [""] : []),
    ...variants.flatMap((v) => [v.inf, v.uri]),
    "",
  ].join("\n");
};

/**
 * The MediaProcessor port on ffmpeg, ffprobe and Shaka Packager. Tools are found when the
 * processor is made (`resolveTools`), which throws when one is missing.
 */
export const ffmpegMediaProcessor = (config: FfmpegConfig = {}): MediaProcessor => {
  const tools = resolveTools(config);
  if (tools.warning !== undefined)
    (config.log ?? { warn: (_: unknown, message: string) => process.emitWarning(message) }).warn(
      { ffmpeg: tools.ffmpeg, ffprobe: tools.ffprobe },
      tools.warning,
    );
  const scratch = scratchSpace(config.scratchDir ?? tmpdir());
  const preset = config.x264Preset ?? "veryfast";
  const crf = config.crf ?? 23;
  const probeTimeoutMs = config.probeTimeoutMs ?? 60_000;
  // Asked of ffmpeg once per processor; a failed attempt is asked again next time.
  let codecs: ReadonlySet<string> | undefined;
  const decodable = Effect.suspend(() =>
    codecs !== undefined
      ? Effect.succeed(codecs)
      : runTool("ffmpeg", tools.ffmpeg, ["-hide_banner", "-codecs"], {
          captureStdout: true,
          timeoutMs: probeTimeoutMs,
        }).pipe(
          Effect.filterOrFail(
            (run) => run.exitCode === 0,
            (run) => rejected("processing_error", describeRun("ffmpeg -codecs", run)),
          ),
          Effect.map((run) => {
            codecs = readDecodableCodecs(run.stdout);
            return codecs;
          }),
        ),
  );
  const probeTools = { ffmpeg: tools.ffmpeg, ffprobe: tools.ffprobe, timeoutMs: probeTimeoutMs, decodable };

  const tool = (
    name: string,
    command: string,
    args: ReadonlyArray<string>,
    options: {
      readonly cwd?: string;
      readonly env?: Record<string, string>;
      readonly timeoutMs?: number;
    } = {},
  ) =>
    Effect.flatMap(runTool(name, command, args, options), (run) =>
      run.exitCode === 0 ? Effect.void : Effect.fail(rejected("processing_error", describeRun(name, run))),
    );

  const poster = (
    source: string,
    out: string,
    size: { readonly width: number; readonly height: number },
    durationMs: number | null,
  ) => {
    const grab = (atSeconds: number) =>
      tool(
        "ffmpeg",
        tools.ffmpeg,
        [
          ...["-hide_banner", "-nostdin", "-v", "error", "-y", "-protocol_whitelist", "file"],
          ...["-ss", atSeconds.toFixed(3), "-i", fileUrl(source), "-map", "0:V:0", "-frames:v", "1"],
          ...[
            "-vf",
            `scale=${size.width}:${size.height},setsar=1`,
            "-q:v",
            "3",
            "-f",
            "image2",
            "-update",
            "1",
          ],
          join(out, POSTER),
        ],
        { timeoutMs: probeTimeoutMs },
      );
    const exists = Effect.promise(() =>
      stat(join(out, POSTER)).then(
        () => true,
        () => false,
      ),
    );
    // A seek past the last frame writes nothing; the first frame will do then.
    return grab(durationMs === null ? 1 : durationMs / 10000).pipe(
      Effect.zipRight(exists),
      Effect.flatMap((made) => (made ? Effect.void : grab(0))),
    );
  };

  /**
   * The master as stored: this run's merged with the one already listed (`mergeMasters`). Shaka
   * marks a lone audio rendition DEFAULT=NO unless told its language, which we do not know.
   */
  const writeMaster = (out: string, previous: string | undefined) =>
    Effect.promise(async () => {
      const path = join(out, MASTER);
      const text = await readFile(path, "utf8");
      const fresh = text.replace(/^(#EXT-X-MEDIA:TYPE=AUDIO,.*?)DEFAULT=NO/m, "$1DEFAULT=YES");
      await writeFile(path, mergeMasters(previous, fresh));
    });

  /** The DASH manifest as stored: this run's merged with the one already listed (`mergeManifests`). */
  const writeManifest = (out: string, previous: string | undefined) =>
    Effect.tryPromise({
      try: async () => {
        const path = join(out, DASH);
        await writeFile(path, mergeManifests(previous, await readFile(path, "utf8")));
      },
      catch: (cause) => rejected("processing_error", "Could not merge the DASH manifest", cause),
    });

  /** Every media playlist declares the key for ClearKey players (`signalClearKey`). */
  const signalKey = (out: string, paths: ReadonlyArray<string>, keyId: string) =>
    Effect.forEach(
      paths.filter((p) => p.endsWith(".m3u8") && p !== MASTER),
      (file) =>
        Effect.flatMap(
          Effect.promise(() => readFile(join(out, file), "utf8")),
          (text) => {
            const signalled = signalClearKey(text, keyId);
            return signalled === undefined
              ? Effect.fail(
                  rejected("processing_error", `The packager left ${file} without the content key's KID`),
                )
              : Effect.promise(() => writeFile(join(out, file), signalled));
          },
        ),
      { discard: true },
    );

  /**
   * What `package` and `packageChunks` share: `work` leaves each rung's video and the audio in the
   * work directory (`{name}.mp4`, `audio.mp4`); the poster is made meanwhile, then the packager,
   * the master's merge and the emission run alike.
   */
  const packageWith = (
    input: MediaInput,
    source: ProbedSource,
    ladder: ReadonlyArray<Rendition>,
    emit: (file: OutputFile) => Effect.Effect<void, StorageError>,
    options: PackageOptions,
    work: (made: {
      readonly source: string;
      readonly dir: string;
      readonly work: string;
      readonly planned: ReadonlyArray<PlannedRendition>;
      readonly audioBitrateKbps: number | null;
    }) => Effect.Effect<void, MediaRejectedError | StorageError>,
  ) => {
    const shared = options.shared ?? true;
    const run = scratch((dir) =>
      Effect.gen(function* () {
        const encryption =
          options.encryption === undefined ? undefined : yield* checkEncryption(options.encryption);
        if (source.source_width === null || source.source_height === null || !source.has_video) {
          return yield* rejected("invalid_media", "The source has no video picture size");
        }
        const sourceSize = { width: source.source_width, height: source.source_height };
        const planned = planRenditions(ladder, sourceSize);
        const top = planned[0]!;
        const workDir = join(dir, "work");
        const out = join(dir, "out");
        const temp = join(dir, "tmp");
        yield* Effect.promise(() => Promise.all([workDir, out, temp].map((d) => mkdir(d))));
        const path = yield* localSource(input, dir);
        // Audio is encoded and packaged by every run, so that the master's variants name its
        // codec and bandwidth; only a `shared` run emits it.
        const audioBitrateKbps = source.has_audio ? top.rendition.audioBitrateKbps : null;
        const encode = work({ source: path, dir, work: workDir, planned, audioBitrateKbps });
        const renditions = planned.map((p) => p.rendition.name);
        const packager = tool(
          "packager",
          tools.packager,
          packagerArgs(planned, source.has_audio, temp, encryption !== undefined),
          {
            cwd: out,
            timeoutMs: config.packagerTimeoutMs ?? 60_000 + (source.source_duration_ms ?? 0) / 10,
            ...(encryption === undefined ? {} : { env: packagerKeys(encryption) }),
          },
        ).pipe(timedStage("package", { renditions }));
        const posterSize = planRenditions(
          [{ ...top.rendition, name: "poster", height: Math.min(POSTER_MAX_HEIGHT, sourceSize.height) }],
          sourceSize,
        )[0]!;
        // The poster needs only the source: made while ffmpeg encodes, it adds nothing after.
        yield* Effect.all(
          [
            Effect.zipRight(encode, packager),
            shared
              ? poster(path, out, posterSize, source.source_duration_ms).pipe(timedStage("poster"))
              : Effect.void,
          ],
          { concurrency: 2, discard: true },
        );
        yield* writeMaster(out, options.master);
        yield* writeManifest(out, options.manifest);
        const made = (yield* Effect.promise(() => listFiles(out))).sort(byEmissionOrder);
        const paths = shared ? made : made.filter((p) => !p.startsWith("audio/"));
        const expected = [
          MASTER,
          DASH,
          ...(shared ? [POSTER] : []),
          ...planned.map((p) => `${p.rendition.name}/playlist.m3u8`),
        ];
        const missing = expected.filter((p) => !paths.includes(p));
        if (missing.length > 0) {
          return yield* rejected("processing_error", `Packaging left out ${missing.join(", ")}`);
        }
        if (encryption !== undefined) yield* signalKey(out, paths, encryption.keyId);
        const files = yield* Effect.forEach(paths, (file) =>
          Effect.promise(() => stat(join(out, file))).pipe(
            Effect.map((s) => ({ path: file, contentType: contentType(file), size: s.size })),
          ),
        );
        // Each rank is emitted whole before the next, so no playlist is visible before what it lists.
        yield* Effect.forEach(
          [0, 1, 2, 3],
          (r) =>
            Effect.forEach(
              files.filter((f) => rank(f.path) === r),
              (f) => emit({ path: f.path, contentType: f.contentType, body: fileBody(join(out, f.path)) }),
              { concurrency: 4, discard: true },
            ),
          { discard: true },
        ).pipe(
          timedStage("upload", {
            renditions,
            files: files.length,
            bytes: files.reduce((sum, f) => sum + f.size, 0),
          }),
        );
        return {
          files,
          master: MASTER,
          manifest: DASH,
          poster: shared ? POSTER : undefined,
          renditions: planned.map((p) => p.rendition) as ReadonlyArray<Rendition>,
        } satisfies PackagedOutput;
      }),
    );
    return config.packageTimeoutMs === undefined
      ? run
      : run.pipe(
          Effect.timeoutFail({
            duration: config.packageTimeoutMs,
            onTimeout: () =>
              rejected("processing_error", `Packaging ran longer than ${config.packageTimeoutMs} ms`),
          }),
        );
  };

  /** The transcoding of `package` or of `encodeChunk`: one ffmpeg run over (a range of) the source. */
  const transcode = (
    made: {
      readonly source: string;
      readonly work: string;
      readonly planned: ReadonlyArray<PlannedRendition>;
      readonly audioBitrateKbps: number | null;
    },
    fps: number | null,
    range?: SourceRange,
  ) =>
    tool(
      "ffmpeg",
      tools.ffmpeg,
      transcodeArgs({
        ...made,
        fps,
        preset,
        crf,
        threads: config.x264Threads,
        maxDurationMs: config.maxDurationMs,
        range,
      }),
    );

  /** Each rung's chunks joined into its `{name}.mp4`, without re-encoding (concat demuxer). */
  const joinChunks = (
    dir: string,
    work: string,
    planned: ReadonlyArray<PlannedRendition>,
    chunks: { readonly count: number; readonly chunk: (rendition: string, index: number) => MediaInput },
  ) =>
    Effect.forEach(
      planned,
      ({ rendition }) =>
        Effect.gen(function* () {
          const paths = yield* Effect.forEach(
            Array.from({ length: chunks.count }, (_, i) => i),
            (i) => localSource(chunks.chunk(rendition.name, i), dir, `${rendition.name}-${i}.mp4`),
            { concurrency: 4 },
          );
          const list = join(dir, `${rendition.name}.txt`);
          // The concat demuxer's own quoting: a quote inside is closed, escaped and reopened.
          const quoted = (path: string) => `file '${path.replaceAll("'", "'\\''")}'`;
          yield* Effect.promise(() => writeFile(list, `${paths.map(quoted).join("\n")}\n`));
          yield* tool("ffmpeg", tools.ffmpeg, [
            ...["-hide_banner", "-nostdin", "-v", "error", "-y", "-protocol_whitelist", "file"],
            ...["-f", "concat", "-safe", "0", "-i", list, "-map", "0:v:0", "-c", "copy"],
            join(work, `${rendition.name}.mp4`),
          ]);
        }),
      { discard: true },
    );

  const processor: MediaProcessor = {
    probe: (input) =>
      scratch((dir) =>
        localSource(input, dir).pipe(
          Effect.catchTag("StorageError", (error) =>
            Effect.fail(rejected("processing_error", `Could not read the source: ${error.message}`, error)),
          ),
          Effect.flatMap((path) => probeFile(probeTools, path)),
        ),
      ),

    plan: (source, ladder) =>
      source.source_width === null || source.source_height === null || !source.has_video
        ? []
        : planRenditions(ladder, { width: source.source_width, height: source.source_height }),

    package: (input, source, ladder, emit, options = {}) =>
      packageWith(input, source, ladder, emit, options, (made) =>
        transcode(made, source.source_fps).pipe(
          timedStage("encode", { renditions: made.planned.map((p) => p.rendition.name) }),
        ),
      ),

    encodeChunk: (input, source, ladder, range, emit) =>
      scratch((dir) =>
        Effect.gen(function* () {
          if (source.source_width === null || source.source_height === null)
            return yield* rejected("invalid_media", "The source has no video picture size");
          const planned = planRenditions(ladder, {
            width: source.source_width,
            height: source.source_height,
          });
          const work = join(dir, "work");
          yield* Effect.promise(() => mkdir(work));
          const path = yield* localSource(input, dir);
          yield* transcode(
            { source: path, work, planned, audioBitrateKbps: null },
            source.source_fps,
            range,
          ).pipe(timedStage("encode", { renditions: planned.map((p) => p.rendition.name) }));
          yield* Effect.forEach(
            planned,
            ({ rendition }) => {
              const name = `${rendition.name}.mp4`;
              return emit({ path: name, contentType: "video/mp4", body: fileBody(join(work, name)) });
            },
            { discard: true },
          );
        }),
      ),

    remux: (tracks, file, emit) =>
      scratch((dir) =>
        Effect.gen(function* () {
          const given = [
            ...(tracks.video ? [{ kind: "v", track: tracks.video }] : []),
            ...(tracks.audio ? [{ kind: "a", track: tracks.audio }] : []),
          ];
          if (given.length === 0) return yield* rejected("processing_error", "No track to remux");
          const inputs = yield* Effect.forEach(
            given,
            ({ kind, track }) => {
              const path = join(dir, `${kind}.mp4`);
              return Effect.as(joinTrack(track, path), path);
            },
            { concurrency: 2 },
          );
          const out = join(dir, "out");
          // Stream copy: the packaged renditions' own samples, moov moved to the front.
          yield* tool("ffmpeg", tools.ffmpeg, [
            ...["-hide_banner", "-nostdin", "-v", "error", "-y"],
            ...inputs.flatMap((path) => ["-protocol_whitelist", "file", "-i", fileUrl(path)]),
            ...given.flatMap(({ kind }, i) => ["-map", `${i}:${kind}:0`]),
            ...["-c", "copy", "-movflags", "+faststart", "-map_metadata", "-1"],
            ...["-f", file.path.endsWith(".m4a") ? "ipod" : "mp4", out],
          ]);
          const { size } = yield* Effect.promise(() => stat(out));
          yield* emit({ path: file.path, contentType: file.contentType, body: fileBody(out) });
          return { size };
        }),
      ),

    // Audio is cheap beside video, and one encode of the whole has no priming gap at each join.
    packageChunks: (input, source, ladder, chunks, emit, options = {}) =>
      packageWith(
        input,
        source,
        ladder,
        emit,
        options,
        ({ source: path, dir, work, planned, audioBitrateKbps }) =>
          Effect.all(
            [
              joinChunks(dir, work, planned, chunks).pipe(
                timedStage("join", { renditions: planned.map((p) => p.rendition.name) }),
              ),
              audioBitrateKbps === null
                ? Effect.void
                : transcode({ source: path, work, planned: [], audioBitrateKbps }, source.source_fps).pipe(
                    timedStage("encode", { renditions: ["audio"] }),
                  ),
            ],
            { concurrency: 2, discard: true },
          ),
      ),
  };
  return processor;
};

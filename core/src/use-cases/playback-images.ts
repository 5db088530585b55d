import { Deferred, Effect, Exit, FiberId, Option } from "effect";
import type { VodConfig } from "../config.js";
import type { Asset, AssetRendition } from "../domain/asset.js";
import { originKey, renditionKey } from "../domain/object-keys.js";
import {
  Conflict,
  InternalError,
  InvalidRequest,
  NotFound,
  PlaybackUnavailable,
  RateLimited,
  type StorageError,
} from "../errors.js";
import type {
  AnimatedFormat,
  Box,
  FitMode,
  ImageMaker,
  ImageSource,
  OpenBytes,
  StillFormat,
  StoredMedia,
} from "../ports/image-maker.js";
import type { MediaRejected } from "../ports/media-processor.js";
import type { VodPorts } from "../tokens.js";
import { isRenditionFile, type RequestedRange, type StoredFile, storedFile } from "./playback-delivery.js";
import type { PlaybackClaims, VerifyPlaybackToken } from "./playback-sessions.js";
import { readText } from "./support.js";

/** DECISIONS "Images, downloads and text tracks": the limits of what may be asked. */
export const IMAGE_LIMITS = {
  maxSide: 1920,
  animatedMaxSeconds: 10,
  animatedMaxWidth: 640,
  animatedMaxFps: 30,
  animatedDefaultSeconds: 5,
  animatedDefaultWidth: 320,
  animatedDefaultFps: 15,
  storyboardMaxTiles: 100,
} as const;

/** A DRM asset's origin copied to scratch space for each image made: at most this large. */
const MAX_COPIED_ORIGIN_BYTES = 512 * 1024 * 1024;

/** Tiles of a storyboard: this wide (no wider than the source), ten to a row. */
const STORYBOARD_TILE_WIDTH = 160;
const STORYBOARD_COLUMNS = 10;
/**
 * The renditions have a keyframe every 2 s and a storyboard tile shows a keyframe: tiles closer
 * together would repeat pictures.
 */
const STORYBOARD_MIN_INTERVAL_SECONDS = 2;

export const IMAGE_MEDIA_TYPES = {
  jpg: "image/jpeg",
  png: "image/png",
  webp: "image/webp",
  gif: "image/gif",
  vtt: "text/vtt",
} as const;

export interface ThumbnailQuery {
  readonly time?: number | undefined;
  readonly width?: number | undefined;
  readonly height?: number | undefined;
  readonly fit_mode?: FitMode | undefined;
}
export interface AnimatedQuery {
  readonly start?: number | undefined;
  readonly end?: number | undefined;
  readonly width?: number | undefined;
  readonly fps?: number | undefined;
}

/** An image or storyboard file, as delivery answers it (`open` of playback delivery's shape). */
export type ImageFile = StoredFile;

type ImageError =
  | Conflict
  | InvalidRequest
  | NotFound
  | PlaybackUnavailable
  | RateLimited
  | StorageError
  | InternalError;

const field = (name: string, message: string) =>
  new InvalidRequest({ message: `${name}: ${message}`, details: { fields: [{ path: [name], message }] } });

const even = (n: number) => Math.max(2, Math.round(n / 2) * 2);
const seconds = (ms: number) => ms / 1000;
/** Times in keys and cues are whole milliseconds: `time=1.5` and `time=1.500` are one image. */
const millis = (s: number) => Math.round(s * 1000);

/** The picture of the asset (the source's size) and its length. */
interface Picture {
  readonly width: number;
  readonly height: number;
  readonly durationSeconds: number;
}

const pictureOf = (asset: Asset): Picture | undefined =>
  asset.source_width && asset.source_height && asset.source_duration_ms
    ? {
        width: asset.source_width,
        height: asset.source_height,
        durationSeconds: seconds(asset.source_duration_ms),
      }
    : undefined;

/**
 * The box a thumbnail is made in: the picture itself by default, no side larger than the source's
 * or 1920 (no upscaling); one side given, the other by the picture's aspect; both given, as asked,
 * with `fit` deciding how the picture goes in. `preserve` answers the picture's own shape inside
 * the box, so its box is shrunk to that shape here, and the key names the size really made.
 */
export const thumbnailBox = (
  picture: Box,
  query: ThumbnailQuery,
): { readonly box: Box; readonly fit: FitMode } | InvalidRequest => {
  const maxWidth = Math.min(picture.width, IMAGE_LIMITS.maxSide);
  const maxHeight = Math.min(picture.height, IMAGE_LIMITS.maxSide);
  if (query.width !== undefined && query.width > maxWidth)
    return field("width", `must be at most ${maxWidth} (the source's width, no upscaling)`);
  if (query.height !== undefined && query.height > maxHeight)
    return field("height", `must be at most ${maxHeight} (the source's height, no upscaling)`);
  const aspect = picture.width / picture.height;
  const fitInside = (w: number, h: number): Box =>
    w / h > aspect ? { width: even(h * aspect), height: h } : { width: w, height: even(w / aspect) };
  const { width, height } = query;
  if (width === undefined && height === undefined)
    return { box: fitInside(maxWidth, maxHeight), fit: "preserve" };
  if (width === undefined || height === undefined) {
    const w = width ?? even((height as number) * aspect);
    const h = height ?? even((width as number) / aspect);
    return { box: { width: Math.min(w, maxWidth), height: Math.min(h, maxHeight) }, fit: "preserve" };
  }
  const fit = query.fit_mode ?? "preserve";
  return fit === "preserve" ? { box: fitInside(width, height), fit } : { box: { width, height }, fit };
};

/** A segment of a media playlist: where its object is and the span of asset time it holds. */
interface Segment {
  readonly path: string;
  readonly start: number;
  readonly end: number;
}

/**
 * The init segment and media segments of a media playlist as the packager wrote it (relative
 * URIs, `#EXTINF` durations), paths relative to the asset's renditions prefix. A URI that could
 * not be one of the asset's files is skipped rather than read as a key.
 */
export const readMediaPlaylist = (
  dir: string,
  text: string,
): { readonly init: string; readonly segments: ReadonlyArray<Segment> } | undefined => {
  let init: string | undefined;
  const segments: Segment[] = [];
  let at = 0;
  let duration: number | undefined;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line.startsWith("#EXT-X-MAP:")) {
      const uri = /URI="([^"]+)"/.exec(line)?.[1];
      if (uri && isRenditionFile(`${dir}/${uri}`)) init = `${dir}/${uri}`;
    } else if (line.startsWith("#EXTINF:")) {
      duration = Number.parseFloat(line.slice("#EXTINF:".length));
    } else if (line !== "" && !line.startsWith("#") && duration !== undefined) {
      const path = `${dir}/${line}`;
      if (Number.isFinite(duration) && isRenditionFile(path))
        segments.push({ path, start: at, end: at + duration });
      at += Number.isFinite(duration) ? duration : 0;
      duration = undefined;
    }
  }
  return init === undefined || segments.length === 0 ? undefined : { init, segments };
};

/** The WebVTT of a storyboard: one cue per tile, in order, covering the whole duration. */
export const storyboardVtt = (plan: StoryboardPlan, image: string): string => {
  const stamp = (s: number) => {
    const ms = millis(s);
    const h = Math.floor(ms / 3_600_000);
    const m = Math.floor(ms / 60_000) % 60;
    const sec = Math.floor(ms / 1000) % 60;
    const pad = (n: number, w = 2) => String(n).padStart(w, "0");
    return `${pad(h)}:${pad(m)}:${pad(sec)}.${pad(ms % 1000, 3)}`;
  };
  const cues = Array.from({ length: plan.count }, (_, i) => {
    const start = i * plan.intervalSeconds;
    const end = i === plan.count - 1 ? plan.durationSeconds : (i + 1) * plan.intervalSeconds;
    const x = (i % plan.columns) * plan.tile.width;
    const y = Math.floor(i / plan.columns) * plan.tile.height;
    return `${stamp(start)} --> ${stamp(end)}\n${image}#xywh=${x},${y},${plan.tile.width},${plan.tile.height}`;
  });
  return `WEBVTT\n\n${cues.join("\n\n")}\n`;
};

export interface StoryboardPlan {
  readonly count: number;
  readonly intervalSeconds: number;
  readonly durationSeconds: number;
  readonly tile: Box;
  readonly columns: number;
}

/** A storyboard of at most 100 tiles, at least 2 s apart, covering the picture's duration. */
export const storyboardPlan = (picture: Picture): StoryboardPlan => {
  const duration = picture.durationSeconds;
  const intervalSeconds =
    millis(Math.max(STORYBOARD_MIN_INTERVAL_SECONDS, duration / IMAGE_LIMITS.storyboardMaxTiles)) / 1000;
  const count = Math.max(1, Math.min(IMAGE_LIMITS.storyboardMaxTiles, Math.ceil(duration / intervalSeconds)));
  const width = Math.min(even(STORYBOARD_TILE_WIDTH), even(picture.width));
  const tile = { width, height: even((width * picture.height) / picture.width) };
  return {
    count,
    intervalSeconds,
    durationSeconds: duration,
    tile,
    columns: Math.min(STORYBOARD_COLUMNS, count),
  };
};

/** What the maker is asked for, with the key its result is stored under. */
type Job =
  | {
      readonly kind: "thumbnail";
      readonly at: number;
      readonly box: Box;
      readonly fit: FitMode;
      readonly format: StillFormat;
    }
  | {
      readonly kind: "animated";
      readonly start: number;
      readonly end: number;
      readonly box: Box;
      readonly fps: number;
      readonly format: AnimatedFormat;
    }
  | { readonly kind: "storyboard"; readonly plan: StoryboardPlan; readonly format: StillFormat };

/**
 * The object name of a job's result: every parameter that changes the picture, normalised
 * (milliseconds, the size really made), so that equal requests share one stored image.
 */
const imageName = (job: Job): string => {
  switch (job.kind) {
    case "thumbnail":
      return `images/thumbnail-${millis(job.at)}-${job.box.width}x${job.box.height}-${job.fit}.${job.format}`;
    case "animated":
      return `images/animated-${millis(job.start)}-${millis(job.end)}-${job.box.width}x${job.box.height}-${job.fps}.${job.format}`;
    case "storyboard":
      return `images/storyboard-${job.plan.count}-${millis(job.plan.intervalSeconds)}-${job.plan.tile.width}x${job.plan.tile.height}.${job.format}`;
  }
};

/**
 * Images of a session's asset, made on first request and kept in the object store under the
 * asset's renditions (deleted with them), so a second request for the same image decodes
 * nothing. Each node makes at most `images.concurrency` at once; up to `images.maxWaiting` more
 * wait their turn, and past that a request is refused as rate limited, to retry shortly (the burst is the
 * client's to spread, and playback's own files are never behind it). Identical requests made
 * while one is being made wait for that one instead of making their own.
 */
export const makePlaybackImages = (ports: VodPorts, config: VodConfig, verify: VerifyPlaybackToken) => {
  const { clock, objectStore: store, storage } = ports;
  const { concurrency, maxWaiting } = config.images;
  const permits = Effect.unsafeMakeSemaphore(concurrency);
  let waiting = 0;
  const inFlight = new Map<string, Deferred.Deferred<void, ImageError>>();

  const readyAsset = (claims: PlaybackClaims) =>
    Effect.flatMap(storage.assets.get(claims.tenantId, claims.assetId), (found) =>
      Option.isSome(found) && found.value.status === "ready"
        ? Effect.succeed(found.value)
        : Effect.fail(new NotFound({ message: "no such file" })),
    );

  // The source's size and duration never change once an asset is ready, and a deleted asset's
  // tokens are revoked: kept per asset, so that an image already stored is answered without
  // reading the asset. Bounded: cleared when it grows past the cap.
  const pictures = new Map<string, Picture>();
  const PICTURES_CAP = 10_000;

  /** The asset's picture, from what is kept or from the asset. */
  const pictureFor = (claims: PlaybackClaims) => {
    const kept = pictures.get(claims.assetId);
    if (kept) return Effect.succeed(kept);
    return Effect.flatMap(readyAsset(claims), (asset) => {
      const picture = pictureOf(asset);
      if (!picture)
        return Effect.fail(new NotFound({ message: "the asset has no picture to make images of" }));
      if (pictures.size >= PICTURES_CAP) pictures.clear();
      pictures.set(claims.assetId, picture);
      return Effect.succeed(picture);
    });
  };

  /** Answers the stored image the way every playback file is: whole, by range, or a redirect. */
  const deliver = (key: string, claims: PlaybackClaims, contentType: string, range?: RequestedRange) =>
    storedFile(ports, key, { contentType, expiresAt: claims.expiresAt, range });

  /** The stored rendition an image of `width` x `height` is made from: the smallest as large, else the largest. */
  const renditionFor = (asset: Asset, want: Box): AssetRendition | undefined => {
    const ready = asset.renditions.filter((r) => r.status === "ready").sort((a, b) => a.height - b.height);
    return ready.find((r) => r.width >= want.width && r.height >= want.height) ?? ready[ready.length - 1];
  };

  const opener =
    (key: string): OpenBytes =>
    () =>
      store.get(key);
  /** A stored object as the maker reads it: in place where the store has local files, else fetched. */
  const stored = (key: string): StoredMedia =>
    store.localPath ? { path: store.localPath(key) } : { open: opener(key) };

  /**
   * Where the maker reads: for a clear asset, the init segment and the media segments of the
   * rendition that cover `from` to `to` (only those are fetched); for a DRM asset, whose segments
   * are encrypted, the origin (docs/decisions.md: its content key never reaches a tool's command
   * line), read in place, by a signed URL, or copied.
   */
  const sourceFor = (asset: Asset, want: Box, from: number, to: number) =>
    Effect.gen(function* () {
      if (asset.drm_enabled) {
        const key = originKey(asset.tenant_id, asset.id);
        if (store.localPath) return { kind: "path", path: store.localPath(key) } satisfies ImageSource;
        if (store.deliveryUrl)
          return {
            kind: "url",
            url: yield* store.deliveryUrl(key, clock.now() + 600_000),
          } satisfies ImageSource;
        // Copied whole for each image made: refused past a size where that costs more than the
        // image is worth (a bucket in redirect delivery, or the filesystem, reads it in place).
        const origin = yield* store.head(key);
        if (Option.isSome(origin) && origin.value.size > MAX_COPIED_ORIGIN_BYTES)
          return yield* Effect.fail(
            new Conflict({
              message: "images of this protected asset cannot be made where its origin would be copied whole",
              details: { reason: "origin_too_large_to_copy" },
            }),
          );
        return { kind: "bytes", open: opener(key) } satisfies ImageSource;
      }
      const rendition = renditionFor(asset, want);
      if (rendition === undefined) return yield* Effect.fail(new NotFound({ message: "no such file" }));
      const playlistKey = renditionKey(asset.tenant_id, asset.id, `${rendition.name}/playlist.m3u8`);
      const text = yield* Effect.flatMap(
        Effect.catchTag(store.get(playlistKey), "NotFound", () =>
          Effect.fail(new InternalError({ message: `rendition ${rendition.name} has no playlist` })),
        ),
        readText,
      );
      const playlist = readMediaPlaylist(rendition.name, text);
      if (playlist === undefined)
        return yield* Effect.fail(
          new InternalError({ message: `rendition ${rendition.name} lists no segments` }),
        );
      const all = playlist.segments;
      // A time the source's duration allows but the playlist's rounding does not: its last segment.
      const last = all[all.length - 1] as Segment;
      const covering = all.filter((s) => s.end > from && s.start <= to);
      const segments = covering.length > 0 ? covering : [last];
      return {
        kind: "segments",
        init: stored(renditionKey(asset.tenant_id, asset.id, playlist.init)),
        segments: segments.map((s) => stored(renditionKey(asset.tenant_id, asset.id, s.path))),
      } satisfies ImageSource;
    });

  const makerOrFail = (): Effect.Effect<ImageMaker, PlaybackUnavailable> =>
    ports.imageMaker
      ? Effect.succeed(ports.imageMaker)
      : Effect.fail(new PlaybackUnavailable({ message: "images are not configured on this node" }));

  /** Runs `job` for the claims' asset and stores the result at `key`. */
  const make = (claims: PlaybackClaims, job: Job, key: string): Effect.Effect<void, ImageError> =>
    Effect.gen(function* () {
      const maker = yield* makerOrFail();
      const asset = yield* readyAsset(claims);
      const begun = clock.now();
      const want = job.kind === "storyboard" ? job.plan.tile : job.box;
      const [from, to] =
        job.kind === "thumbnail"
          ? [job.at, job.at]
          : job.kind === "animated"
            ? [job.start, job.end]
            : [0, job.plan.durationSeconds];
      const source = yield* sourceFor(asset, want, from, to);
      const bytes = yield* (
        job.kind === "thumbnail"
          ? maker.frame(source, { atSeconds: job.at, box: job.box, fit: job.fit, format: job.format })
          : job.kind === "animated"
            ? maker.animated(source, {
                startSeconds: job.start,
                endSeconds: job.end,
                box: job.box,
                fps: job.fps,
                format: job.format,
              })
            : maker.sprite(source, {
                count: job.plan.count,
                intervalSeconds: job.plan.intervalSeconds,
                tile: job.plan.tile,
                columns: job.plan.columns,
                format: job.format,
              })
      ).pipe(
        Effect.catchTag("MediaRejected", (rejected: MediaRejected) =>
          Effect.fail(new InternalError({ message: `could not make the ${job.kind}`, cause: rejected })),
        ),
      );
      yield* store.put(key, bytes, IMAGE_MEDIA_TYPES[job.format]);
      ports.metrics?.imageMade(job.kind, seconds(clock.now() - begun));
    });

  /** `make` under the node's bound: a permit, or a place among those waiting, or 429. */
  const bounded = (work: Effect.Effect<void, ImageError>): Effect.Effect<void, ImageError> =>
    Effect.suspend(() => {
      if (waiting >= maxWaiting + concurrency)
        return Effect.fail(
          new RateLimited({
            message: "this node is making as many images as it may; retry shortly",
            retryAfterSeconds: 1,
          }),
        );
      waiting++;
      return permits
        .withPermits(1)(work)
        .pipe(Effect.ensuring(Effect.sync(() => waiting--)));
    });

  /**
   * One making of `key` at a time: the first request starts it in a fiber of its own (a client
   * that goes away does not stop the image others wait for), the others await the same outcome.
   */
  const once = (key: string, work: Effect.Effect<void, ImageError>): Effect.Effect<void, ImageError> =>
    Effect.suspend(() => {
      const running = inFlight.get(key);
      if (running) return Deferred.await(running);
      const done = Deferred.unsafeMake<void, ImageError>(FiberId.none);
      inFlight.set(key, done);
      return Effect.zipRight(
        Effect.forkDaemon(
          bounded(work).pipe(
            Effect.exit,
            Effect.flatMap((exit) => {
              inFlight.delete(key);
              return Deferred.done(done, Exit.isSuccess(exit) ? Exit.void : exit);
            }),
          ),
        ),
        Deferred.await(done),
      );
    });

  /** The stored image of `job`, made first if it is not stored yet. */
  const image = (claims: PlaybackClaims, job: Job, range?: RequestedRange) =>
    Effect.gen(function* () {
      const key = renditionKey(claims.tenantId, claims.assetId, imageName(job));
      const contentType = IMAGE_MEDIA_TYPES[job.format];
      const stored = yield* deliver(key, claims, contentType, range);
      if (Option.isSome(stored)) return stored.value;
      yield* once(key, make(claims, job, key));
      const made = yield* deliver(key, claims, contentType, range);
      if (Option.isSome(made)) return made.value;
      return yield* Effect.fail(new InternalError({ message: "a made image was not found in the store" }));
    });

  const checkTime = (name: string, value: number, picture: Picture) =>
    value >= picture.durationSeconds
      ? Effect.fail(field(name, `must be before the end of the video (${picture.durationSeconds} s)`))
      : Effect.void;

  /** `thumbnail.{jpg|png|webp}`: the frame at `time` (default: the middle). */
  const thumbnail = (token: string, format: StillFormat, query: ThumbnailQuery, range?: RequestedRange) =>
    Effect.gen(function* () {
      const claims = yield* verify(token);
      const picture = yield* pictureFor(claims);
      const at = query.time ?? picture.durationSeconds / 2;
      yield* checkTime("time", at, picture);
      const sized = thumbnailBox(picture, query);
      if (sized instanceof InvalidRequest) return yield* Effect.fail(sized);
      return yield* image(claims, { kind: "thumbnail", at, box: sized.box, fit: sized.fit, format }, range);
    });

  /** `animated.{gif|webp}`: `start` to `end` (at most 10 s; default 0 to 5 s), `width` wide, at `fps`. */
  const animated = (token: string, format: AnimatedFormat, query: AnimatedQuery, range?: RequestedRange) =>
    Effect.gen(function* () {
      const claims = yield* verify(token);
      const picture = yield* pictureFor(claims);
      const start = query.start ?? 0;
      yield* checkTime("start", start, picture);
      const end = query.end ?? Math.min(start + IMAGE_LIMITS.animatedDefaultSeconds, picture.durationSeconds);
      if (query.end !== undefined && end > picture.durationSeconds)
        return yield* Effect.fail(
          field("end", `must be at most the video's duration (${picture.durationSeconds} s)`),
        );
      if (end <= start) return yield* Effect.fail(field("end", "must be after start"));
      if (end - start > IMAGE_LIMITS.animatedMaxSeconds)
        return yield* Effect.fail(
          field("end", `must be at most ${IMAGE_LIMITS.animatedMaxSeconds} s after start`),
        );
      const fps = query.fps ?? IMAGE_LIMITS.animatedDefaultFps;
      // At least one frame: a span shorter than a frame's time encodes nothing.
      if (end - start < 1 / fps)
        return yield* Effect.fail(
          field(
            query.end === undefined ? "start" : "end",
            `the clip must last at least one frame (${1 / fps} s at ${fps} fps)`,
          ),
        );
      const maxWidth = Math.min(picture.width, IMAGE_LIMITS.animatedMaxWidth);
      if (query.width !== undefined && query.width > maxWidth)
        return yield* Effect.fail(
          field("width", `must be at most ${maxWidth} (the source's width, no upscaling)`),
        );
      const width = even(query.width ?? Math.min(IMAGE_LIMITS.animatedDefaultWidth, maxWidth));
      const box = { width, height: even((width * picture.height) / picture.width) };
      return yield* image(claims, { kind: "animated", start, end, box, fps, format }, range);
    });

  /** `storyboard.{jpg|webp}`: the sprite sheet its VTT points into. */
  const storyboard = (token: string, format: StillFormat, range?: RequestedRange) =>
    Effect.gen(function* () {
      const claims = yield* verify(token);
      const picture = yield* pictureFor(claims);
      return yield* image(claims, { kind: "storyboard", plan: storyboardPlan(picture), format }, range);
    });

  /** `storyboard.vtt`: made from the asset's facts alone, no decoding. */
  const storyboardCues = (token: string, range?: RequestedRange) =>
    Effect.gen(function* () {
      const claims = yield* verify(token);
      const picture = yield* pictureFor(claims);
      const bytes = new TextEncoder().encode(storyboardVtt(storyboardPlan(picture), "storyboard.jpg"));
      const size = bytes.byteLength;
      const wanted = range?.(size);
      if (wanted === "unsatisfiable") return { kind: "unsatisfiable", size } satisfies ImageFile;
      const bounded = wanted ? { start: wanted.start, end: Math.min(wanted.end, size - 1) } : undefined;
      const part = bounded ? bytes.subarray(bounded.start, bounded.end + 1) : bytes;
      return {
        kind: "file",
        body: (async function* () {
          yield part;
        })(),
        size,
        range: bounded,
        contentType: IMAGE_MEDIA_TYPES.vtt,
        playlist: false,
        expiresAt: claims.expiresAt,
      } satisfies ImageFile;
    });

  return { thumbnail, animated, storyboard, storyboardCues };
};

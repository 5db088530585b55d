import { Effect, Either, Option } from "effect";
import type { VodConfig } from "../config.js";
import {
  type Asset,
  type AssetEvent,
  type FailureCode,
  hasPendingRenditions,
  type SourceMetadata,
  staticRenditionsDue,
  transitionAsset,
} from "../domain/asset.js";
import type { UploadId } from "../domain/ids.js";
import {
  chunkKey,
  chunksPrefix,
  originKey,
  renditionChunksPrefix,
  renditionKey,
  renditionsPrefix,
} from "../domain/object-keys.js";
import { StorageError } from "../errors.js";
import { type ChunkOfUnit, type Job, JobFailed } from "../ports/job-queue.js";
import {
  type MediaInput,
  MediaRejected,
  type PartChecksums,
  type PlannedRendition,
  type ProbedSource,
  type Rendition,
  type SourceRange,
} from "../ports/media-processor.js";
import { timedStage } from "../ports/processing-stages.js";
import type { AssetChunk } from "../ports/repositories.js";
import type { VodPorts } from "../tokens.js";
import { makeContentKeys } from "./content-keys.js";
import { readText } from "./support.js";
import { declaredPartSha256 } from "./uploads.js";
import { type EventData, eventRecorder } from "./webhooks.js";

/** The HLS ladder (DECISIONS: renditions at and below the source height, no upscaling). */
export const defaultLadder: ReadonlyArray<Rendition> = [
  { name: "1080p", height: 1080, videoBitrateKbps: 5000, audioBitrateKbps: 128 },
  { name: "720p", height: 720, videoBitrateKbps: 3000, audioBitrateKbps: 128 },
  { name: "480p", height: 480, videoBitrateKbps: 1400, audioBitrateKbps: 128 },
  { name: "360p", height: 360, videoBitrateKbps: 800, audioBitrateKbps: 128 },
  { name: "240p", height: 240, videoBitrateKbps: 400, audioBitrateKbps: 128 },
];

const sourceOf = (p: SourceMetadata): SourceMetadata => ({
  source_width: p.source_width,
  source_height: p.source_height,
  source_fps: p.source_fps,
  source_codec: p.source_codec,
  source_duration_ms: p.source_duration_ms,
  source_bitrate_kbps: p.source_bitrate_kbps,
});

/** The height the first rendition reaches when the source has it (DECISIONS "Time to playable"). */
export const FIRST_RENDITION_MIN_HEIGHT = 360;

/**
 * The rendition that makes the asset playable soonest at 360p or more (the source's height when
 * lower): the shortest of those at least that tall, or, when none is, the tallest there is.
 */
export const firstRendition = <R extends { readonly height: number }>(
  planned: ReadonlyArray<R>,
  sourceHeight: number,
): R | undefined => {
  const floor = Math.min(FIRST_RENDITION_MIN_HEIGHT, sourceHeight);
  const tall = planned.filter((r) => r.height >= floor);
  const pick = (better: (a: R, b: R) => boolean) =>
    (tall.length > 0 ? tall : planned).reduce<R | undefined>(
      (best, r) => (best === undefined || better(r, best) ? r : best),
      undefined,
    );
  return tall.length > 0 ? pick((a, b) => a.height < b.height) : pick((a, b) => a.height > b.height);
};

/**
 * The units of work, in order, for the renditions still pending: the first rendition alone while
 * the asset is not playable yet, then the rest together (one decode of the source for all of them).
 */
export const renditionUnits = (
  pending: ReadonlyArray<PlannedRendition>,
  first: PlannedRendition | undefined,
): ReadonlyArray<ReadonlyArray<PlannedRendition>> => {
  if (first === undefined || !pending.includes(first)) return pending.length > 0 ? [pending] : [];
  const rest = pending.filter((p) => p !== first);
  return rest.length > 0 ? [[first], rest] : [[first]];
};

/** The segment length of the packaged HLS: chunk boundaries fall on segment boundaries. */
export const SEGMENT_SECONDS = 6;

/**
 * The parts a source of `durationMs` is cut into, `chunkSeconds` each, the last one open to the
 * end; none (made in one job) when that is fewer than `minChunks` or the duration is unknown. A
 * remainder shorter than a segment joins the chunk before it: the duration is the container's
 * word, and a last chunk past the last frame would hold no picture.
 */
export const chunkRanges = (
  durationMs: number | null,
  chunkSeconds: number,
  minChunks: number,
): ReadonlyArray<SourceRange> | undefined => {
  if (durationMs === null || chunkSeconds <= 0) return undefined;
  const size = chunkSeconds * 1000;
  let count = Math.ceil(durationMs / size);
  if (count > 1 && durationMs - (count - 1) * size < SEGMENT_SECONDS * 1000) count--;
  if (count < Math.max(2, minChunks)) return undefined;
  return Array.from({ length: count }, (_, i) => ({
    startMs: i * size,
    endMs: i === count - 1 ? null : (i + 1) * size,
  }));
};

/** A unit of renditions as the chunk ledger names it. */
export const unitKey = (names: ReadonlyArray<string>): string => names.join(",");

/** A final verdict on the media (as opposed to trouble worth a retry). */
interface Verdict {
  readonly _tag: "Verdict";
  readonly failed: FailureCode;
  readonly reason: string;
  readonly source?: SourceMetadata;
}
const verdict = (failed: FailureCode, reason: string, source?: SourceMetadata): Verdict => ({
  _tag: "Verdict",
  failed,
  reason,
  ...(source ? { source } : {}),
});

const jobFailed = (message: string, cause?: unknown): JobFailed => new JobFailed({ message, cause });

/**
 * What a unit's error means for its job: a final verdict (the medium was rejected, or this was
 * the last attempt), or a retry while attempts are left. One rule for every processing job.
 */
const verdictOrRetry = (
  job: Pick<Job, "attempt" | "maxAttempts">,
  e: MediaRejected | StorageError | Verdict,
): Verdict | JobFailed => {
  if (e._tag === "Verdict") return e;
  if (e._tag === "MediaRejected" && e.code !== "processing_error") return verdict(e.code, e.message);
  return job.attempt >= job.maxAttempts ? verdict("processing_error", e.message) : jobFailed(e.message, e);
};

/** What a processing job did to its asset, for the worker to name in its log. */
export type ProcessingOutcome =
  | { readonly status: "ready" }
  /** Cut into chunks: encode-chunk jobs make the renditions. */
  | { readonly status: "chunked"; readonly chunks: number }
  | { readonly status: "failed"; readonly failure_code: FailureCode; readonly reason: string }
  /** Nothing to do: the asset is gone or already settled (a duplicate delivery). */
  | { readonly status: "skipped" };

/**
 * What a chunk job did: a chunk encoded, a packaging put off until the asset is playable, or as
 * above, `failed` meaning its unit's renditions (the asset's too when they were to make it playable).
 */
export type ChunkOutcome =
  | { readonly status: "encoded" }
  | { readonly status: "deferred" }
  | Exclude<ProcessingOutcome, { readonly status: "chunked" }>;

/** The first unit's chunks go before other chunks: what makes an asset playable comes first. */
const FIRST_UNIT_PRIORITY = 1;

/** How long a unit's packaging waits for the first rendition to be listed before it looks again. */
const DEFER_MS = 2_000;

export const makeProcessing = (
  ports: VodPorts,
  config: VodConfig,
  ladder: ReadonlyArray<Rendition> = defaultLadder,
) => {
  const { clock, storage, objectStore: store } = ports;
  const contentKeys = makeContentKeys(ports, config.drmMasterKey);

  const recordEvent = eventRecorder(ports);
  const eventOf = { processing: "asset.processing", ready: "asset.ready", failed: "asset.failed" } as const;

  /**
   * Moves the asset by `event` and records its webhook events in the same transaction: its status
   * event (processing and failed on every such event, ready when it became ready; a failure's code
   * and message with failed), each rendition made ready, and renditions_complete when the last
   * pending one settles. The event applies to the asset as stored, read under the tenant's lock:
   * a long source's chunk jobs save one asset at once, and none may undo another's move.
   */
  const save = (asset: Asset, event: AssetEvent, failure?: EventData["failure"]) =>
    storage.transaction((tx) =>
      Effect.gen(function* () {
        yield* tx.tenants.lock(asset.tenant_id);
        const stored = yield* tx.assets.get(asset.tenant_id, asset.id);
        // Deleted meanwhile: nothing is written.
        if (Option.isNone(stored)) return asset;
        const current = stored.value;
        const next = transitionAsset(current, event, clock.now());
        // An asset that moved on (a duplicate delivery finished first) is left as it is.
        if (Either.isLeft(next)) return current;
        const saved = next.right;
        const statusEvent =
          event.type === "processing_started" ||
          event.type === "processing_failed" ||
          (saved.status === "ready" && current.status !== "ready");
        yield* tx.assets.update(saved);
        if (statusEvent && saved.status in eventOf)
          yield* recordEvent(tx, saved.tenant_id, eventOf[saved.status as keyof typeof eventOf], {
            asset: saved,
            ...(saved.status === "failed" && failure ? { failure } : {}),
          });
        if (event.type === "rendition_ready") {
          const rendition = saved.renditions.find((r) => r.name === event.name);
          if (rendition)
            yield* recordEvent(tx, saved.tenant_id, "asset.rendition.ready", { asset: saved, rendition });
        }
        if (saved.status === "ready" && hasPendingRenditions(current) && !hasPendingRenditions(saved)) {
          yield* recordEvent(tx, saved.tenant_id, "asset.renditions_complete", { asset: saved });
          // The ladder is complete: the static renditions asked for are made from it.
          if (staticRenditionsDue(saved))
            yield* tx.jobs.enqueue("static-renditions", { tenant_id: saved.tenant_id, asset_id: saved.id });
        }
        return saved;
      }),
    );

  /** Marks every rendition still pending failed, on an asset that stays ready. */
  const failPending = (asset: Asset) =>
    Effect.reduce(
      asset.renditions.filter((r) => r.status === "pending"),
      asset,
      (current, r) => save(current, { type: "rendition_failed", name: r.name }),
    );

  /** A stored object as the processor reads it: in place when the store has local files. */
  const objectInput = (
    key: string,
    what: string,
    checks: {
      readonly expectedSha256?: string | undefined;
      readonly expectedPartSha256?: PartChecksums | undefined;
    } = {},
  ): MediaInput =>
    store.localPath
      ? { path: store.localPath(key) }
      : {
          open: () =>
            Effect.catchTag(store.get(key), "NotFound", () =>
              Effect.fail(new StorageError({ message: `${what} ${key} is missing` })),
            ),
          ...checks,
        };

  /**
   * The asset's source. A store with local files hashed the origin when the upload completed; one
   * read as a stream has its declared sha256 checked on the way into the processor's scratch space.
   */
  const sourceOfAsset = (asset: Asset, uploadId: UploadId | undefined) =>
    store.localPath
      ? Effect.succeed<MediaInput>(objectInput(originKey(asset.tenant_id, asset.id), "origin object"))
      : Effect.map(
          declaredPartSha256(storage, asset.tenant_id, uploadId),
          (parts): MediaInput =>
            objectInput(originKey(asset.tenant_id, asset.id), "origin object", {
              expectedSha256: asset.checksum_sha256 ?? undefined,
              expectedPartSha256: parts,
            }),
        );

  /** The master playlist a playable asset lists its renditions in. */
  const storedMaster = (asset: Asset) => {
    const masterKey = renditionKey(asset.tenant_id, asset.id, "master.m3u8");
    return Effect.flatMap(
      Effect.catchTag(store.get(masterKey), "NotFound", () =>
        Effect.fail(new StorageError({ message: `${masterKey} is missing from a playable asset` })),
      ),
      readText,
    );
  };

  /**
   * The DASH manifest a playable asset lists its renditions in; none for an asset packaged
   * before manifests were written again (its first runs wrote none), whose next run starts one.
   */
  const storedManifest = (asset: Asset): Effect.Effect<string | undefined, StorageError> =>
    Effect.flatMap(
      Effect.catchTag(store.get(renditionKey(asset.tenant_id, asset.id, "manifest.mpd")), "NotFound", () =>
        Effect.succeed(undefined),
      ),
      (stream) => (stream === undefined ? Effect.succeed(undefined) : readText(stream)),
    );

  /** DRM assets are packaged encrypted with their content key; no clear copy is ever stored. */
  const encryptionOf = (asset: Asset) =>
    asset.drm_enabled
      ? Effect.mapError(contentKeys.forPackaging(asset.tenant_id, asset.id), (e) =>
          e._tag === "InternalError" ? verdict("processing_error", e.message) : e,
        )
      : Effect.succeed(undefined);

  /**
   * A run bounded by `processing.maxRunMs`. Here rather than in the queue, whose own limit is a
   * backstop: an overrun then ends as any failure does, retried, or on the last attempt final.
   */
  const bounded = <A, E>(run: Effect.Effect<A, E>) =>
    Effect.timeoutFail(run, {
      duration: config.processing.maxRunMs,
      onTimeout: () =>
        new MediaRejected({
          code: "processing_error",
          message: `processing ran longer than ${config.processing.maxRunMs / 1000} s`,
        }),
    });

  /**
   * The processing job: probe, check and plan the renditions; make the first one (the asset is
   * ready then: playable), then the others, each listed by the master playlist once packaged.
   * Transient failures are retried by the queue, a retry making only the renditions still
   * pending; on the last attempt they become processing_error, of the asset when nothing is
   * playable yet, else of the renditions left. Safe to run twice (at least once delivery).
   */
  const processAsset = (job: Job<"process-asset">): Effect.Effect<ProcessingOutcome, JobFailed> =>
    Effect.gen(function* () {
      const { tenant_id, asset_id } = job.data;
      const found = yield* storage.assets.get(tenant_id, asset_id);
      if (
        Option.isNone(found) ||
        found.value.status === "failed" ||
        (found.value.status === "ready" && !hasPendingRenditions(found.value))
      )
        return { status: "skipped" } as const;
      const media = ports.mediaProcessor;
      if (!media) return yield* Effect.fail(jobFailed("this process has no media processor"));
      // Cut into chunks by an earlier run of this job: the chunk jobs make the renditions.
      const [chunk] = yield* storage.chunks.list(tenant_id, asset_id);
      if (chunk) return { status: "chunked", chunks: chunk.chunk_count } as const;
      let asset =
        found.value.status === "ready"
          ? found.value
          : yield* save(found.value, { type: "processing_started" });

      const input = yield* sourceOfAsset(asset, job.data.upload_id);
      let chunked: number | undefined;

      const result = yield* Effect.either(
        Effect.gen(function* () {
          const probed = yield* media.probe(input).pipe(timedStage("probe"));
          const source = sourceOf(probed);
          if (!probed.has_video) return yield* Effect.fail(verdict("invalid_media", "no video stream"));
          if ((probed.source_duration_ms ?? 0) > config.processing.maxSourceDurationMs)
            return yield* Effect.fail(verdict("source_too_long", "source is longer than allowed", source));
          const planned = media.plan(probed, ladder);
          if (planned.length === 0)
            return yield* Effect.fail(verdict("invalid_media", "no video picture size", source));
          asset = yield* save(asset, {
            type: "renditions_planned",
            source,
            renditions: planned.map((p) => ({
              name: p.rendition.name,
              width: p.width,
              height: p.height,
              bitrate_kbps: p.rendition.videoBitrateKbps,
            })),
          });
          // Until something is playable a run starts from a clean prefix: no segment of an
          // earlier run is mixed in. After that, what is listed stays and the rest is made again.
          if (!asset.renditions.some((r) => r.status === "ready"))
            yield* store.deletePrefix(renditionsPrefix(tenant_id, asset_id));
          const statusOf = (p: PlannedRendition) =>
            asset.renditions.find((r) => r.name === p.rendition.name)?.status;
          const pending = planned.filter((p) => statusOf(p) === "pending");
          const units = renditionUnits(pending, firstRendition(planned, probed.source_height ?? 0));
          // A long source not started yet goes to the chunk jobs, which any worker takes.
          const ranges =
            media.encodeChunk && media.packageChunks && asset.status !== "ready"
              ? chunkRanges(
                  probed.source_duration_ms,
                  config.processing.chunkSeconds,
                  config.processing.minChunks,
                )
              : undefined;
          if (ranges) {
            yield* startChunks(
              asset,
              units.map((unit) => unit.map((p) => p.rendition.name)),
              ranges,
              job.data.upload_id,
              probed.has_audio,
            );
            chunked = ranges.length;
            return source;
          }
          const encryption = yield* encryptionOf(asset);
          for (const unit of units) {
            // Deleted meanwhile: nothing more is made (the end of the run removes what was stored).
            if (Option.isNone(yield* storage.assets.get(tenant_id, asset_id))) return source;
            const playable = asset.status === "ready";
            const made = yield* Effect.either(
              Effect.gen(function* () {
                const master = playable ? yield* storedMaster(asset) : undefined;
                const manifest = playable ? yield* storedManifest(asset) : undefined;
                return yield* media.package(
                  input,
                  probed,
                  unit.map((p) => p.rendition),
                  (file) =>
                    store.put(renditionKey(tenant_id, asset_id, file.path), file.body, file.contentType),
                  {
                    ...(encryption ? { encryption } : {}),
                    shared: !playable,
                    ...(master === undefined ? {} : { master }),
                    ...(manifest === undefined ? {} : { manifest }),
                  },
                );
              }),
            );
            if (Either.isLeft(made)) {
              const e = made.left;
              // Nothing playable yet: the asset's own failure (below).
              if (!playable) return yield* Effect.fail(e);
              // A rendition added later: retried while attempts are left (the retry makes only
              // what is pending), then failed, the asset staying ready.
              const final =
                (e._tag === "MediaRejected" && e.code !== "processing_error") ||
                job.attempt >= job.maxAttempts;
              if (!final) return yield* Effect.fail(e);
              for (const p of unit)
                asset = yield* save(asset, { type: "rendition_failed", name: p.rendition.name });
              continue;
            }
            for (const p of unit)
              asset = yield* save(asset, { type: "rendition_ready", name: p.rendition.name });
          }
          return source;
        }).pipe(
          bounded,
          Effect.mapError((e) => verdictOrRetry(job, e)),
        ),
      );
      // Deleted while it ran: its job may have removed the renditions before the last of these
      // were stored. Every write of this run is done now, so removing them here leaves nothing.
      const now = yield* storage.assets.get(tenant_id, asset_id);
      if (Option.isNone(now)) {
        yield* store.deletePrefix(renditionsPrefix(tenant_id, asset_id));
        return { status: "skipped" } as const;
      }
      if (Either.isRight(result)) {
        if (chunked !== undefined) return { status: "chunked", chunks: chunked } as const;
        return { status: asset.status === "ready" ? "ready" : "skipped" } as const;
      }
      const outcome = result.left;
      if (outcome._tag === "JobFailed") return yield* Effect.fail(outcome);
      // Playable already: the asset stays ready, and what is left of its renditions failed.
      if (asset.status === "ready") {
        yield* failPending(asset);
        return { status: "ready" } as const;
      }
      const saved = yield* save(
        asset,
        {
          type: "processing_failed",
          failure_code: outcome.failed,
          ...(outcome.source ? { source: outcome.source } : {}),
        },
        { code: outcome.failed, message: outcome.reason },
      );
      return saved.status === "failed"
        ? ({ status: "failed", failure_code: outcome.failed, reason: outcome.reason } as const)
        : ({ status: "skipped" } as const);
    }).pipe(
      Effect.catchTag("StorageError", (e) => Effect.fail(jobFailed(e.message, e))),
      Effect.withSpan("processAsset"),
    );

  /**
   * Records the chunk ledger and enqueues every chunk's job, in one transaction: the first unit's
   * chunks at a higher priority, handed out before any asset's other chunks, so that assets are
   * playable soonest; then the rest's. A ledger there already (a duplicate delivery) is left as
   * it is, and nothing is enqueued.
   */
  const startChunks = (
    asset: Asset,
    units: ReadonlyArray<ReadonlyArray<string>>,
    ranges: ReadonlyArray<SourceRange>,
    uploadId: UploadId | undefined,
    hasAudio: boolean,
  ) => {
    const { tenant_id, id: asset_id } = asset;
    const ledger = units.flatMap((unit) =>
      ranges.map(
        (range, index): AssetChunk => ({
          tenant_id,
          asset_id,
          unit: unitKey(unit),
          chunk_index: index,
          chunk_count: ranges.length,
          start_ms: range.startMs,
          end_ms: range.endMs,
          done_at: null,
        }),
      ),
    );
    return storage.transaction((tx) =>
      Effect.gen(function* () {
        if (!(yield* tx.chunks.insertAll(ledger))) return;
        for (const [u, unit] of units.entries())
          for (const [index, range] of ranges.entries())
            yield* tx.jobs.enqueue(
              "encode-chunk",
              {
                tenant_id,
                asset_id,
                ...(uploadId === undefined ? {} : { upload_id: uploadId }),
                unit,
                count: ranges.length,
                has_audio: hasAudio,
                index,
                start_ms: range.startMs,
                end_ms: range.endMs,
              },
              // Jobs of one transaction are equally old: the first unit goes first by priority.
              { priority: u === 0 ? FIRST_UNIT_PRIORITY : 0 },
            );
      }),
    );
  };

  /** Whether some rendition of the unit is still to be made. */
  const unitPending = (asset: Asset, unit: ReadonlyArray<string>) =>
    unit.some((name) => asset.renditions.some((r) => r.name === name && r.status === "pending"));

  /** The asset of a chunk job while its unit is still to be made; none when gone or settled. */
  const unitAsset = (data: ChunkOfUnit) =>
    Effect.map(storage.assets.get(data.tenant_id, data.asset_id), (found) =>
      Option.filter(found, (asset) => asset.status !== "failed" && unitPending(asset, data.unit)),
    );

  /**
   * After a chunk job, the chunks no longer needed are removed: the unit's once it is settled
   * (packaged, or failed), the asset's once it failed or was deleted. A job still running then
   * may store its chunk after that removal, so each job looks again when it ends. A deleted
   * asset's renditions go too: a packaging run may have stored some after `delete-asset` ran.
   */
  const afterChunkJob = <A extends ChunkOutcome>(data: ChunkOfUnit, outcome: A) =>
    Effect.gen(function* () {
      const { tenant_id, asset_id } = data;
      const now = yield* storage.assets.get(tenant_id, asset_id);
      if (Option.isNone(now) || now.value.status === "failed")
        yield* store.deletePrefix(chunksPrefix(tenant_id, asset_id));
      else if (!unitPending(now.value, data.unit))
        yield* Effect.forEach(
          data.unit,
          (name) => store.deletePrefix(renditionChunksPrefix(tenant_id, asset_id, name)),
          { discard: true },
        );
      if (Option.isSome(now)) return outcome;
      yield* store.deletePrefix(renditionsPrefix(tenant_id, asset_id));
      return { status: "skipped" } as const;
    });

  /** Whether the unit holds the asset's first rendition, the one that makes it playable. */
  const makesPlayable = (asset: Asset, unit: ReadonlyArray<string>) => {
    const first = firstRendition(asset.renditions, asset.source_height ?? 0);
    return first !== undefined && unit.includes(first.name);
  };

  /**
   * A chunk job's unit could not be made. Transient trouble is retried while attempts are left;
   * then, as in `processAsset`, the asset fails when the unit was to make it playable, else the
   * unit's renditions fail: the asset is or will be ready with the others.
   */
  const unitFailed = (
    job: Job<"encode-chunk"> | Job<"package-chunks">,
    asset: Asset,
    e: MediaRejected | StorageError | Verdict,
  ): Effect.Effect<ChunkOutcome, JobFailed | StorageError> =>
    Effect.gen(function* () {
      const settled = verdictOrRetry(job, e);
      if (settled._tag === "JobFailed") return yield* Effect.fail(settled);
      const { failed: code, reason } = settled;
      if (asset.status === "ready" || !makesPlayable(asset, job.data.unit)) {
        let current = asset;
        for (const name of job.data.unit) current = yield* save(current, { type: "rendition_failed", name });
        return { status: "failed", failure_code: code, reason } as const;
      }
      const saved = yield* save(
        asset,
        { type: "processing_failed", failure_code: code },
        { code, message: reason },
      );
      return saved.status === "failed"
        ? ({ status: "failed", failure_code: code, reason } as const)
        : ({ status: "skipped" } as const);
    });

  /** The rungs of a unit, as the ladder has them. */
  const renditionsOf = (unit: ReadonlyArray<string>) => ladder.filter((r) => unit.includes(r.name));

  /**
   * One chunk of a unit: encoded into each of its renditions and stored under the chunks prefix.
   * The transaction that records the unit's last chunk done enqueues its packaging, so exactly
   * once. A chunk found done already (a duplicate delivery) is not made again.
   */
  const encodeChunk = (job: Job<"encode-chunk">): Effect.Effect<ChunkOutcome, JobFailed> =>
    Effect.gen(function* () {
      const { tenant_id, asset_id, unit, index, has_audio } = job.data;
      const found = yield* unitAsset(job.data);
      if (Option.isNone(found)) return yield* afterChunkJob(job.data, { status: "skipped" });
      const asset = found.value;
      const ledger = yield* storage.chunks.list(tenant_id, asset_id);
      const chunk = ledger.find((c) => c.unit === unitKey(unit) && c.chunk_index === index);
      if (chunk === undefined || chunk.done_at !== null) return { status: "skipped" } as const;
      const media = ports.mediaProcessor;
      if (!media?.encodeChunk) return yield* Effect.fail(jobFailed("this process cannot encode chunks"));
      const encode = media.encodeChunk;
      const made = yield* Effect.either(
        Effect.flatMap(sourceOfAsset(asset, job.data.upload_id), (input) =>
          encode(
            input,
            asset,
            renditionsOf(unit),
            { startMs: job.data.start_ms, endMs: job.data.end_ms },
            (file) =>
              store.put(
                chunkKey(tenant_id, asset_id, file.path.replace(/\.mp4$/, ""), index),
                file.body,
                file.contentType,
              ),
          ),
        ).pipe(bounded),
      );
      if (Either.isLeft(made))
        return yield* Effect.flatMap(unitFailed(job, asset, made.left), (o) => afterChunkJob(job.data, o));
      yield* storage.transaction((tx) =>
        Effect.gen(function* () {
          const { marked, left } = yield* tx.chunks.markDone(
            tenant_id,
            asset_id,
            unitKey(unit),
            index,
            clock.now(),
          );
          if (marked && left === 0)
            yield* tx.jobs.enqueue("package-chunks", {
              tenant_id,
              asset_id,
              ...(job.data.upload_id === undefined ? {} : { upload_id: job.data.upload_id }),
              unit,
              count: job.data.count,
              ...(has_audio === undefined ? {} : { has_audio }),
            });
        }),
      );
      return yield* afterChunkJob(job.data, { status: "encoded" } as const);
    }).pipe(
      Effect.catchTag("StorageError", (e) => Effect.fail(jobFailed(e.message, e))),
      Effect.withSpan("encodeChunk"),
    );

  /**
   * A unit's chunks joined and packaged as `processAsset` packages a unit: the first rendition
   * makes the asset ready; the others, whose chunks may be done first, wait until it is (the
   * master they are merged into is stored then) by a job of their own enqueued a little later.
   * The unit's chunks are removed once its renditions are listed (`afterChunkJob`).
   */
  const packageChunks = (job: Job<"package-chunks">): Effect.Effect<ChunkOutcome, JobFailed> =>
    Effect.gen(function* () {
      const { tenant_id, asset_id, unit, count } = job.data;
      const found = yield* unitAsset(job.data);
      if (Option.isNone(found)) return yield* afterChunkJob(job.data, { status: "skipped" });
      let asset = found.value;
      const playable = asset.status === "ready";
      if (!playable && !makesPlayable(asset, unit)) {
        yield* storage.jobs.enqueue("package-chunks", job.data, { delayMs: DEFER_MS });
        return { status: "deferred" } as const;
      }
      const media = ports.mediaProcessor;
      if (!media?.packageChunks) return yield* Effect.fail(jobFailed("this process cannot package chunks"));
      const join = media.packageChunks;
      const made = yield* Effect.either(
        Effect.gen(function* () {
          const input = yield* sourceOfAsset(asset, job.data.upload_id);
          // The source facts were stored when the chunks were planned; only has_audio rides along.
          const probed: ProbedSource =
            job.data.has_audio === undefined
              ? yield* media.probe(input).pipe(timedStage("probe"))
              : { ...sourceOf(asset), has_video: true, has_audio: job.data.has_audio };
          const encryption = yield* encryptionOf(asset);
          const master = playable ? yield* storedMaster(asset) : undefined;
          const manifest = playable ? yield* storedManifest(asset) : undefined;
          return yield* join(
            input,
            probed,
            renditionsOf(unit),
            {
              count,
              chunk: (rendition, index) =>
                objectInput(chunkKey(tenant_id, asset_id, rendition, index), "chunk object"),
            },
            (file) => store.put(renditionKey(tenant_id, asset_id, file.path), file.body, file.contentType),
            {
              ...(encryption ? { encryption } : {}),
              shared: !playable,
              ...(master === undefined ? {} : { master }),
              ...(manifest === undefined ? {} : { manifest }),
            },
          );
        }).pipe(bounded),
      );
      if (Either.isLeft(made))
        return yield* Effect.flatMap(unitFailed(job, asset, made.left), (o) => afterChunkJob(job.data, o));
      for (const name of unit) asset = yield* save(asset, { type: "rendition_ready", name });
      return yield* afterChunkJob(job.data, { status: "ready" } as const);
    }).pipe(
      Effect.catchTag("StorageError", (e) => Effect.fail(jobFailed(e.message, e))),
      Effect.withSpan("packageChunks"),
    );

  return { processAsset, encodeChunk, packageChunks };
};

export type Processing = ReturnType<typeof makeProcessing>;

import { Effect, Either, Option } from "effect";
import type { VodConfig } from "../config.js";
import {
  type Asset,
  type AssetEvent,
  type FailureCode,
  hasPendingRenditions,
  type SourceMetadata,
  transitionAsset,
} from "../domain/asset.js";
import { originKey, renditionKey, renditionsPrefix } from "../domain/object-keys.js";
import { StorageError } from "../errors.js";
import { type Job, JobFailed } from "../ports/job-queue.js";
import {
  type MediaInput,
  MediaRejected,
  type PlannedRendition,
  type ProbedSource,
  type Rendition,
} from "../ports/media-processor.js";
import type { VodPorts } from "../tokens.js";
import { makeContentKeys } from "./content-keys.js";
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

const sourceOf = (p: ProbedSource): SourceMetadata => ({
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

/** What a processing job did to its asset, for the worker to name in its log. */
export type ProcessingOutcome =
  | { readonly status: "ready" }
  | { readonly status: "failed"; readonly failure_code: FailureCode; readonly reason: string }
  /** Nothing to do: the asset is gone or already settled (a duplicate delivery). */
  | { readonly status: "skipped" };

const readText = (stream: AsyncIterable<Uint8Array>) =>
  Effect.tryPromise({
    try: async () => {
      const chunks: Uint8Array[] = [];
      for await (const chunk of stream) chunks.push(chunk);
      return Buffer.concat(chunks).toString("utf8");
    },
    catch: (cause) => new StorageError({ message: "could not read the master playlist", cause }),
  });

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
   * pending one settles.
   */
  const save = (asset: Asset, event: AssetEvent, failure?: EventData["failure"]) =>
    Effect.gen(function* () {
      const next = transitionAsset(asset, event, clock.now());
      // An asset that moved on (a duplicate delivery finished first) is left as it is.
      if (Either.isLeft(next)) return asset;
      const saved = next.right;
      const statusEvent =
        event.type === "processing_started" ||
        event.type === "processing_failed" ||
        (saved.status === "ready" && asset.status !== "ready");
      yield* storage.transaction((tx) =>
        Effect.gen(function* () {
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
          if (saved.status === "ready" && hasPendingRenditions(asset) && !hasPendingRenditions(saved))
            yield* recordEvent(tx, saved.tenant_id, "asset.renditions_complete", { asset: saved });
        }),
      );
      return saved;
    });

  /** Marks every rendition still pending failed, on an asset that stays ready. */
  const failPending = (asset: Asset) =>
    Effect.reduce(
      asset.renditions.filter((r) => r.status === "pending"),
      asset,
      (current, r) => save(current, { type: "rendition_failed", name: r.name }),
    );

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
      let asset =
        found.value.status === "ready"
          ? found.value
          : yield* save(found.value, { type: "processing_started" });

      const key = originKey(tenant_id, asset_id);
      // A store with local files hashed the origin when the upload completed; one read as a
      // stream has its declared sha256 checked on the way into the processor's scratch space.
      const input: MediaInput = store.localPath
        ? { path: store.localPath(key) }
        : {
            open: () =>
              Effect.catchTag(store.get(key), "NotFound", () =>
                Effect.fail(new StorageError({ message: `origin object ${key} is missing` })),
              ),
            expectedSha256: asset.checksum_sha256 ?? undefined,
            expectedPartSha256: yield* declaredPartSha256(storage, tenant_id, job.data.upload_id),
          };
      const masterKey = renditionKey(tenant_id, asset_id, "master.m3u8");
      const storedMaster = Effect.flatMap(
        Effect.catchTag(store.get(masterKey), "NotFound", () =>
          Effect.fail(new StorageError({ message: `${masterKey} is missing from a playable asset` })),
        ),
        readText,
      );

      const result = yield* Effect.either(
        Effect.gen(function* () {
          const probed = yield* media.probe(input);
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
          // DRM assets are packaged encrypted with their content key; no clear copy is ever stored.
          const encryption = asset.drm_enabled
            ? yield* Effect.mapError(contentKeys.forPackaging(tenant_id, asset_id), (e) =>
                e._tag === "InternalError" ? verdict("processing_error", e.message) : e,
              )
            : undefined;
          const statusOf = (p: PlannedRendition) =>
            asset.renditions.find((r) => r.name === p.rendition.name)?.status;
          const pending = planned.filter((p) => statusOf(p) === "pending");
          const units = renditionUnits(pending, firstRendition(planned, probed.source_height ?? 0));
          for (const unit of units) {
            // Deleted meanwhile: nothing more is made (the end of the run removes what was stored).
            if (Option.isNone(yield* storage.assets.get(tenant_id, asset_id))) return source;
            const playable = asset.status === "ready";
            const made = yield* Effect.either(
              Effect.gen(function* () {
                const master = playable ? yield* storedMaster : undefined;
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
          // Here rather than in the queue, whose own limit is a backstop: an overrun then ends as
          // any failure does, retried, or on the last attempt a failed asset, not one left processing.
          Effect.timeoutFail({
            duration: config.processing.maxRunMs,
            onTimeout: () =>
              new MediaRejected({
                code: "processing_error",
                message: `processing ran longer than ${config.processing.maxRunMs / 1000} s`,
              }),
          }),
          Effect.mapError((e: MediaRejected | StorageError | Verdict): Verdict | JobFailed => {
            if (e._tag === "Verdict") return e;
            if (e._tag === "MediaRejected" && e.code !== "processing_error")
              return verdict(e.code, e.message);
            // Transient trouble is retried; on the last attempt it is final.
            return job.attempt >= job.maxAttempts
              ? verdict("processing_error", e.message)
              : jobFailed(e.message, e);
          }),
        ),
      );
      // Deleted while it ran: its job may have removed the renditions before the last of these
      // were stored. Every write of this run is done now, so removing them here leaves nothing.
      const now = yield* storage.assets.get(tenant_id, asset_id);
      if (Option.isNone(now)) {
        yield* store.deletePrefix(renditionsPrefix(tenant_id, asset_id));
        return { status: "skipped" } as const;
      }
      if (Either.isRight(result)) return { status: asset.status === "ready" ? "ready" : "skipped" } as const;
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

  return { processAsset };
};

export type Processing = ReturnType<typeof makeProcessing>;

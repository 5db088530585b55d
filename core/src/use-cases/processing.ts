import { Effect, Either, Option } from "effect";
import type { VodConfig } from "../config.js";
import {
  type Asset,
  type AssetEvent,
  type FailureCode,
  type SourceMetadata,
  transitionAsset,
} from "../domain/asset.js";
import { originKey, renditionKey, renditionsPrefix } from "../domain/object-keys.js";
import { StorageError } from "../errors.js";
import type { Job, JobFailed } from "../ports/job-queue.js";
import type { MediaInput, MediaRejected, ProbedSource, Rendition } from "../ports/media-processor.js";
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

const jobFailed = (message: string, cause?: unknown): JobFailed => ({ _tag: "JobFailed", message, cause });

/** What a processing job did to its asset, for the worker to name in its log. */
export type ProcessingOutcome =
  | { readonly status: "ready" }
  | { readonly status: "failed"; readonly failure_code: FailureCode; readonly reason: string }
  /** Nothing to do: the asset is gone or already settled (a duplicate delivery). */
  | { readonly status: "skipped" };

export const makeProcessing = (
  ports: VodPorts,
  config: VodConfig,
  ladder: ReadonlyArray<Rendition> = defaultLadder,
) => {
  const { clock, storage, objectStore: store } = ports;
  const contentKeys = makeContentKeys(ports, config.drmMasterKey);

  const recordEvent = eventRecorder(ports);
  const eventOf = { processing: "asset.processing", ready: "asset.ready", failed: "asset.failed" } as const;

  const save = (asset: Asset, event: AssetEvent, failure?: EventData["failure"]) =>
    Effect.gen(function* () {
      const next = transitionAsset(asset, event, clock.now());
      // An asset that moved on (a duplicate delivery finished first) is left as it is.
      if (Either.isLeft(next)) return asset;
      const saved = next.right;
      yield* storage.transaction((tx) =>
        Effect.gen(function* () {
          yield* tx.assets.update(saved);
          if (saved.status in eventOf)
            yield* recordEvent(tx, saved.tenant_id, eventOf[saved.status as keyof typeof eventOf], {
              asset: saved,
              ...(saved.status === "failed" && failure ? { failure } : {}),
            });
        }),
      );
      return saved;
    });

  /**
   * The processing job: probe, check, transcode and package, store the renditions, and move the
   * asset to ready, or to failed with its failure_code. Transient failures are retried by the
   * queue; on the last attempt they become processing_error. Safe to run twice (at least once delivery).
   */
  const processAsset = (job: Job<"process-asset">): Effect.Effect<ProcessingOutcome, JobFailed> =>
    Effect.gen(function* () {
      const { tenant_id, asset_id } = job.data;
      const found = yield* storage.assets.get(tenant_id, asset_id);
      if (Option.isNone(found) || found.value.status === "ready" || found.value.status === "failed")
        return { status: "skipped" } as const;
      const media = ports.mediaProcessor;
      if (!media) return yield* Effect.fail(jobFailed("this process has no media processor"));
      const asset = yield* save(found.value, { type: "processing_started" });

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

      const result = yield* Effect.either(
        Effect.gen(function* () {
          const probed = yield* media.probe(input);
          const source = sourceOf(probed);
          if (!probed.has_video) return yield* Effect.fail(verdict("invalid_media", "no video stream"));
          if ((probed.source_duration_ms ?? 0) > config.processing.maxSourceDurationMs)
            return yield* Effect.fail(verdict("source_too_long", "source is longer than allowed", source));
          // A retried job starts from a clean prefix: no segment of an earlier run is mixed in.
          yield* store.deletePrefix(renditionsPrefix(tenant_id, asset_id));
          // DRM assets are packaged encrypted with their content key; no clear copy is ever stored.
          const encryption = asset.drm_enabled
            ? yield* Effect.mapError(contentKeys.forPackaging(tenant_id, asset_id), (e) =>
                e._tag === "InternalError" ? verdict("processing_error", e.message) : e,
              )
            : undefined;
          yield* media.package(
            input,
            probed,
            ladder,
            (file) => store.put(renditionKey(tenant_id, asset_id, file.path), file.body, file.contentType),
            encryption ? { encryption } : undefined,
          );
          return source;
        }).pipe(
          // Here rather than in the queue, whose own limit is a backstop: an overrun then ends as
          // any failure does, retried, or on the last attempt a failed asset, not one left processing.
          Effect.timeoutFail({
            duration: config.processing.maxRunMs,
            onTimeout: (): MediaRejected => ({
              _tag: "MediaRejected",
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
      if (Option.isNone(yield* storage.assets.get(tenant_id, asset_id))) {
        yield* store.deletePrefix(renditionsPrefix(tenant_id, asset_id));
        return { status: "skipped" } as const;
      }
      if (Either.isRight(result)) {
        const saved = yield* save(asset, { type: "processing_succeeded", source: result.right });
        return saved.status === "ready" ? ({ status: "ready" } as const) : ({ status: "skipped" } as const);
      }
      const outcome = result.left;
      if (outcome._tag === "JobFailed") return yield* Effect.fail(outcome);
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

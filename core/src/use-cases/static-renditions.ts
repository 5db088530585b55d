import { Effect, Either, Option } from "effect";
import {
  type Asset,
  type AssetRendition,
  type StaticRendition,
  type StaticRenditionName,
  staticRenditionsDue,
} from "../domain/asset.js";
import type { AssetId, TenantId } from "../domain/ids.js";
import { renditionKey, staticRenditionKey, staticRenditionsPrefix } from "../domain/object-keys.js";
import { NotFound, StorageError } from "../errors.js";
import { type Job, JobFailed } from "../ports/job-queue.js";
import type { MediaInput, MediaRejected, PackagedTrack } from "../ports/media-processor.js";
import type { ByteStream } from "../ports/object-store.js";
import type { VodPorts } from "../tokens.js";
import { type RequestedRange, storedFile } from "./playback-delivery.js";
import { readMediaPlaylist } from "./playback-images.js";
import type { VerifyPlaybackToken } from "./playback-sessions.js";
import { readText } from "./support.js";
import { eventRecorder } from "./webhooks.js";

/** The media type each static rendition is delivered with. */
export const STATIC_RENDITION_MEDIA_TYPES: Readonly<Record<StaticRenditionName, string>> = {
  "high.mp4": "video/mp4",
  "low.mp4": "video/mp4",
  "audio.m4a": "audio/mp4",
};

/** The tallest rendition high.mp4 is made from (DECISIONS: the best rendition up to 1080p). */
export const STATIC_HIGH_MAX_HEIGHT = 1080;

/**
 * The packaged renditions each video static rendition is made from: `high.mp4` the tallest ready
 * one up to 1080p (the shortest ready one when none is that low), `low.mp4` the shortest ready one.
 * Undefined when no rendition is ready.
 */
export const staticSources = (
  renditions: ReadonlyArray<AssetRendition>,
): { readonly high: AssetRendition; readonly low: AssetRendition } | undefined => {
  const ready = renditions.filter((r) => r.status === "ready").sort((a, b) => a.height - b.height);
  const low = ready[0];
  if (low === undefined) return undefined;
  const high = ready.filter((r) => r.height <= STATIC_HIGH_MAX_HEIGHT).pop() ?? low;
  return { high, low };
};

/** What the static renditions' job did, for the worker to name in its log. */
export type StaticRenditionsOutcome =
  | { readonly status: "ready" }
  | { readonly status: "failed"; readonly failure_code: "processing_error"; readonly reason: string }
  /** Nothing to make: the asset is gone, turned off (its files removed) or not complete yet. */
  | { readonly status: "skipped" };

const jobFailed = (message: string, cause?: unknown) => new JobFailed({ message, cause });

/**
 * Static renditions (DECISIONS "Images, downloads and text tracks"): the `static-renditions` job
 * that makes them from the packaged renditions, without re-encoding, once the ladder is complete,
 * and their delivery to a playback token.
 */
export const makeStaticRenditions = (ports: VodPorts) => {
  const { storage, objectStore: store } = ports;
  const recordEvent = eventRecorder(ports);

  /**
   * Writes the asset's list as `change` makes it from the stored one, under the tenant's lock (as
   * processing and PATCH write the asset), recording `asset.static_rendition.ready` for a name it
   * made ready. None when the asset is gone or no longer asks for static renditions.
   */
  const saveList = (
    asset: Asset,
    change: (list: ReadonlyArray<StaticRendition>) => ReadonlyArray<StaticRendition>,
    readied?: StaticRenditionName,
  ) =>
    storage.transaction((tx) =>
      Effect.gen(function* () {
        yield* tx.tenants.lock(asset.tenant_id);
        const stored = yield* tx.assets.get(asset.tenant_id, asset.id);
        if (Option.isNone(stored) || stored.value.mp4_support !== "standard") return Option.none<Asset>();
        const static_renditions = change(stored.value.static_renditions);
        const saved = yield* tx.assets.updateDetails(asset.tenant_id, asset.id, { static_renditions });
        if (Option.isNone(saved)) return saved;
        const made = readied && saved.value.static_renditions.find((r) => r.name === readied);
        if (made)
          yield* recordEvent(tx, asset.tenant_id, "asset.static_rendition.ready", {
            asset: saved.value,
            static_rendition: made,
          });
        return saved;
      }),
    );

  const settle =
    (name: StaticRenditionName, settled: StaticRendition) => (list: ReadonlyArray<StaticRendition>) =>
      list.map((r) => (r.name === name ? settled : r));

  /** A stored object as the processor reads it: in place when the store has local files. */
  const objectInput = (key: string): MediaInput =>
    store.localPath
      ? { path: store.localPath(key) }
      : {
          open: () =>
            Effect.catchTag(store.get(key), "NotFound", () =>
              Effect.fail(new StorageError({ message: `${key} is missing` })),
            ),
        };

  /** The packaged track under `dir` (a rendition's name, or `audio`); none when it has no playlist. */
  const trackOf = (asset: Asset, dir: string) =>
    Effect.gen(function* () {
      const key = renditionKey(asset.tenant_id, asset.id, `${dir}/playlist.m3u8`);
      const body = yield* store.get(key).pipe(
        Effect.map(Option.some),
        Effect.catchTag("NotFound", () => Effect.succeed(Option.none<ByteStream>())),
      );
      if (Option.isNone(body)) return undefined;
      const playlist = readMediaPlaylist(dir, yield* readText(body.value));
      if (playlist === undefined)
        return yield* Effect.fail(new StorageError({ message: `${key} lists no segments` }));
      const at = (path: string) => objectInput(renditionKey(asset.tenant_id, asset.id, path));
      const track: PackagedTrack = {
        init: at(playlist.init),
        segments: playlist.segments.map((s) => at(s.path)),
      };
      return track;
    });

  /**
   * The `static-renditions` job: brings the files in line with the asset's `mp4_support`. Turned
   * off, or the asset gone: every file removed. Asked for and the ladder complete: the list
   * planned (`preparing`), then each file not ready yet remuxed from its renditions and stored,
   * `ready` with its size (and its webhook event) as soon as it is. Trouble is retried while
   * attempts are left, a retry making only what is not ready; on the last attempt the files not
   * made are `failed`. Safe to run twice (at least once delivery).
   */
  const run = (job: Job<"static-renditions">): Effect.Effect<StaticRenditionsOutcome, JobFailed> =>
    Effect.gen(function* () {
      const { tenant_id, asset_id } = job.data;
      let found = yield* storage.assets.get(tenant_id, asset_id);
      if (Option.isNone(found) || found.value.mp4_support === "none") {
        yield* store.deletePrefix(staticRenditionsPrefix(tenant_id, asset_id));
        // Turned on again meanwhile: what this removal took is made again below.
        found = yield* storage.assets.get(tenant_id, asset_id);
      }
      if (Option.isNone(found) || !staticRenditionsDue(found.value) || found.value.drm_enabled)
        return { status: "skipped" } as const;
      let asset = found.value;
      const remux = ports.mediaProcessor?.remux;
      if (!remux) return yield* Effect.fail(jobFailed("this process cannot make static renditions"));

      const sources = staticSources(asset.renditions);
      const audio = yield* trackOf(asset, "audio");
      const names: ReadonlyArray<StaticRenditionName> = [
        "high.mp4",
        "low.mp4",
        ...(audio ? (["audio.m4a"] as const) : []),
      ];
      // A file listed ready is kept only while it is stored (a removal may have raced a making).
      const stored = new Set<StaticRenditionName>();
      for (const name of names)
        if (Option.isSome(yield* store.head(staticRenditionKey(tenant_id, asset_id, name)))) stored.add(name);
      const planned = yield* saveList(asset, (list) =>
        names.map(
          (name) =>
            list.find((r) => r.name === name && r.status === "ready" && stored.has(name)) ?? {
              name,
              status: "preparing",
              size_bytes: null,
            },
        ),
      );
      if (Option.isNone(planned)) return yield* afterRun(tenant_id, asset_id, { status: "skipped" });
      asset = planned.value;

      let failed: string | undefined;
      for (const entry of asset.static_renditions) {
        if (entry.status === "ready") continue;
        const name = entry.name;
        const made = yield* Effect.either(
          Effect.gen(function* () {
            const rendition = name === "high.mp4" ? sources?.high : sources?.low;
            const video =
              name === "audio.m4a" || rendition === undefined
                ? undefined
                : yield* trackOf(asset, rendition.name);
            if (name !== "audio.m4a" && video === undefined)
              return yield* Effect.fail(
                new StorageError({ message: `no packaged video rendition for ${name}` }),
              );
            return yield* remux(
              { ...(video ? { video } : {}), ...(audio ? { audio } : {}) },
              { path: name, contentType: STATIC_RENDITION_MEDIA_TYPES[name] },
              (file) => store.put(staticRenditionKey(tenant_id, asset_id, name), file.body, file.contentType),
            );
          }),
        );
        if (Either.isLeft(made)) {
          const e: MediaRejected | StorageError = made.left;
          // As for processing: a medium the tool rejects is final, other trouble worth a retry.
          const final =
            job.attempt >= job.maxAttempts || (e._tag === "MediaRejected" && e.code !== "processing_error");
          if (!final) return yield* Effect.fail(jobFailed(e.message, e));
          failed = `${name}: ${e.message}`;
          yield* saveList(asset, settle(name, { name, status: "failed", size_bytes: null }));
          continue;
        }
        const saved = yield* saveList(
          asset,
          settle(name, { name, status: "ready", size_bytes: made.right.size }),
          name,
        );
        if (Option.isNone(saved)) break;
        asset = saved.value;
      }
      return yield* afterRun(
        tenant_id,
        asset_id,
        failed === undefined
          ? ({ status: "ready" } as const)
          : ({ status: "failed", failure_code: "processing_error", reason: failed } as const),
      );
    }).pipe(
      Effect.catchTag("StorageError", (e) => Effect.fail(jobFailed(e.message, e))),
      Effect.withSpan("staticRenditions"),
    );

  /**
   * Deleted or turned off while the job ran: its deletion (or the job enqueued by the PATCH) may
   * have run before the last file was stored. Every write of this run is done now, so removing
   * them here leaves nothing.
   */
  const afterRun = (tenantId: TenantId, assetId: AssetId, outcome: StaticRenditionsOutcome) =>
    Effect.gen(function* () {
      const now = yield* storage.assets.get(tenantId, assetId);
      if (Option.isSome(now) && now.value.mp4_support === "standard") return outcome;
      yield* store.deletePrefix(staticRenditionsPrefix(tenantId, assetId));
      return { status: "skipped" } as const;
    });

  return { run };
};

/**
 * A static rendition of a session's asset (`high.mp4`, `low.mp4`, `audio.m4a`), whole, by range, or
 * as a redirect to the store; 404 unless the asset asks for static renditions and this one is
 * ready. A download (`download` named) is always answered by the media app, which names the file.
 */
export const makeStaticRenditionDelivery = (ports: VodPorts, verify: VerifyPlaybackToken) => {
  const { storage } = ports;
  const notMade = (name: string) =>
    new NotFound({
      message: `${name} is not made for this asset (see its mp4_support and static_renditions)`,
    });

  const open = (token: string, name: StaticRenditionName, range?: RequestedRange, download?: string) =>
    Effect.gen(function* () {
      const claims = yield* verify(token);
      const asset = yield* storage.assets.get(claims.tenantId, claims.assetId);
      const ready =
        Option.isSome(asset) &&
        asset.value.mp4_support === "standard" &&
        asset.value.static_renditions.some((r) => r.name === name && r.status === "ready");
      if (!ready) return yield* Effect.fail(notMade(name));
      const file = yield* storedFile(ports, staticRenditionKey(claims.tenantId, claims.assetId, name), {
        contentType: STATIC_RENDITION_MEDIA_TYPES[name],
        expiresAt: claims.expiresAt,
        range,
        redirect: download === undefined,
      });
      if (Option.isNone(file)) return yield* Effect.fail(notMade(name));
      return { file: file.value, download };
    });

  return { open };
};

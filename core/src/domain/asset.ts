import { Either } from "effect";
import type { AssetId, TenantId } from "./ids.js";
import { illegal, type Transition } from "./transition.js";

export const assetStatuses = ["pending", "uploaded", "processing", "ready", "failed"] as const;
export type AssetStatus = (typeof assetStatuses)[number];

export const assetVisibilities = ["private", "public"] as const;
export type AssetVisibility = (typeof assetVisibilities)[number];

/** failure_code values (DECISIONS). */
export const failureCodes = [
  "invalid_media",
  "unsupported_codec",
  "checksum_mismatch",
  "source_too_long",
  "processing_error",
] as const;
export type FailureCode = (typeof failureCodes)[number];

export interface SourceMetadata {
  readonly source_width: number | null;
  readonly source_height: number | null;
  readonly source_fps: number | null;
  readonly source_codec: string | null;
  readonly source_duration_ms: number | null;
  readonly source_bitrate_kbps: number | null;
}

export const renditionStatuses = ["pending", "ready", "failed"] as const;
export type RenditionStatus = (typeof renditionStatuses)[number];

/** A rendition of the asset's ladder as planned for its source (`bitrate_kbps`: the video's cap). */
export interface RenditionPlan {
  readonly name: string;
  readonly width: number;
  readonly height: number;
  readonly bitrate_kbps: number;
}

/** A rendition and how far it is: `ready` once packaged and listed by the master playlist. */
export interface AssetRendition extends RenditionPlan {
  readonly status: RenditionStatus;
}

/** DECISIONS "Images, downloads and text tracks": whether the asset gets static MP4 renditions. */
export const mp4Supports = ["none", "standard"] as const;
export type Mp4Support = (typeof mp4Supports)[number];

/**
 * The static renditions of `mp4_support: standard`: the best rendition up to 1080p and the lowest
 * as progressive MP4s (video and audio), and the audio alone (none when the source has no audio).
 */
export const staticRenditionNames = ["high.mp4", "low.mp4", "audio.m4a"] as const;
export type StaticRenditionName = (typeof staticRenditionNames)[number];

/** `preparing` until made, then `ready` (served) or `failed` (docs/playback.md). */
export const staticRenditionStatuses = ["preparing", "ready", "failed"] as const;
export type StaticRenditionStatus = (typeof staticRenditionStatuses)[number];

export interface StaticRendition {
  readonly name: StaticRenditionName;
  readonly status: StaticRenditionStatus;
  /** The file's size once ready; null before. */
  readonly size_bytes: number | null;
}

export interface Asset extends SourceMetadata {
  readonly id: AssetId;
  readonly tenant_id: TenantId;
  readonly title: string;
  readonly status: AssetStatus;
  readonly failure_code: FailureCode | null;
  readonly origin_size_bytes: number | null;
  readonly checksum_sha256: string | null;
  readonly drm_enabled: boolean;
  readonly visibility: AssetVisibility;
  readonly published_at: number | null;
  /** `[]` until processing has planned them; the order is the ladder's, tallest first. */
  readonly renditions: ReadonlyArray<AssetRendition>;
  /** When the asset became playable (its first rendition ready). */
  readonly ready_at: number | null;
  readonly mp4_support: Mp4Support;
  /** `[]` until the job that makes them has planned them (after the ladder completes). */
  readonly static_renditions: ReadonlyArray<StaticRendition>;
  readonly created_at: number;
}

export const DEFAULT_ASSET_TITLE = "Untitled";

const noSource: SourceMetadata = {
  source_width: null,
  source_height: null,
  source_fps: null,
  source_codec: null,
  source_duration_ms: null,
  source_bitrate_kbps: null,
};

/** A new draft: pending, private, every source_* field and the origin facts null. */
export const newAssetDraft = (input: {
  id: AssetId;
  tenant_id: TenantId;
  title?: string | undefined;
  drm?: boolean | undefined;
  mp4_support?: Mp4Support | undefined;
  now: number;
}): Asset => ({
  id: input.id,
  tenant_id: input.tenant_id,
  title: input.title ?? DEFAULT_ASSET_TITLE,
  status: "pending",
  failure_code: null,
  ...noSource,
  origin_size_bytes: null,
  checksum_sha256: null,
  drm_enabled: input.drm ?? false,
  visibility: "private",
  published_at: null,
  renditions: [],
  ready_at: null,
  mp4_support: input.mp4_support ?? "none",
  static_renditions: [],
  created_at: input.now,
});

export type AssetEvent =
  | {
      readonly type: "upload_completed";
      readonly origin_size_bytes: number;
      /** Null only where the store cannot hash while assembling; processing checks it then. */
      readonly checksum_sha256: string | null;
    }
  | { readonly type: "processing_started" }
  /** The source probed and the ladder planned for it; renditions already settled keep their status. */
  | {
      readonly type: "renditions_planned";
      readonly source: SourceMetadata;
      readonly renditions: ReadonlyArray<RenditionPlan>;
    }
  /** A rendition packaged and listed: the first one makes the asset ready (playable). */
  | { readonly type: "rendition_ready"; readonly name: string }
  /** A rendition that could not be made while another one is (or will be) playable. */
  | { readonly type: "rendition_failed"; readonly name: string }
  | {
      readonly type: "processing_failed";
      readonly failure_code: FailureCode;
      readonly source?: SourceMetadata;
    };

const withRendition = (asset: Asset, name: string, status: RenditionStatus): Asset | undefined =>
  asset.renditions.some((r) => r.name === name)
    ? { ...asset, renditions: asset.renditions.map((r) => (r.name === name ? { ...r, status } : r)) }
    : undefined;

/** True while some rendition of the asset is still to be made. */
export const hasPendingRenditions = (asset: Asset): boolean =>
  asset.renditions.some((r) => r.status === "pending");

/**
 * pending -> uploaded (origin facts filled, source_* still null) -> processing -> ready | failed.
 * The asset is ready at its first ready rendition; its other renditions settle (ready or failed)
 * after that, the asset staying ready. A job picked up again after a crash may start processing
 * an asset already in processing, or plan again one that is ready with renditions pending.
 */
export const transitionAsset: Transition<Asset, AssetEvent> = (asset, event, now) => {
  switch (event.type) {
    case "upload_completed":
      if (asset.status !== "pending") break;
      return Either.right({
        ...asset,
        status: "uploaded",
        origin_size_bytes: event.origin_size_bytes,
        checksum_sha256: event.checksum_sha256,
      });
    case "processing_started":
      if (asset.status !== "uploaded" && asset.status !== "processing") break;
      return Either.right({ ...asset, status: "processing" });
    case "renditions_planned": {
      if (asset.status !== "processing" && asset.status !== "ready") break;
      const before = new Map(asset.renditions.map((r) => [r.name, r.status]));
      return Either.right({
        ...asset,
        ...event.source,
        renditions: event.renditions.map((r) => ({ ...r, status: before.get(r.name) ?? "pending" })),
      });
    }
    case "rendition_ready": {
      if (asset.status !== "processing" && asset.status !== "ready") break;
      const next = withRendition(asset, event.name, "ready");
      if (!next) break;
      return Either.right(
        asset.status === "ready" ? next : { ...next, status: "ready", failure_code: null, ready_at: now },
      );
    }
    case "rendition_failed": {
      // While processing too: a long source's units are made at once, and a later one may fail
      // before the first one makes the asset playable.
      if (asset.status !== "processing" && asset.status !== "ready") break;
      const next = withRendition(asset, event.name, "failed");
      if (!next) break;
      return Either.right(next);
    }
    case "processing_failed":
      if (asset.status !== "uploaded" && asset.status !== "processing") break;
      return Either.right({
        ...asset,
        ...event.source,
        status: "failed",
        failure_code: event.failure_code,
        renditions: asset.renditions.map((r) => (r.status === "pending" ? { ...r, status: "failed" } : r)),
      });
  }
  return illegal("asset", asset.status, event.type);
};

/** An upload may start only on a draft that holds no bytes yet. */
export const canStartUpload = (asset: Asset): boolean => asset.status === "pending";

/** What a client may change on an asset (PATCH): everything else is the platform's. */
export interface AssetDetailsInput {
  readonly title?: string | undefined;
  readonly visibility?: AssetVisibility | undefined;
  readonly mp4_support?: Mp4Support | undefined;
}

/**
 * The stored fields a details change writes; a field left out is not written. The static
 * renditions are written this way too (by PATCH and by their job), never by processing's `update`.
 */
export type AssetDetails = Partial<
  Pick<Asset, "title" | "visibility" | "published_at" | "mp4_support" | "static_renditions">
>;

/**
 * The fields a PATCH writes: `published_at` is when the asset last became public, and null
 * while it is private; setting public on a public asset keeps the first time.
 */
export const assetDetailsChange = (asset: Asset, input: AssetDetailsInput, now: number): AssetDetails => {
  const change: { -readonly [K in keyof AssetDetails]: AssetDetails[K] } = {};
  if (input.title !== undefined) change.title = input.title;
  if (input.visibility !== undefined && input.visibility !== asset.visibility) {
    change.visibility = input.visibility;
    change.published_at = input.visibility === "public" ? now : null;
  }
  // Turned off: the files go (their job removes them), and so does their list.
  if (input.mp4_support !== undefined && input.mp4_support !== asset.mp4_support) {
    change.mp4_support = input.mp4_support;
    if (input.mp4_support === "none") change.static_renditions = [];
  }
  return change;
};

/** Whether the static renditions are to be made now: asked for, and the ladder complete. */
export const staticRenditionsDue = (asset: Asset): boolean =>
  asset.mp4_support === "standard" && asset.status === "ready" && !hasPendingRenditions(asset);

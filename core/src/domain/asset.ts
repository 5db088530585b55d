import { Either } from "effect";
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

export interface Asset extends SourceMetadata {
  readonly id: string;
  readonly tenant_id: string;
  readonly title: string;
  readonly status: AssetStatus;
  readonly failure_code: FailureCode | null;
  readonly origin_size_bytes: number | null;
  readonly checksum_sha256: string | null;
  readonly drm_enabled: boolean;
  readonly visibility: AssetVisibility;
  readonly published_at: number | null;
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
  id: string;
  tenant_id: string;
  title?: string | undefined;
  drm?: boolean | undefined;
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
  | { readonly type: "processing_succeeded"; readonly source: SourceMetadata }
  | {
      readonly type: "processing_failed";
      readonly failure_code: FailureCode;
      readonly source?: SourceMetadata;
    };

/**
 * pending -> uploaded (origin facts filled, source_* still null) -> processing -> ready | failed.
 * A job picked up again after a crash may start processing an asset already in processing.
 */
export const transitionAsset: Transition<Asset, AssetEvent> = (asset, event) => {
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
    case "processing_succeeded":
      if (asset.status !== "processing") break;
      return Either.right({ ...asset, ...event.source, status: "ready", failure_code: null });
    case "processing_failed":
      if (asset.status !== "uploaded" && asset.status !== "processing") break;
      return Either.right({ ...asset, ...event.source, status: "failed", failure_code: event.failure_code });
  }
  return illegal("asset", asset.status, event.type);
};

/** An upload may start only on a draft that holds no bytes yet. */
export const canStartUpload = (asset: Asset): boolean => asset.status === "pending";

/** What a client may change on an asset (PATCH): everything else is the platform's. */
export interface AssetDetailsInput {
  readonly title?: string | undefined;
  readonly visibility?: AssetVisibility | undefined;
}

/** The stored fields a details change writes; a field left out is not written. */
export type AssetDetails = Partial<Pick<Asset, "title" | "visibility" | "published_at">>;

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
  return change;
};

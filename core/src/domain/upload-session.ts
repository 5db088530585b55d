import { Either } from "effect";
import type { AssetId, TenantId, UploadId } from "./ids.js";
import { illegal, type Transition } from "./transition.js";

export const uploadStatuses = ["created", "completed", "aborted", "expired"] as const;
export type UploadStatus = (typeof uploadStatuses)[number];

export const MIB = 1024 * 1024;
export const MIN_PART_SIZE = 8 * MIB;
export const MAX_PART_COUNT = 10_000;
export const MAX_UPLOAD_SIZE_BYTES = 107_374_182_400;
export const UPLOAD_SESSION_LIFETIME_MS = 24 * 60 * 60 * 1000;

/** The smallest multiple of 1 MiB that is at least 8 MiB and keeps part_count at most 10,000. */
export const partSizeFor = (sizeBytes: number): number =>
  Math.max(MIN_PART_SIZE, Math.ceil(sizeBytes / MAX_PART_COUNT / MIB) * MIB);

export const partCountFor = (sizeBytes: number, partSize: number): number => Math.ceil(sizeBytes / partSize);

/** Every part but the last has exactly part_size bytes. */
export const expectedPartSize = (
  session: Pick<UploadSession, "size_bytes" | "part_size" | "part_count">,
  n: number,
) =>
  n < session.part_count
    ? session.part_size
    : session.size_bytes - session.part_size * (session.part_count - 1);

export interface UploadSession {
  readonly id: UploadId;
  readonly tenant_id: TenantId;
  readonly asset_id: AssetId;
  /** As stored; read it through `uploadStatus`, which also knows about expiry. */
  readonly status: UploadStatus;
  readonly part_size: number;
  readonly part_count: number;
  readonly size_bytes: number;
  readonly sha256: string | null;
  readonly expires_at: number;
  readonly created_at: number;
  readonly completed_at: number | null;
  /** The parts as they were when the upload completed (the store removes them then). */
  readonly completed_parts: ReadonlyArray<UploadedPart> | null;
}

export interface UploadedPart {
  readonly number: number;
  readonly size: number;
  readonly etag: string;
  /**
   * The part's sha256 as the client declared it at completion, kept only where the store could
   * not check it then (a bucket): processing checks it while it reads the source.
   */
  readonly sha256?: string;
}

/** A created session past its expiry reads as expired, whether or not a sweeper stored that yet. */
export const uploadStatus = (session: UploadSession, now: number): UploadStatus =>
  session.status === "created" && session.expires_at <= now ? "expired" : session.status;

export type UploadEvent =
  | { readonly type: "complete" }
  | { readonly type: "abort" }
  | { readonly type: "expire" };

/**
 * created -> completed | aborted | expired. Completing a completed session and aborting an aborted
 * or expired one leave it as it is (both operations are idempotent); every other move is illegal.
 */
export const transitionUpload: Transition<UploadSession, UploadEvent> = (session, event, now) => {
  const from = uploadStatus(session, now);
  switch (event.type) {
    case "complete":
      if (from === "created") return Either.right({ ...session, status: "completed", completed_at: now });
      // Completing again answers the first completion, unchanged.
      if (from === "completed") return Either.right(session);
      break;
    case "abort":
      if (from === "created") return Either.right({ ...session, status: "aborted" });
      if (from === "aborted" || from === "expired") return Either.right({ ...session, status: from });
      break;
    case "expire":
      if (from === "created" || from === "expired") return Either.right({ ...session, status: "expired" });
      break;
  }
  return illegal("upload", from, event.type);
};

import {
  type ApiKey,
  type Asset,
  type AssetEvent,
  hasPendingRenditions,
  type IllegalTransition,
  newAssetDraft,
  type PlaybackSession,
  playbackSessionState,
  type RefreshToken,
  refreshTokenState,
  type SourceMetadata,
  transitionApiKey,
  transitionAsset,
  transitionUpload,
  type UploadEvent,
  type UploadSession,
  type UploadStatus,
  uploadStatus,
} from "@vod/core";
import { Either } from "effect";
import { describe, expect, it } from "vitest";
import { AssetId, PlaybackSessionId, TenantId, UploadId } from "../src/domain/ids.js";

const NOW = Date.UTC(2026, 5, 1);
const right = <A>(e: Either.Either<A, IllegalTransition>): A => {
  if (Either.isLeft(e)) throw new Error(`expected a legal move, got ${JSON.stringify(e.left)}`);
  return e.right;
};
const left = <A>(e: Either.Either<A, IllegalTransition>) => {
  expect(Either.isLeft(e)).toBe(true);
  return Either.isLeft(e) ? e.left : undefined;
};

/** The fields every expiring record below shares: made now, expiring a second later. */
const lifetime = { created_at: NOW, expires_at: NOW + 1000 };
/** Whose the sessions below are. */
const ofAsset = { tenant_id: TenantId("tnt_1"), asset_id: AssetId("ast_1") };

describe("asset", () => {
  const draft = newAssetDraft({ id: AssetId("ast_1"), tenant_id: TenantId("tnt_1"), now: NOW });
  // Every source fact, so that the draft's nulls below cover them all.
  const source: Required<SourceMetadata> = {
    source_width: 1920,
    source_height: 1080,
    source_fps: 29.97,
    source_codec: "h264",
    source_duration_ms: 10_000,
    source_bitrate_kbps: 4_000,
  };
  const at = (status: Asset["status"]): Asset => ({ ...draft, status });

  it("POST /v1/assets: a draft is pending, private, titled Untitled, with every source fact null", () => {
    expect(draft).toMatchObject({
      status: "pending",
      visibility: "private",
      title: "Untitled",
      drm_enabled: false,
      failure_code: null,
      origin_size_bytes: null,
      checksum_sha256: null,
      published_at: null,
      ...Object.fromEntries(Object.keys(source).map((fact) => [fact, null])),
    });
    expect(
      newAssetDraft({ id: AssetId("a"), tenant_id: TenantId("t"), now: NOW, drm: true, title: "x" }),
    ).toMatchObject({
      drm_enabled: true,
      title: "x",
    });
  });

  it("upload completed: pending -> uploaded with origin facts, source_* still null", () => {
    const next = right(
      transitionAsset(draft, { type: "upload_completed", origin_size_bytes: 9, checksum_sha256: "ab" }, NOW),
    );
    expect(next).toMatchObject({
      status: "uploaded",
      origin_size_bytes: 9,
      checksum_sha256: "ab",
      source_width: null,
    });
  });

  it("processing: uploaded -> processing -> renditions planned -> ready at the first ready rendition, or failed", () => {
    const processing = right(transitionAsset(at("uploaded"), { type: "processing_started" }, NOW));
    expect(processing.status).toBe("processing");
    const plans = [
      { name: "720p", width: 1280, height: 720, bitrate_kbps: 3000 },
      { name: "360p", width: 640, height: 360, bitrate_kbps: 800 },
    ];
    const planned = right(
      transitionAsset(processing, { type: "renditions_planned", source, renditions: plans }, NOW),
    );
    expect(planned).toMatchObject({
      status: "processing",
      ready_at: null,
      ...source,
      renditions: plans.map((p) => ({ ...p, status: "pending" })),
    });
    const ready = right(transitionAsset(planned, { type: "rendition_ready", name: "360p" }, NOW + 5));
    expect(ready).toMatchObject({ status: "ready", ready_at: NOW + 5, failure_code: null });
    expect(ready.renditions.map((r) => r.status)).toEqual(["pending", "ready"]);
    expect(hasPendingRenditions(ready)).toBe(true);
    // A later rendition that fails leaves the asset ready; ready_at stays the first time.
    const settled = right(transitionAsset(ready, { type: "rendition_failed", name: "720p" }, NOW + 9));
    expect(settled).toMatchObject({ status: "ready", ready_at: NOW + 5 });
    expect(settled.renditions.map((r) => r.status)).toEqual(["failed", "ready"]);
    expect(hasPendingRenditions(settled)).toBe(false);
    // Planned again (a job resumed after a crash): settled renditions keep their status.
    const again = right(
      transitionAsset(ready, { type: "renditions_planned", source, renditions: plans }, NOW + 7),
    );
    expect(again.renditions.map((r) => r.status)).toEqual(["pending", "ready"]);
    expect(left(transitionAsset(planned, { type: "rendition_ready", name: "1080p" }, NOW))).toMatchObject({
      event: "rendition_ready",
    });
    const failed = right(
      transitionAsset(planned, { type: "processing_failed", failure_code: "invalid_media" }, NOW),
    );
    expect(failed).toMatchObject({ status: "failed", failure_code: "invalid_media", ready_at: null });
    expect(failed.renditions.map((r) => r.status)).toEqual(["failed", "failed"]);
  });

  it("a job picked up again after a crash may restart processing", () => {
    expect(right(transitionAsset(at("processing"), { type: "processing_started" }, NOW)).status).toBe(
      "processing",
    );
  });

  const events: Record<AssetEvent["type"], AssetEvent> = {
    upload_completed: { type: "upload_completed", origin_size_bytes: 1, checksum_sha256: "x" },
    processing_started: { type: "processing_started" },
    renditions_planned: { type: "renditions_planned", source, renditions: [] },
    rendition_ready: { type: "rendition_ready", name: "360p" },
    rendition_failed: { type: "rendition_failed", name: "360p" },
    processing_failed: { type: "processing_failed", failure_code: "processing_error" },
  };
  const legal: Record<Asset["status"], ReadonlyArray<AssetEvent["type"]>> = {
    pending: ["upload_completed"],
    uploaded: ["processing_started", "processing_failed"],
    processing: [
      "processing_started",
      "renditions_planned",
      "rendition_ready",
      "rendition_failed",
      "processing_failed",
    ],
    ready: ["renditions_planned", "rendition_ready", "rendition_failed"],
    failed: [],
  };
  for (const [status, allowed] of Object.entries(legal) as Array<[Asset["status"], AssetEvent["type"][]]>)
    for (const event of Object.values(events).filter((e) => !allowed.includes(e.type)))
      it(`refuses ${event.type} on a ${status} asset`, () => {
        expect(left(transitionAsset(at(status), event, NOW))).toMatchObject({
          subject: "asset",
          from: status,
          event: event.type,
        });
      });
});

describe("upload session", () => {
  const session: UploadSession = {
    id: UploadId("upl_1"),
    ...ofAsset,
    status: "created",
    part_size: 8 * 1024 * 1024,
    part_count: 3,
    size_bytes: 20 * 1024 * 1024,
    sha256: null,
    ...lifetime,
    completed_at: null,
    completed_parts: null,
  };
  const at = (status: UploadStatus): UploadSession => ({ ...session, status });

  it("reads as expired once past expires_at, whatever is stored", () => {
    expect(uploadStatus(session, NOW)).toBe("created");
    expect(uploadStatus(session, NOW + 1000)).toBe("expired");
    expect(uploadStatus(at("completed"), NOW + 5000)).toBe("completed");
  });

  it("complete: created -> completed with completed_at; completing again changes nothing", () => {
    const done = right(transitionUpload(session, { type: "complete" }, NOW + 10));
    expect(done).toMatchObject({ status: "completed", completed_at: NOW + 10 });
    expect(right(transitionUpload(done, { type: "complete" }, NOW + 20))).toBe(done);
  });

  it("abort: created -> aborted; aborted and expired sessions abort again", () => {
    expect(right(transitionUpload(session, { type: "abort" }, NOW)).status).toBe("aborted");
    expect(right(transitionUpload(at("aborted"), { type: "abort" }, NOW)).status).toBe("aborted");
    expect(right(transitionUpload(session, { type: "abort" }, NOW + 1000)).status).toBe("expired");
  });

  it("expire: created -> expired", () => {
    expect(right(transitionUpload(session, { type: "expire" }, NOW + 1000)).status).toBe("expired");
  });

  const illegal: Array<[UploadStatus, UploadEvent["type"], number]> = [
    ["aborted", "complete", NOW],
    ["created", "complete", NOW + 1000],
    ["expired", "complete", NOW],
    ["completed", "abort", NOW],
    ["completed", "expire", NOW],
    ["aborted", "expire", NOW],
  ];
  for (const [status, event, when] of illegal)
    it(`refuses ${event} on a ${when > NOW ? "timed-out" : status} session`, () => {
      expect(left(transitionUpload(at(status), { type: event } as UploadEvent, when))?.subject).toBe(
        "upload",
      );
    });
});

describe("expiring records: live, ended once ended, expired at their expiry", () => {
  const ofUser = { tenant_id: TenantId("tnt_1"), user_id: "usr_1" };
  const token: RefreshToken = { token_hash: "h", session_id: "ses_1", ...ofUser, ...lifetime, used_at: null };
  const session: PlaybackSession = {
    id: PlaybackSessionId("pbs_1"),
    ...ofAsset,
    drm: false,
    ...lifetime,
    ended_at: null,
  };
  const cases = [
    [
      "refresh token",
      (now: number, endedAt: number | null) => refreshTokenState({ ...token, used_at: endedAt }, now),
      "valid",
      "invalidated",
    ],
    [
      "playback session",
      (now: number, endedAt: number | null) => playbackSessionState({ ...session, ended_at: endedAt }, now),
      "active",
      "ended",
    ],
  ] as const;
  for (const [name, stateAt, live, ended] of cases)
    it(`a ${name} reads ${live}, then ${ended} once ended, and expired at its expiry`, () => {
      expect(stateAt(NOW, null)).toBe(live);
      expect(stateAt(NOW + 2, NOW + 1)).toBe(ended);
      expect(stateAt(NOW + 1000, null)).toBe("expired");
    });
});

describe("API key", () => {
  const key: ApiKey = {
    id: "key_1",
    tenant_id: TenantId("tnt_1"),
    name: "ci",
    prefix: "vod_abcdefgh",
    scopes: ["write"],
    key_hash: "h",
    last_used_at: null,
    expires_at: null,
    revoked_at: null,
    created_at: NOW,
  };

  it("revoke: active -> revoked with revoked_at; revoking again keeps the first revoked_at", () => {
    const revoked = right(transitionApiKey(key, { type: "revoke" }, NOW + 5));
    expect(revoked.revoked_at).toBe(NOW + 5);
    expect(right(transitionApiKey(revoked, { type: "revoke" }, NOW + 9)).revoked_at).toBe(NOW + 5);
  });
});

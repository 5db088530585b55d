export * from "./config.js";
export * from "./container.js";
export * from "./domain/index.js";
export * from "./errors.js";
export type * from "./ports/index.js";
export { JobFailed, jobNames, limitRun } from "./ports/job-queue.js";
export { MailNotSent } from "./ports/mailer.js";
export { MediaRejected } from "./ports/media-processor.js";
export { isValidRange, PartRejected, PartsMismatched } from "./ports/object-store.js";
export { ProcessingStages, timedStage } from "./ports/processing-stages.js";
export { TextTrackRejected } from "./ports/text-track-reader.js";
export { TokenRejected } from "./ports/token-signer.js";
export { UrlRefused } from "./ports/webhook-sender.js";
export * from "./schema/index.js";
export * from "./tokens.js";
export { type Accounts, EXPIRED_REFRESH_TOKEN_KEPT_MS } from "./use-cases/accounts.js";
export type { AnalyticsAnswer, AnalyticsDatum } from "./use-cases/analytics.js";
export { KEY_TAG, MAX_LISTED_API_KEYS } from "./use-cases/api-keys.js";
export { makeCursors } from "./use-cases/assets.js";
export * from "./use-cases/authenticate.js";
export {
  RENDITION_MEDIA_TYPES,
  type RequestedRange,
  type StoredFile,
} from "./use-cases/playback-delivery.js";
export { IMAGE_MEDIA_TYPES, type ImageFile } from "./use-cases/playback-images.js";
export {
  type ChunkOutcome,
  chunkRanges,
  defaultLadder,
  type ProcessingOutcome,
  SEGMENT_SECONDS,
} from "./use-cases/processing.js";
export { layeredRevocations, localRevocationFeed } from "./use-cases/revocations.js";
export { derivedKey, type Sealer, sealer } from "./use-cases/sealing.js";
export {
  STATIC_RENDITION_MEDIA_TYPES,
  type StaticRenditionsOutcome,
  staticSources,
} from "./use-cases/static-renditions.js";
export { enforceRate, hmacBase64Url, sha256Hex } from "./use-cases/support.js";
export {
  type DeliveryOutcome,
  type EventData,
  eventRecorder,
  type RecordEvent,
} from "./use-cases/webhooks.js";
export * from "./vod.js";

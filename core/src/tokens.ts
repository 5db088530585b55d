import type { Clock } from "./ports/clock.js";
import type { IdentityVerifier } from "./ports/identity-verifier.js";
import type { Ids } from "./ports/ids.js";
import type { ImageMaker } from "./ports/image-maker.js";
import type { JobQueue } from "./ports/job-queue.js";
import type { Links } from "./ports/links.js";
import type { Mailer } from "./ports/mailer.js";
import type { MediaProcessor } from "./ports/media-processor.js";
import type { Metrics } from "./ports/metrics.js";
import type { ObjectStore } from "./ports/object-store.js";
import type { PasswordHasher } from "./ports/password-hasher.js";
import type { RateLimiter } from "./ports/rate-limiter.js";
import type { RevocationFeed, RevocationStore } from "./ports/revocation-store.js";
import type { Storage } from "./ports/storage.js";
import type { TelemetrySink } from "./ports/telemetry-sink.js";
import type { TextTrackReader } from "./ports/text-track-reader.js";
import type { TokenSigner } from "./ports/token-signer.js";
import type { WebhookSender } from "./ports/webhook-sender.js";

/**
 * inversify service identifiers of every port, as global symbols so that the host binds
 * them without sharing one instance of this module.
 */
export const Tokens = {
  Clock: Symbol.for("vod.Clock"),
  Ids: Symbol.for("vod.Ids"),
  Storage: Symbol.for("vod.Storage"),
  PasswordHasher: Symbol.for("vod.PasswordHasher"),
  TokenSigner: Symbol.for("vod.TokenSigner"),
  IdentityVerifier: Symbol.for("vod.IdentityVerifier"),
  RateLimiter: Symbol.for("vod.RateLimiter"),
  ObjectStore: Symbol.for("vod.ObjectStore"),
  JobQueue: Symbol.for("vod.JobQueue"),
  Links: Symbol.for("vod.Links"),
  MediaProcessor: Symbol.for("vod.MediaProcessor"),
  ImageMaker: Symbol.for("vod.ImageMaker"),
  TextTrackReader: Symbol.for("vod.TextTrackReader"),
  RevocationStore: Symbol.for("vod.RevocationStore"),
  RevocationFeed: Symbol.for("vod.RevocationFeed"),
  TelemetrySink: Symbol.for("vod.TelemetrySink"),
  Metrics: Symbol.for("vod.Metrics"),
  WebhookSender: Symbol.for("vod.WebhookSender"),
  Mailer: Symbol.for("vod.Mailer"),
  Config: Symbol.for("vod.Config"),
  Vod: Symbol.for("vod.Vod"),
} as const;

/** The ports `createVod` needs. */
export interface VodPorts {
  readonly clock: Clock;
  readonly ids: Ids;
  readonly storage: Storage;
  readonly passwordHasher: PasswordHasher;
  readonly tokenSigner: TokenSigner;
  readonly identityVerifier: IdentityVerifier;
  readonly rateLimiter: RateLimiter;
  readonly objectStore: ObjectStore;
  readonly revocationStore: RevocationStore;
  /** The addresses handed to clients: upload parts, playback files, telemetry, DRM. */
  readonly links: Links;
  /**
   * Tells every node when a credential, a session or a tenant changes, so that each drops what
   * it cached at once. Absent: this process alone is told (one node).
   */
  readonly revocationFeed?: RevocationFeed | undefined;
  readonly telemetrySink: TelemetrySink;
  /** Only processes that run jobs need it; the API enqueues through `Storage`. */
  readonly jobQueue?: JobQueue | undefined;
  /** Only processes that run processing jobs need it. */
  readonly mediaProcessor?: MediaProcessor | undefined;
  /** Only processes that serve the media app need it: images are made there on request. */
  readonly imageMaker?: ImageMaker | undefined;
  /** Reads uploaded text tracks (WebVTT, SRT); absent, text tracks cannot be added. */
  readonly textTrackReader?: TextTrackReader | undefined;
  /** What operators see of the platform's work; absent, nothing is counted. */
  readonly metrics?: Metrics | undefined;
  /** Checks webhook URLs and sends events; absent, webhooks cannot be created or delivered. */
  readonly webhookSender?: WebhookSender | undefined;
  /**
   * Sends account mail (verification, password reset). Only processes that run jobs need it;
   * absent there, the mail jobs fail and are retried, and so end as a failure in the log.
   */
  readonly mailer?: Mailer | undefined;
}

import type { StaticRenditionName } from "../domain/asset.js";
import type { TenantId, UploadId } from "../domain/ids.js";

/**
 * The addresses the use cases hand to clients (where a part is sent, what a player fetches), made
 * by whoever serves them: the core says what a link leads to, never how it is spelled, so each
 * route's address is written once, where it is served.
 */
export interface Links {
  /** Where one part of an upload is sent, with the grant that lets it in (tenant, expiry, signature). */
  partUpload(part: {
    readonly uploadId: UploadId;
    readonly number: number;
    readonly tenantId: TenantId;
    readonly expiresSec: number;
    readonly signature: string;
  }): string;
  /** A file of a playback session (`master.m3u8`, a segment), by the session's token. */
  playFile(token: string, file: string): string;
  /** A session's thumbnail (JPEG, at the default time), by the session's token. */
  thumbnail(token: string): string;
  /** A session's storyboard (the WebVTT that points into the sprite sheet), by the session's token. */
  storyboard(token: string): string;
  /** A session's static rendition (`high.mp4`, `low.mp4`, `audio.m4a`), by the session's token. */
  staticRendition(token: string, name: StaticRenditionName): string;
  /** Where a player sends its playback events. */
  telemetry(): string;
  /** Where a player asks for a DRM session's entitlement. */
  entitlement(): string;
  /** The ClearKey licence server. */
  clearKeyLicense(): string;
}

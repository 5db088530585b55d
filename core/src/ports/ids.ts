import type { AssetId, PlaybackSessionId, TenantId, UploadId } from "../domain/ids.js";

/** Kinds of identifier the core mints; an adapter may use the kind as a readable prefix. */
export type IdKind =
  | "tenant"
  | "user"
  | "session"
  | "api_key"
  | "asset"
  | "upload"
  | "playback"
  | "webhook"
  | "delivery"
  | "event"
  | "track";

/** The branded type of an id of each kind; the kinds no call confuses stay plain strings. */
export type IdOf<K extends IdKind> = K extends "tenant"
  ? TenantId
  : K extends "asset"
    ? AssetId
    : K extends "upload"
      ? UploadId
      : K extends "playback"
        ? PlaybackSessionId
        : string;

/** Where the core gets identifiers and randomness. Synchronous for the same reason as `Clock`. */
export interface Ids {
  /** A new opaque, unique identifier of the kind. */
  id<K extends IdKind>(kind: K): IdOf<K>;
  /** Cryptographically strong random bytes (keys, refresh tokens, slugs). */
  randomBytes(length: number): Uint8Array;
}

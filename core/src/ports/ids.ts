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

/** Where the core gets identifiers and randomness. Synchronous for the same reason as `Clock`. */
export interface Ids {
  /** A new opaque, unique identifier of the kind. */
  id(kind: IdKind): string;
  /** Cryptographically strong random bytes (keys, refresh tokens, slugs). */
  randomBytes(length: number): Uint8Array;
}

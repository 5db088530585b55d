import type { Effect } from "effect";
import type { NotFound, StorageError } from "../errors.js";
import type { MediaRejected } from "./media-processor.js";
import type { ByteStream } from "./object-store.js";

/** Opens one stored object's bytes, when the image maker reads it. */
export type OpenBytes = () => Effect.Effect<ByteStream, NotFound | StorageError>;

/** A stored object: a local file the tool may read in place, or bytes it fetches first. */
export type StoredMedia = { readonly path: string } | { readonly open: OpenBytes };

/**
 * What an image is made from:
 * - `segments`: a stretch of one stored fMP4 rendition: its init segment and consecutive media
 *   segments, whose own timestamps are the asset's times (what is read is only these);
 * - `source`: a whole media file (the origin), as a local path, a URL the tool may read with
 *   range requests, or bytes to copy to scratch space first.
 */
export type ImageSource =
  | {
      readonly kind: "segments";
      readonly init: StoredMedia;
      readonly segments: ReadonlyArray<StoredMedia>;
    }
  | { readonly kind: "path"; readonly path: string }
  | { readonly kind: "url"; readonly url: string }
  | { readonly kind: "bytes"; readonly open: OpenBytes };

export type StillFormat = "jpg" | "png" | "webp";
export type AnimatedFormat = "gif" | "webp";
/**
 * How a picture goes into a box: `preserve` scales it to fit inside (one side may be shorter),
 * `crop` fills the box and cuts the overflow evenly, `pad` fits it inside and fills the rest black.
 */
export type FitMode = "preserve" | "crop" | "pad";

/** Sizes in pixels, each even (what 4:2:0 encoders and the sprite's grid need). */
export interface Box {
  readonly width: number;
  readonly height: number;
}

/**
 * Makes images of a video: a frame, an animated clip, a sprite sheet. Times are the asset's, in
 * seconds. Each call decodes only what it needs, owns its scratch space (removed whatever the
 * outcome) and answers the encoded file's bytes. A source that cannot be decoded is
 * `MediaRejected` (`invalid_media`); a tool that fails or cannot start, `processing_error`.
 */
export interface ImageMaker {
  /** The frame shown at `atSeconds`, fitted into `box` as `fit` says. */
  frame(
    source: ImageSource,
    request: {
      readonly atSeconds: number;
      readonly box: Box;
      readonly fit: FitMode;
      readonly format: StillFormat;
    },
  ): Effect.Effect<Uint8Array, MediaRejected | NotFound | StorageError>;
  /** The frames from `startSeconds` to `endSeconds` at `fps`, each `box`, looping forever. */
  animated(
    source: ImageSource,
    request: {
      readonly startSeconds: number;
      readonly endSeconds: number;
      readonly box: Box;
      readonly fps: number;
      readonly format: AnimatedFormat;
    },
  ): Effect.Effect<Uint8Array, MediaRejected | NotFound | StorageError>;
  /**
   * A sprite sheet: tile `i` (left to right, then top to bottom, `columns` across) shows the
   * picture at `i * intervalSeconds` (the nearest keyframe at or before it: a seek-bar preview,
   * not a frame-exact still), each `tile` in size; `count` tiles, the last row padded black.
   */
  sprite(
    source: ImageSource,
    request: {
      readonly count: number;
      readonly intervalSeconds: number;
      readonly tile: Box;
      readonly columns: number;
      readonly format: StillFormat;
    },
  ): Effect.Effect<Uint8Array, MediaRejected | NotFound | StorageError>;
}

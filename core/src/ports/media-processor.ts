import { Data, type Effect } from "effect";
import type { SourceMetadata } from "../domain/asset.js";
import type { StorageError } from "../errors.js";
import type { ByteStream } from "./object-store.js";

/**
 * Where the processor reads the source: a local file it may read in place, or bytes it copies
 * to scratch space of its own first (media containers need seeking). `expectedSha256`: the
 * sha256 the client declared, which the store could not check when the upload completed; the
 * processor hashes the bytes as it copies them and rejects a difference (`checksum_mismatch`).
 * `expectedPartSha256`: likewise the sha256 of parts the client declared at completion, part `n`
 * being bytes `(n - 1) * partSize` up to `n * partSize`; a difference is rejected naming the part.
 */
export type MediaInput =
  | { readonly path: string }
  | {
      readonly open: () => Effect.Effect<ByteStream, StorageError>;
      readonly expectedSha256?: string | undefined;
      readonly expectedPartSha256?: PartChecksums | undefined;
    };

/** Declared sha256s (hex) of some parts of an upload whose every part but the last is `partSize`. */
export interface PartChecksums {
  readonly partSize: number;
  readonly sha256: ReadonlyMap<number, string>;
}

export interface ProbedSource extends SourceMetadata {
  readonly has_video: boolean;
  readonly has_audio: boolean;
}

/** One rung of the ladder: renditions are made at or below the source height, never above. */
export interface Rendition {
  readonly name: string;
  readonly height: number;
  readonly videoBitrateKbps: number;
  readonly audioBitrateKbps: number;
}

/**
 * A file of the packaged output, relative to the asset's output prefix (`master.m3u8`,
 * `720p/seg_1.m4s`). Playback delivers only names that `isRenditionFile` accepts (one or two
 * segments of `[A-Za-z0-9_-]`, a known extension).
 */
export interface OutputFile {
  readonly path: string;
  readonly contentType: string;
  readonly body: ByteStream;
}

/** A rung planned for a source: the picture size it is encoded at. */
export interface PlannedRendition {
  readonly rendition: Rendition;
  readonly width: number;
  readonly height: number;
}

export interface PackagedOutput {
  /** Every file handed to `emit`, by path. */
  readonly files: ReadonlyArray<{
    readonly path: string;
    readonly contentType: string;
    readonly size: number;
  }>;
  readonly master: string;
  /** The DASH manifest's path: the same renditions as the master. */
  readonly manifest: string;
  /** The poster's path, when this run made it (`shared`). */
  readonly poster: string | undefined;
  /** The rungs actually produced. */
  readonly renditions: ReadonlyArray<Rendition>;
}

/** Common Encryption of every segment (the first included) with one content key. */
export interface Encryption {
  /** 16 bytes, hex. */
  readonly keyId: string;
  /** 16 bytes, hex. */
  readonly key: string;
}

export interface PackageOptions {
  /**
   * When given, segments are CENC-encrypted (cenc scheme) and media playlists signal the key for
   * ClearKey (`#EXT-X-KEY:METHOD=SAMPLE-AES-CTR,KEYFORMAT="org.w3.clearkey"`) with the KID in the
   * URI; neither playlists nor init segments carry the key itself.
   */
  readonly encryption?: Encryption;
  /**
   * Whether this run also emits what every rendition shares: the audio rendition and the poster.
   * Default true; false for renditions added to an asset that has them already.
   */
  readonly shared?: boolean;
  /**
   * The master playlist already stored for the asset, if any: the one emitted lists its
   * renditions and this run's (a rendition of the same name replaced).
   */
  readonly master?: string;
  /**
   * The DASH manifest already stored for the asset, if any: the one emitted lists its
   * representations and this run's, as the master does.
   */
  readonly manifest?: string;
}

/** A part of the source: from `startMs` up to `endMs`, or to its end when that is null. */
export interface SourceRange {
  readonly startMs: number;
  readonly endMs: number | null;
}

/**
 * Why media could not be processed. `invalid_media`, `unsupported_codec` and `checksum_mismatch`
 * are final; `processing_error` is worth a retry.
 */
export class MediaRejected extends Data.TaggedError("MediaRejected")<{
  readonly code: "invalid_media" | "unsupported_codec" | "checksum_mismatch" | "processing_error";
  readonly message: string;
  readonly cause?: unknown;
}> {}

/** A packaged fMP4 track as stored: its init segment and its media segments, in playlist order. */
export interface PackagedTrack {
  readonly init: MediaInput;
  readonly segments: ReadonlyArray<MediaInput>;
}

/** Probes and transcodes media; owns its tools (ffmpeg, ffprobe, a packager) and scratch space. */
export interface MediaProcessor {
  probe(input: MediaInput): Effect.Effect<ProbedSource, MediaRejected>;
  /**
   * The rungs of `ladder` this source gets, tallest first: those at or below its height, never
   * above, each with its picture size. Pure; `package` makes the same for the same rungs.
   */
  plan(source: ProbedSource, ladder: ReadonlyArray<Rendition>): ReadonlyArray<PlannedRendition>;
  /**
   * Transcodes the source into `renditions` (rungs of a `plan`, one unit of work), packages HLS
   * (fMP4 segments, one media playlist per rendition, with `shared` the audio rendition and a
   * poster image) and a DASH manifest of the same segments, and hands every file to `emit`, each
   * once, the DASH manifest then the master playlist last: they list these renditions and those
   * of `options.manifest` and `options.master`. Scratch files are removed whatever the outcome.
   */
  package(
    input: MediaInput,
    source: ProbedSource,
    renditions: ReadonlyArray<Rendition>,
    emit: (file: OutputFile) => Effect.Effect<void, StorageError>,
    options?: PackageOptions,
  ): Effect.Effect<PackagedOutput, MediaRejected | StorageError>;
  /**
   * Encodes `range` of the source's video into each of `renditions` (rungs of a `plan`) as
   * `package` would, with keyframes from the range's start on, and hands `emit` one video-only MP4
   * per rendition, `{name}.mp4`. A range starting on a segment boundary of the whole makes the
   * chunk `packageChunks` joins there. Absent: the processor makes every source in one `package`.
   */
  encodeChunk?(
    input: MediaInput,
    source: SourceMetadata,
    renditions: ReadonlyArray<Rendition>,
    range: SourceRange,
    emit: (file: OutputFile) => Effect.Effect<void, StorageError>,
  ): Effect.Effect<void, MediaRejected | StorageError>;
  /**
   * `package` from chunks: each rendition's `count` chunks (`chunk(name, index)`, as
   * `encodeChunk` made them, in order) joined without re-encoding, the audio encoded once from
   * the whole source, then packaged, merged and emitted exactly as `package` does.
   */
  packageChunks?(
    input: MediaInput,
    source: ProbedSource,
    renditions: ReadonlyArray<Rendition>,
    chunks: { readonly count: number; readonly chunk: (rendition: string, index: number) => MediaInput },
    emit: (file: OutputFile) => Effect.Effect<void, StorageError>,
    options?: PackageOptions,
  ): Effect.Effect<PackagedOutput, MediaRejected | StorageError>;
  /**
   * One progressive MP4 made from packaged tracks without re-encoding: the `video` and `audio`
   * tracks given (one at least), with the asset's timing, its index before the media (a player
   * starts before the whole is fetched), handed to `emit` once as `file`. Answers its size in
   * bytes. Absent: this processor makes no static renditions.
   */
  remux?(
    tracks: { readonly video?: PackagedTrack; readonly audio?: PackagedTrack },
    file: { readonly path: string; readonly contentType: string },
    emit: (file: OutputFile) => Effect.Effect<void, StorageError>,
  ): Effect.Effect<{ readonly size: number }, MediaRejected | StorageError>;
}

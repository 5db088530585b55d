import { Effect, Option } from "effect";
import { renditionKey, STATIC_RENDITIONS_DIR, textTrackKey } from "../domain/object-keys.js";
import { NotFound } from "../errors.js";
import type { ByteStream } from "../ports/object-store.js";
import type { VodPorts } from "../tokens.js";
import type { VerifyPlaybackToken } from "./playback-sessions.js";
import { readText } from "./support.js";
import { TEXT_DIRECTORY, withSubtitles, withTextAdaptationSets } from "./text-track-manifests.js";

/** A segment URL of the store, for redirect delivery, lives this long (DECISIONS). */
export const DELIVERY_URL_TTL_MS = 300_000;

/**
 * The byte range a client asked for, resolved once the file's size is known (a suffix range,
 * `bytes=-500`, means nothing without it): a range, "unsatisfiable", or undefined for the whole file.
 */
export type RequestedRange = (
  size: number,
) => { readonly start: number; readonly end: number } | "unsatisfiable" | undefined;

/** The media type of each file extension a rendition has, the one its file is delivered with. */
export const RENDITION_MEDIA_TYPES: Readonly<Record<string, string>> = {
  m3u8: "application/vnd.apple.mpegurl",
  mpd: "application/dash+xml",
  m4s: "video/iso.segment",
  mp4: "video/mp4",
  jpg: "image/jpeg",
  vtt: "text/vtt",
};

/** The manifests that list the asset's text tracks, each with the way it lists them. */
const MANIFESTS: Readonly<Record<string, typeof withSubtitles>> = {
  "master.m3u8": withSubtitles,
  "manifest.mpd": withTextAdaptationSets,
};

/**
 * The file names an asset's renditions can have: one or two plain segments (`master.m3u8`,
 * `720p/3.m4s`), each a short name of letters, digits, `_` or `-` with one extension of a type
 * we deliver. Anything else cannot be one of the asset's files and is 404 before the object
 * store is asked: a NUL, a dot segment or a 5,000-character name never becomes an object key.
 */
const RENDITION_FILE = new RegExp(
  `^(?:[A-Za-z0-9_-]{1,64}/)?[A-Za-z0-9_-]{1,64}\\.(?:${Object.keys(RENDITION_MEDIA_TYPES).join("|")})$`,
);
export const isRenditionFile = (path: string) => RENDITION_FILE.test(path);

/** A stored file as playback answers it (images, static renditions): see `storedFile`. */
export type StoredFile =
  | { readonly kind: "redirect"; readonly url: string }
  | { readonly kind: "unsatisfiable"; readonly size: number }
  | {
      readonly kind: "file";
      readonly body: AsyncIterable<Uint8Array>;
      readonly size: number;
      readonly range: { readonly start: number; readonly end: number } | undefined;
      readonly contentType: string;
      readonly playlist: false;
      readonly expiresAt: number;
    };

/**
 * The object at `key` answered the way every playback file is: a redirect to the store where it
 * has delivery URLs (unless `redirect` is false), else whole or by range; none when not stored.
 */
export const storedFile = (
  ports: Pick<VodPorts, "clock" | "objectStore">,
  key: string,
  delivery: {
    readonly contentType: string;
    readonly expiresAt: number;
    readonly range?: RequestedRange | undefined;
    readonly redirect?: boolean;
  },
) =>
  Effect.gen(function* () {
    const { clock, objectStore: store } = ports;
    const head = yield* store.head(key);
    if (Option.isNone(head)) return Option.none<StoredFile>();
    if (store.deliveryUrl && delivery.redirect !== false) {
      const url = yield* store.deliveryUrl(key, clock.now() + DELIVERY_URL_TTL_MS);
      return Option.some<StoredFile>({ kind: "redirect", url });
    }
    const size = head.value.size;
    const wanted = delivery.range?.(size);
    if (wanted === "unsatisfiable") return Option.some<StoredFile>({ kind: "unsatisfiable", size });
    const bounded = wanted ? { start: wanted.start, end: Math.min(wanted.end, size - 1) } : undefined;
    const body = yield* Effect.catchTag(store.get(key, bounded), "NotFound", () =>
      Effect.fail(new NotFound({ message: "no such file" })),
    );
    return Option.some<StoredFile>({
      kind: "file",
      body,
      size,
      range: bounded,
      contentType: delivery.contentType,
      playlist: false,
      expiresAt: delivery.expiresAt,
    });
  });
async function* bytesOf(bytes: Uint8Array): ByteStream {
  yield bytes;
}

/** Delivery: the files of a session's renditions, whole, by range, or as a redirect to the store. */
export const makePlaybackDelivery = (ports: VodPorts, verify: VerifyPlaybackToken) => {
  const { clock, objectStore: store, storage } = ports;

  /**
   * A manifest as stored with the asset's text tracks added, as they are now: a track added or
   * removed shows in the next manifest fetched, and the stored manifest, which processing
   * rewrites as renditions are added, never races with a track's change. Undefined when the
   * asset has no track: the stored bytes are served as they are.
   */
  const withTracks = (key: string, path: string, tenantId: string, assetId: string) =>
    Effect.gen(function* () {
      const add = MANIFESTS[path];
      if (add === undefined) return undefined;
      const tracks = yield* storage.textTracks.list(tenantId, assetId);
      if (tracks.length === 0) return undefined;
      const stored = yield* Effect.catchTag(store.get(key), "NotFound", () =>
        Effect.fail(new NotFound({ message: "no such file" })),
      );
      return Buffer.from(add(yield* readText(stored), tracks));
    });

  /**
   * A file of the session's renditions (`master.m3u8`, `720p/playlist.m3u8`, `720p/3.m4s`, ...).
   * Playlists use relative URIs, so every URI a player resolves stays under the token's path.
   */
  const open = (token: string, path: string, range?: RequestedRange) =>
    Effect.gen(function* () {
      const claims = yield* verify(token);
      // Static renditions answer at their own routes, which check that they are turned on.
      if (!isRenditionFile(path) || path.startsWith(STATIC_RENDITIONS_DIR))
        return yield* Effect.fail(new NotFound({ message: "no such file" }));
      const key = path.startsWith(TEXT_DIRECTORY)
        ? textTrackKey(claims.tenantId, claims.assetId, path.slice(TEXT_DIRECTORY.length))
        : renditionKey(claims.tenantId, claims.assetId, path);
      const head = yield* store.head(key);
      if (Option.isNone(head)) return yield* Effect.fail(new NotFound({ message: "no such file" }));
      // Segments may come straight from the store; playlists never do (token and revocation
      // checked on each, and the token carried in every URI).
      const isPlaylist = path.endsWith(".m3u8") || path.endsWith(".mpd");
      if (store.deliveryUrl && !isPlaylist) {
        const url = yield* store.deliveryUrl(key, clock.now() + DELIVERY_URL_TTL_MS);
        return { kind: "redirect" as const, url };
      }
      const composed = yield* withTracks(key, path, claims.tenantId, claims.assetId);
      const size = composed?.byteLength ?? head.value.size;
      const wanted = range?.(size);
      if (wanted === "unsatisfiable") return { kind: "unsatisfiable" as const, size };
      const bounded = wanted ? { start: wanted.start, end: Math.min(wanted.end, size - 1) } : undefined;
      const body: ByteStream = composed
        ? bytesOf(bounded ? composed.subarray(bounded.start, bounded.end + 1) : composed)
        : yield* Effect.catchTag(store.get(key, bounded), "NotFound", () =>
            Effect.fail(new NotFound({ message: "no such file" })),
          );
      const contentType =
        RENDITION_MEDIA_TYPES[path.slice(path.lastIndexOf(".") + 1)] ?? head.value.contentType;
      return {
        kind: "file" as const,
        body,
        size,
        range: bounded,
        contentType,
        playlist: isPlaylist,
        expiresAt: claims.expiresAt,
      };
    });

  return { open };
};

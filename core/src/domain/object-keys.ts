/**
 * The object store's key layout, in one place: every key the core reads or writes is built here.
 * Tenant first under each kind, so one tenant's objects share a prefix.
 */

/** Where an asset's uploaded bytes end up (the multipart upload's target): the origin processing reads. */
export const originKey = (tenantId: string, assetId: string) => `origins/${tenantId}/${assetId}`;

/** Where an asset's packaged renditions live; playback reads `master.m3u8` under it. */
export const renditionsPrefix = (tenantId: string, assetId: string) => `renditions/${tenantId}/${assetId}/`;

/**
 * One file of an asset's renditions (playlist, segment, DASH manifest, poster), by its path
 * relative to the renditions prefix (`master.m3u8`, `720p/3.m4s`).
 */
export const renditionKey = (tenantId: string, assetId: string, path: string) =>
  `${renditionsPrefix(tenantId, assetId)}${path}`;

/** The folder of the static renditions, relative to the renditions prefix. */
export const STATIC_RENDITIONS_DIR = "static/";

/**
 * Where an asset's static renditions live (`high.mp4`, ...): under its renditions, deleted with
 * them, in a folder of their own that their job clears when they are turned off.
 */
export const staticRenditionsPrefix = (tenantId: string, assetId: string) =>
  renditionKey(tenantId, assetId, STATIC_RENDITIONS_DIR);

/** One static rendition's file, by its name. */
export const staticRenditionKey = (tenantId: string, assetId: string, name: string) =>
  `${staticRenditionsPrefix(tenantId, assetId)}${name}`;

/**
 * Where an asset's text tracks live: beside its renditions, not under them, so that processing,
 * which clears the renditions of an asset not yet playable, never removes a track added to it.
 * Playback delivers them as `text/{name}`.
 */
export const textTracksPrefix = (tenantId: string, assetId: string) => `text-tracks/${tenantId}/${assetId}/`;

/** One file of an asset's text tracks (`{track_id}.m3u8`). */
export const textTrackKey = (tenantId: string, assetId: string, name: string) =>
  `${textTracksPrefix(tenantId, assetId)}${name}`;

/**
 * Where the chunks of a long source's renditions wait to be joined and packaged: outside the
 * renditions prefix, so playback never serves them.
 */
export const chunksPrefix = (tenantId: string, assetId: string) => `chunks/${tenantId}/${assetId}/`;

/** Where one rendition's chunks wait. */
export const renditionChunksPrefix = (tenantId: string, assetId: string, rendition: string) =>
  `${chunksPrefix(tenantId, assetId)}${rendition}/`;

/** One rendition's encoded chunk (`360p`, chunk 3). */
export const chunkKey = (tenantId: string, assetId: string, rendition: string, index: number) =>
  `${renditionChunksPrefix(tenantId, assetId, rendition)}${index}.mp4`;

/**
 * Every prefix under which the tenant's objects live (origins, renditions and the images and
 * static renditions there, text tracks, chunks): what deleting the tenant empties. Parts of open multipart uploads are the
 * store's own, found by upload, not by prefix.
 */
export const tenantPrefixes = (tenantId: string): ReadonlyArray<string> => [
  `origins/${tenantId}/`,
  `renditions/${tenantId}/`,
  `text-tracks/${tenantId}/`,
  `chunks/${tenantId}/`,
];

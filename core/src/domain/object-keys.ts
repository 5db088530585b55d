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

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

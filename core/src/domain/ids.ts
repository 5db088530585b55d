import { Brand } from "effect";

/*
 * Identifiers of the four things every tenant-scoped call names, branded so that the type checker
 * refuses one where another is meant: `assets.get(tenantId, assetId)` cannot take them swapped.
 * At run time each is the plain string the Ids port minted; the brand costs nothing. Where an id
 * comes from outside (a path, a token's claim, a stored row), the decode or the adapter that
 * read it says what it is with these constructors.
 */

export type TenantId = string & Brand.Brand<"TenantId">;
export const TenantId = Brand.nominal<TenantId>();

export type AssetId = string & Brand.Brand<"AssetId">;
export const AssetId = Brand.nominal<AssetId>();

export type UploadId = string & Brand.Brand<"UploadId">;
export const UploadId = Brand.nominal<UploadId>();

/** A playback session's id (the `sid` its token carries). */
export type PlaybackSessionId = string & Brand.Brand<"PlaybackSessionId">;
export const PlaybackSessionId = Brand.nominal<PlaybackSessionId>();

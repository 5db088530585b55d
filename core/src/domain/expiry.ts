/** A credential or session that lives until `expires_at`, unless something ends it before. */
export interface Expiring {
  readonly created_at: number;
  readonly expires_at: number;
}

/**
 * Where an expiring record stands at `now`: `ended` once `endedAt` is set (revoked, used, closed),
 * else expired from `expires_at` on (the instant itself included), else `live`. One rule for
 * every such record, so that no two disagree about the boundary.
 */
export const expiryState = <Ended extends string, Live extends string>(
  record: Expiring,
  endedAt: number | null,
  now: number,
  names: { readonly ended: Ended; readonly live: Live },
): Ended | Live | "expired" =>
  endedAt !== null ? names.ended : record.expires_at <= now ? "expired" : names.live;

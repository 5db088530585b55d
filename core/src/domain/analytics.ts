import type { AssetId, TenantId } from "./ids.js";
import { exitedBeforeStart, type PlaybackView } from "./playback-view.js";

/** The metrics of playback analytics (DECISIONS "Playback analytics"). */
export const ANALYTICS_METRICS = [
  "views",
  "playing_time_ms",
  "startup_time_ms",
  "rebuffer_percentage",
  "rebuffer_frequency",
  "playback_failure_percentage",
  "exits_before_video_start",
] as const;
export type AnalyticsMetric = (typeof ANALYTICS_METRICS)[number];

export const ANALYTICS_INTERVALS = ["hour", "day"] as const;
export type AnalyticsInterval = (typeof ANALYTICS_INTERVALS)[number];

export const ANALYTICS_GROUPS = ["asset", "rendition", "player_version"] as const;
export type AnalyticsGroup = (typeof ANALYTICS_GROUPS)[number];

export const INTERVAL_MS: Record<AnalyticsInterval, number> = { hour: 3_600_000, day: 86_400_000 };

/** The longest range a query may span. */
export const MAX_ANALYTICS_RANGE_MS = 90 * 86_400_000;

/** The startup-time percentiles answered, as fractions. */
export const STARTUP_PERCENTILES = [0.5, 0.9, 0.95] as const;

/**
 * The views a query reads: a tenant's, whose first event was received in [from, to), of one asset
 * or all, counted per bucket (UTC hours or days, each named by its start) and per group.
 */
export interface ViewQuery {
  readonly tenantId: TenantId;
  readonly from: number;
  readonly to: number;
  readonly assetId?: AssetId | undefined;
  readonly interval?: AnalyticsInterval | undefined;
  readonly groupBy?: AnalyticsGroup | undefined;
}

/** Where a row of an answer belongs: its bucket and group, when the query asked for them. */
export interface ViewCell {
  readonly bucket?: number;
  /** The group's value; null for views that never named one (a rendition, a player version). */
  readonly group?: string | null;
}

/** The sums over the views of one cell. */
export interface ViewTotals extends ViewCell {
  readonly views: number;
  readonly playing_ms: number;
  readonly stall_ms: number;
  readonly stalls: number;
  readonly failures: number;
  readonly exits: number;
}

/** Startup-time percentiles of the views of one cell that have a startup time, in STARTUP_PERCENTILES' order. */
export interface ViewPercentiles extends ViewCell {
  readonly values: ReadonlyArray<number>;
}

export interface StartupPercentiles {
  readonly p50: number;
  readonly p90: number;
  readonly p95: number;
}

export type AnalyticsValue = number | StartupPercentiles | null;

/** A metric from the totals of a cell; null where its denominator is zero. */
export const metricOfTotals = (
  metric: Exclude<AnalyticsMetric, "startup_time_ms">,
  t: ViewTotals,
): number | null => {
  switch (metric) {
    case "views":
      return t.views;
    case "playing_time_ms":
      return t.playing_ms;
    case "exits_before_video_start":
      return t.exits;
    case "playback_failure_percentage":
      return t.views === 0 ? null : (100 * t.failures) / t.views;
    case "rebuffer_percentage":
      return t.playing_ms + t.stall_ms === 0 ? null : (100 * t.stall_ms) / (t.playing_ms + t.stall_ms);
    case "rebuffer_frequency":
      return t.playing_ms === 0 ? null : t.stalls / (t.playing_ms / 60_000);
  }
};

/** Nearest rank: the smallest value with at least fraction `p` of the values at or below it. */
export const nearestRank = (sorted: ReadonlyArray<number>, p: number): number => {
  const rank = Math.max(1, Math.ceil(p * sorted.length));
  return sorted[rank - 1] as number;
};

/**
 * Startup times are kept as counts per bucket of a log histogram (rollups cannot keep every value):
 * bucket 0 holds times below 1 ms, bucket b >= 1 the times in [γ^(b-1), γ^b). The Postgres
 * adapter computes the same bucket in SQL (`startup_bucket`, dividing by this very constant).
 */
export const STARTUP_BUCKET_GROWTH = 1.02;
export const LN_STARTUP_BUCKET_GROWTH = Math.log(STARTUP_BUCKET_GROWTH);
/** The last bucket (the largest smallint): only times past 1e281 ms share it. */
export const MAX_STARTUP_BUCKET = 32_767;

export const startupBucket = (ms: number): number =>
  ms < 1 ? 0 : Math.min(MAX_STARTUP_BUCKET, 1 + Math.floor(Math.log(ms) / LN_STARTUP_BUCKET_GROWTH));

const bucketValues: number[] = [];

/**
 * The value a bucket answers for. For [L, γL) that is 2γL/(γ+1), the point as far, relatively,
 * from both ends: any time of the bucket is within (γ-1)/(γ+1) = 0.99% of it, where the lower
 * end or the midpoint would be up to 2% or 1% off. Bucket 0 answers 0 (times below 1 ms).
 */
export const startupBucketValue = (bucket: number): number => {
  // Computed once per bucket: the same double every time, however the engine compiles `**`.
  let value = bucketValues[bucket];
  if (value === undefined) {
    value = bucket === 0 ? 0 : (2 * STARTUP_BUCKET_GROWTH ** bucket) / (STARTUP_BUCKET_GROWTH + 1);
    bucketValues[bucket] = value;
  }
  return value;
};

/**
 * STARTUP_PERCENTILES by nearest rank from bucket counts, ordered by bucket: each the value of
 * the first bucket at which the running count reaches the rank. Null when the counts sum to 0.
 */
export const percentilesOfBuckets = (
  counts: ReadonlyArray<readonly [bucket: number, count: number]>,
): number[] | null => {
  const total = counts.reduce((n, [, count]) => n + count, 0);
  if (total <= 0) return null;
  return STARTUP_PERCENTILES.map((p) => {
    const rank = Math.max(1, Math.ceil(p * total));
    let seen = 0;
    for (const [bucket, count] of counts) {
      seen += count;
      if (seen >= rank) return startupBucketValue(bucket);
    }
    return startupBucketValue(counts[counts.length - 1]?.[0] ?? 0);
  });
};

/** The cell a view falls in, for a query's interval and group. */
export const cellOf = (view: PlaybackView, query: ViewQuery): ViewCell => ({
  ...(query.interval
    ? { bucket: view.first_received_at - (view.first_received_at % INTERVAL_MS[query.interval]) }
    : {}),
  ...(query.groupBy
    ? {
        group:
          query.groupBy === "asset"
            ? view.asset_id
            : query.groupBy === "rendition"
              ? view.rendition
              : view.player_version,
      }
    : {}),
});

/** Whether a view is one a query reads. */
export const viewMatches = (view: PlaybackView, query: ViewQuery) =>
  view.tenant_id === query.tenantId &&
  view.first_received_at >= query.from &&
  view.first_received_at < query.to &&
  (query.assetId === undefined || view.asset_id === query.assetId);

const cellKey = (cell: ViewCell) => JSON.stringify([cell.bucket ?? null, cell.group ?? null]);

/** Cells in order: by bucket, then by group (null first). */
export const byCell = (a: ViewCell, b: ViewCell) =>
  (a.bucket ?? 0) - (b.bucket ?? 0) ||
  (a.group === b.group ? 0 : a.group == null ? -1 : b.group == null ? 1 : a.group < b.group ? -1 : 1);

/** The totals of a query over views in hand (the memory adapter's way; SQL does the same sums). */
export const totalsOfViews = (views: Iterable<PlaybackView>, query: ViewQuery): ViewTotals[] => {
  const cells = new Map<string, { -readonly [K in keyof ViewTotals]: ViewTotals[K] }>();
  for (const view of views) {
    if (!viewMatches(view, query)) continue;
    const cell = cellOf(view, query);
    const key = cellKey(cell);
    let t = cells.get(key);
    if (t === undefined) {
      t = { ...cell, views: 0, playing_ms: 0, stall_ms: 0, stalls: 0, failures: 0, exits: 0 };
      cells.set(key, t);
    }
    t.views++;
    t.playing_ms += view.playing_ms;
    t.stall_ms += view.stall_ms;
    t.stalls += view.stalls;
    if (view.failed) t.failures++;
    if (exitedBeforeStart(view)) t.exits++;
  }
  return [...cells.values()].sort(byCell);
};

/**
 * The startup-time percentiles of a query over views in hand, from the buckets of their startup
 * times (`percentilesOfBuckets`): the values the Postgres adapter answers from its rollups.
 */
export const percentilesOfViews = (views: Iterable<PlaybackView>, query: ViewQuery): ViewPercentiles[] => {
  const cells = new Map<string, { cell: ViewCell; counts: Map<number, number> }>();
  for (const view of views) {
    if (!viewMatches(view, query) || view.startup_ms === null) continue;
    const cell = cellOf(view, query);
    const key = cellKey(cell);
    let c = cells.get(key);
    if (c === undefined) {
      c = { cell, counts: new Map() };
      cells.set(key, c);
    }
    const bucket = startupBucket(view.startup_ms);
    c.counts.set(bucket, (c.counts.get(bucket) ?? 0) + 1);
  }
  return [...cells.values()]
    .map(({ cell, counts }) => ({
      ...cell,
      values: percentilesOfBuckets([...counts].sort(([a], [b]) => a - b)) ?? [],
    }))
    .sort(byCell);
};

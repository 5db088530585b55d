import {
  type PlaybackView,
  STARTUP_PERCENTILES,
  type ViewPercentiles,
  type ViewQuery,
  type ViewTotals,
} from "@vod/core";
import { APP_ROLE_SQL, type Scope, type ScopedSql, tenantScope } from "./tenancy.js";

/**
 * Migration 13: playback views, one row per tenant and playback session, folded from telemetry in
 * the transaction that stores the events (`foldViewEvent`). Analytics read these rows only; the
 * index holds every column a query sums, so a query over a range reads the index alone.
 * Telemetry's scope may read, insert and update views of any tenant, as it inserts their events;
 * the retention sweep may read and delete events received before its cutoff, nothing else. The
 * BRIN index finds old events at almost no cost to each insert (rows arrive in time order).
 */
export const playbackViewsSql = `
CREATE TABLE playback_views (
  tenant_id text NOT NULL,
  session_id text NOT NULL,
  asset_id text NOT NULL,
  player_version text,
  rendition text,
  first_received_at bigint NOT NULL,
  last_ts_ms double precision NOT NULL,
  play_ts_ms double precision,
  state text NOT NULL,
  played boolean NOT NULL,
  started boolean NOT NULL,
  failed boolean NOT NULL,
  startup_ms double precision,
  playing_ms double precision NOT NULL,
  stall_ms double precision NOT NULL,
  stalls integer NOT NULL,
  PRIMARY KEY (tenant_id, session_id)
);
CREATE INDEX playback_views_time_idx ON playback_views (tenant_id, first_received_at)
  INCLUDE (asset_id, rendition, player_version, played, started, failed, startup_ms, playing_ms, stall_ms, stalls);
CREATE INDEX playback_views_asset_idx ON playback_views (tenant_id, asset_id, first_received_at);
ALTER TABLE playback_views ENABLE ROW LEVEL SECURITY;
ALTER TABLE playback_views FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON playback_views FOR SELECT
  USING (tenant_id = current_setting('vod.tenant_id', true));
CREATE POLICY telemetry_views ON playback_views
  USING (current_setting('vod.telemetry', true) = 'ingest')
  WITH CHECK (current_setting('vod.telemetry', true) = 'ingest');
CREATE INDEX telemetry_events_received_idx ON telemetry_events USING brin (received_at);
CREATE POLICY telemetry_retention_read ON telemetry_events FOR SELECT
  USING (current_setting('vod.telemetry', true) = 'retention'
    AND received_at < nullif(current_setting('vod.expired_before', true), '')::bigint);
CREATE POLICY telemetry_retention ON telemetry_events FOR DELETE
  USING (current_setting('vod.telemetry', true) = 'retention'
    AND received_at < nullif(current_setting('vod.expired_before', true), '')::bigint);
DO $$
BEGIN
  EXECUTE format('GRANT SELECT, INSERT, UPDATE ON playback_views TO %I', ${APP_ROLE_SQL});
  EXECUTE format('GRANT DELETE ON telemetry_events TO %I', ${APP_ROLE_SQL});
END $$;
`;

/** The columns of playback_views, named as the view's fields, with the type of each array. */
const VIEW_COLUMNS = [
  ["tenant_id", "text"],
  ["session_id", "text"],
  ["asset_id", "text"],
  ["player_version", "text"],
  ["rendition", "text"],
  ["first_received_at", "int8"],
  ["last_ts_ms", "float8"],
  ["play_ts_ms", "float8"],
  ["state", "text"],
  ["played", "bool"],
  ["started", "bool"],
  ["failed", "bool"],
  ["startup_ms", "float8"],
  ["playing_ms", "float8"],
  ["stall_ms", "float8"],
  ["stalls", "int4"],
] as const satisfies ReadonlyArray<readonly [keyof PlaybackView, string]>;

const VIEW_NAMES = VIEW_COLUMNS.map(([name]) => name).join(", ");

/** The views of the sessions given (tenant and session id arrays), locked until the transaction ends. */
export const LOCK_VIEWS = `SELECT ${VIEW_NAMES} FROM playback_views
WHERE (tenant_id, session_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))
ORDER BY tenant_id, session_id FOR UPDATE`;

/**
 * Rows of new views first, so that two nodes folding the first events of one view take turns on
 * its row lock instead of both inserting it; the fold then reads every row under its lock.
 */
export const CLAIM_VIEWS = `INSERT INTO playback_views (${VIEW_NAMES})
SELECT t.tenant_id, t.session_id, t.asset_id, NULL, NULL, t.first_received_at, 0, NULL, 'new', false, false, false, NULL, 0, 0, 0
FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[]) AS t (tenant_id, session_id, asset_id, first_received_at)
ORDER BY 1, 2
ON CONFLICT (tenant_id, session_id) DO NOTHING`;

/** A claimed row no event has been folded into yet: the fold starts the view afresh. */
export const isClaimOnly = (row: PlaybackView) => (row.state as string) === "new";

export const STORE_VIEWS = `UPDATE playback_views v SET ${VIEW_COLUMNS.filter(
  ([n]) => n !== "tenant_id" && n !== "session_id",
)
  .map(([n]) => `${n} = t.${n}`)
  .join(", ")}
FROM unnest(${VIEW_COLUMNS.map(([, type], i) => `$${i + 1}::${type}[]`).join(", ")}) AS t (${VIEW_NAMES})
WHERE v.tenant_id = t.tenant_id AND v.session_id = t.session_id`;

export const viewArrays = (views: ReadonlyArray<PlaybackView>) =>
  VIEW_COLUMNS.map(([name]) => views.map((v) => v[name]));

/** The retention sweep's scope: events received before `cutoff`, of any tenant, and nothing else. */
export const retentionScope = (cutoff: number): Scope => ({
  role: "app",
  settings: { "vod.telemetry": "retention", "vod.expired_before": String(cutoff) },
});

/** At most this many events per statement, so that no one delete holds locks for long. */
const DELETE_CHUNK = 10_000;

const DELETE_OLD = `DELETE FROM telemetry_events WHERE id IN (
  SELECT id FROM telemetry_events WHERE received_at < $1 LIMIT ${DELETE_CHUNK})`;

export const deleteEventsBefore = async (sql: ScopedSql, cutoff: number): Promise<number> => {
  const scope = retentionScope(cutoff);
  let deleted = 0;
  for (;;) {
    const { rowCount } = await sql.query(scope, DELETE_OLD, [cutoff]);
    deleted += rowCount;
    if (rowCount < DELETE_CHUNK) return deleted;
  }
};

/** The SQL of a query's cell: bucket and group columns, and their GROUP BY. */
const cellSql = (query: ViewQuery) => {
  const select: string[] = [];
  const names: string[] = [];
  const order: string[] = [];
  if (query.interval) {
    const ms = query.interval === "hour" ? 3_600_000 : 86_400_000;
    select.push(`first_received_at - first_received_at % ${ms} AS bucket`);
    names.push("bucket");
    order.push("bucket");
  }
  if (query.groupBy) {
    const column = query.groupBy === "asset" ? "asset_id" : query.groupBy;
    select.push(`${column} AS "group"`);
    names.push(column);
    // Groups in code-point order, as the memory adapter sorts them, whatever the collation.
    order.push(`${column} COLLATE "C" NULLS FIRST`);
  }
  return {
    select: select.map((s) => `${s}, `).join(""),
    groupBy: names.length > 0 ? `GROUP BY ${names.join(", ")} ORDER BY ${order.join(", ")}` : "",
  };
};

const whereSql = (query: ViewQuery) =>
  `tenant_id = $1 AND first_received_at >= $2 AND first_received_at < $3${query.assetId === undefined ? "" : " AND asset_id = $4"}`;

const paramsOf = (query: ViewQuery) =>
  query.assetId === undefined
    ? [query.tenantId, query.from, query.to]
    : [query.tenantId, query.from, query.to, query.assetId];

/** Drops the bucket and group keys a query did not ask for (SQL rows carry no undefined). */
const cellOf = <R extends { bucket?: number; group?: string | null }>(row: R, query: ViewQuery): R => {
  const { bucket, group, ...rest } = row;
  return {
    ...(query.interval ? { bucket: Number(bucket) } : {}),
    ...(query.groupBy ? { group: group ?? null } : {}),
    ...rest,
  } as R;
};

export const viewTotals = async (sql: ScopedSql, query: ViewQuery): Promise<ViewTotals[]> => {
  const cell = cellSql(query);
  const { rows } = await sql.query<ViewTotals>(
    tenantScope(query.tenantId),
    `SELECT ${cell.select}count(*)::int8 AS views, coalesce(sum(playing_ms), 0)::float8 AS playing_ms,
       coalesce(sum(stall_ms), 0)::float8 AS stall_ms, coalesce(sum(stalls), 0)::int8 AS stalls,
       count(*) FILTER (WHERE failed)::int8 AS failures,
       count(*) FILTER (WHERE played AND NOT started)::int8 AS exits
     FROM playback_views WHERE ${whereSql(query)} ${cell.groupBy}`,
    paramsOf(query),
  );
  // Without a cell, an aggregate answers one row even over no views: as in memory, no row then.
  return rows.filter((r) => r.views > 0).map((r) => cellOf(r, query));
};

export const startupPercentiles = async (sql: ScopedSql, query: ViewQuery): Promise<ViewPercentiles[]> => {
  const cell = cellSql(query);
  const { rows } = await sql.query<{ values: number[] | null; bucket?: number; group?: string | null }>(
    tenantScope(query.tenantId),
    `SELECT ${cell.select}percentile_disc(ARRAY[${STARTUP_PERCENTILES.join(", ")}]::float8[]) WITHIN GROUP (ORDER BY startup_ms) AS values
     FROM playback_views WHERE ${whereSql(query)} AND startup_ms IS NOT NULL ${cell.groupBy}`,
    paramsOf(query),
  );
  return rows
    .filter((r): r is typeof r & { values: number[] } => r.values !== null)
    .map((r) => cellOf(r, query));
};

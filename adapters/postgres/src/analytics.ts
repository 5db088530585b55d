import {
  MAX_EVENT_GAP_MS,
  STARTUP_PERCENTILES,
  type ViewPercentiles,
  type ViewQuery,
  type ViewTotals,
} from "@vod/core";
import { APP_ROLE_SQL, type Scope, type ScopedSql, tenantScope } from "./tenancy.js";

/**
 * Migration 13: playback views, one row per tenant and playback session, folded from telemetry by
 * the statement that stores the events. fold_view is the core's `foldViewEvent` in PL/pgSQL, so
 * that events and views go in one statement (one round trip, as raw events alone took) rather
 * than a transaction that reads the views, folds them here and writes them back; the contract
 * tests hold both folds to the same values. Analytics read these rows only; the
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
CREATE TYPE view_event AS (event text, ts_ms double precision, received_at bigint, player_version text, rendition text, startup_ms double precision);
CREATE FUNCTION fold_view(v playback_views, t text, s text, a text, events view_event[]) RETURNS playback_views
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  e view_event;
  gap double precision;
  elapsed double precision;
BEGIN
  FOREACH e IN ARRAY events LOOP
    IF v.session_id IS NULL THEN
      v := ROW(t, s, a, e.player_version, e.rendition, e.received_at, e.ts_ms, NULL, 'idle', false, false, false, NULL, 0, 0, 0)::playback_views;
    END IF;
    gap := e.ts_ms - v.last_ts_ms;
    elapsed := CASE WHEN gap > 0 AND gap <= ${MAX_EVENT_GAP_MS} THEN gap ELSE 0 END;
    v.player_version := coalesce(v.player_version, e.player_version);
    v.rendition := coalesce(v.rendition, e.rendition);
    v.first_received_at := least(v.first_received_at, e.received_at);
    v.last_ts_ms := greatest(v.last_ts_ms, e.ts_ms);
    IF v.state = 'playing' THEN v.playing_ms := v.playing_ms + elapsed; END IF;
    IF v.state = 'stalled' THEN v.stall_ms := v.stall_ms + elapsed; END IF;
    CASE e.event
      WHEN 'play' THEN
        v.played := true;
        v.play_ts_ms := coalesce(v.play_ts_ms, e.ts_ms);
        IF v.started AND v.state NOT IN ('stalled', 'playing') THEN v.state := 'playing'; v.failed := false; END IF;
      WHEN 'first_frame' THEN
        IF NOT v.started THEN
          v.started := true;
          v.startup_ms := coalesce(e.startup_ms,
            CASE WHEN v.play_ts_ms IS NULL THEN NULL ELSE greatest(0, e.ts_ms - v.play_ts_ms) END);
        END IF;
        v.state := 'playing';
        v.failed := false;
      WHEN 'pause' THEN
        IF v.state = 'playing' THEN v.state := 'paused'; END IF;
      WHEN 'stall_start' THEN
        IF v.started AND v.state <> 'stalled' THEN v.state := 'stalled'; v.stalls := v.stalls + 1; END IF;
      WHEN 'stall_end' THEN
        IF v.state = 'stalled' THEN v.state := 'playing'; v.failed := false; END IF;
      WHEN 'error' THEN
        v.state := 'errored';
        v.failed := true;
      WHEN 'ended' THEN
        v.state := 'ended';
      ELSE NULL;
    END CASE;
  END LOOP;
  RETURN v;
END $$;
CREATE INDEX playback_views_time_idx ON playback_views (tenant_id, first_received_at)
  INCLUDE (asset_id, rendition, player_version, played, started, failed, startup_ms, playing_ms, stall_ms, stalls);
CREATE INDEX playback_views_asset_idx ON playback_views (tenant_id, asset_id, first_received_at);
ALTER TABLE playback_views ENABLE ROW LEVEL SECURITY;
ALTER TABLE playback_views FORCE ROW LEVEL SECURITY;
-- A tenant's scope sees and writes its own views only, as on every tenant table; the purge of a
-- deleted tenant deletes them as the tables' owner in that scope (the app role has no DELETE).
CREATE POLICY tenant_isolation ON playback_views
  USING (tenant_id = current_setting('vod.tenant_id', true))
  WITH CHECK (tenant_id = current_setting('vod.tenant_id', true));
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

/** The view fields of fold_view's events (view_event), each named as the telemetry event's. */
const FOLDED = ["event", "ts_ms", "received_at", "player_version", "rendition", "startup_ms"] as const;

const VIEW_FIELDS = [
  "player_version",
  "rendition",
  "first_received_at",
  "last_ts_ms",
  "play_ts_ms",
  "state",
  "played",
  "started",
  "failed",
  "startup_ms",
  "playing_ms",
  "stall_ms",
  "stalls",
] as const;

/**
 * The events of a batch, given as one array per column of `columns` (`$1`...), stored in order and
 * folded into their views: a new view is folded from nothing, an existing one from its row, under
 * the row lock ON CONFLICT takes (views in key order, so that concurrent statements do not
 * deadlock). A view the statement already sees is inserted as a stand-in folded from one event
 * only: views are never deleted, so it conflicts, and each event is folded once. A view inserted
 * by another statement meanwhile conflicts too, and is folded from its row.
 */
export const insertWithViews = (columns: ReadonlyArray<readonly [string, string]>) => {
  const names = columns.map(([name]) => name).join(", ");
  return `WITH ev AS (
  SELECT * FROM unnest(${columns.map(([, type], i) => `$${i + 1}::${type}[]`).join(", ")}) WITH ORDINALITY AS t (${names}, ord)
), stored AS (
  INSERT INTO telemetry_events (${names})
  SELECT ${columns.map(([name]) => (name === "extra" ? "extra::jsonb" : name)).join(", ")} FROM ev
), batch AS (
  SELECT tenant_id, session_id, (array_agg(asset_id ORDER BY ord))[1] AS asset_id,
    array_agg(ROW(${FOLDED.join(", ")})::view_event ORDER BY ord) AS events
  FROM ev GROUP BY tenant_id, session_id
)
INSERT INTO playback_views AS v
SELECT f.* FROM batch b
LEFT JOIN playback_views cur ON cur.tenant_id = b.tenant_id AND cur.session_id = b.session_id
CROSS JOIN LATERAL fold_view(NULL, b.tenant_id, b.session_id, b.asset_id,
  CASE WHEN cur.session_id IS NULL THEN b.events ELSE b.events[1:1] END) f
ORDER BY b.tenant_id, b.session_id
ON CONFLICT (tenant_id, session_id) DO UPDATE SET (${VIEW_FIELDS.join(", ")}) = (
  SELECT ${VIEW_FIELDS.map((f) => `f.${f}`).join(", ")}
  FROM batch b CROSS JOIN LATERAL fold_view(v, b.tenant_id, b.session_id, b.asset_id, b.events) f
  WHERE b.tenant_id = excluded.tenant_id AND b.session_id = excluded.session_id)`;
};

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

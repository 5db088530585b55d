import {
  type AnalyticsInterval,
  INTERVAL_MS,
  LN_STARTUP_BUCKET_GROWTH,
  MAX_EVENT_GAP_MS,
  MAX_STARTUP_BUCKET,
  percentilesOfBuckets,
  type ViewPercentiles,
  type ViewQuery,
  type ViewTotals,
} from "@vod/core";
import { tenantOwnedTablesSql } from "./row-level-security.js";
import { APP_ROLE_SQL, type Scope, type ScopedSql, tenantScope } from "./tenancy.js";

/**
 * fold_view: the core's `foldViewEvent` in PL/pgSQL, from the view `v` (NULL for a session's
 * first events: then made from its tenant `t`, session `s` and asset `a`). The view's fields are
 * held in locals while the events fold and written to `v` once at the end: assigning a field of
 * a row variable costs more than a local, and the fold runs per event (about a third less time
 * per batch of heartbeats, measured). Fields are assigned by name, so the function fits the row
 * type before and after migration 17 added prev_*.
 */
const foldViewSql = (
  create: string,
) => `${create} fold_view(v playback_views, t text, s text, a text, events view_event[]) RETURNS playback_views
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  e view_event;
  gap double precision;
  fresh boolean := v.session_id IS NULL;
  pv text := v.player_version;
  rn text := v.rendition;
  first_at bigint := v.first_received_at;
  last_ts double precision := v.last_ts_ms;
  play_ts double precision := v.play_ts_ms;
  st text := v.state;
  was_played boolean := v.played;
  was_started boolean := v.started;
  is_failed boolean := v.failed;
  startup double precision := v.startup_ms;
  playing double precision := v.playing_ms;
  stalled double precision := v.stall_ms;
  n_stalls integer := v.stalls;
BEGIN
  IF events IS NULL OR cardinality(events) = 0 THEN RETURN v; END IF;
  FOREACH e IN ARRAY events LOOP
    IF fresh THEN
      pv := e.player_version; rn := e.rendition; first_at := e.received_at; last_ts := e.ts_ms;
      st := 'idle'; was_played := false; was_started := false; is_failed := false;
      playing := 0; stalled := 0; n_stalls := 0; play_ts := NULL; startup := NULL;
      fresh := false;
    END IF;
    gap := e.ts_ms - last_ts;
    IF gap > 0 AND gap <= ${MAX_EVENT_GAP_MS} THEN
      IF st = 'playing' THEN playing := playing + gap;
      ELSIF st = 'stalled' THEN stalled := stalled + gap;
      END IF;
    END IF;
    IF pv IS NULL THEN pv := e.player_version; END IF;
    IF rn IS NULL THEN rn := e.rendition; END IF;
    IF e.received_at < first_at THEN first_at := e.received_at; END IF;
    IF e.ts_ms > last_ts THEN last_ts := e.ts_ms; END IF;
    -- Heartbeats, the most of a view's events, only move the clock.
    IF e.event <> 'heartbeat' THEN
      CASE e.event
        WHEN 'play' THEN
          was_played := true;
          IF play_ts IS NULL THEN play_ts := e.ts_ms; END IF;
          IF was_started AND st NOT IN ('stalled', 'playing') THEN st := 'playing'; is_failed := false; END IF;
        WHEN 'first_frame' THEN
          IF NOT was_started THEN
            was_started := true;
            startup := coalesce(e.startup_ms,
              CASE WHEN play_ts IS NULL THEN NULL ELSE greatest(0, e.ts_ms - play_ts) END);
          END IF;
          st := 'playing';
          is_failed := false;
        WHEN 'pause' THEN
          IF st = 'playing' THEN st := 'paused'; END IF;
        WHEN 'stall_start' THEN
          IF was_started AND st <> 'stalled' THEN st := 'stalled'; n_stalls := n_stalls + 1; END IF;
        WHEN 'stall_end' THEN
          IF st = 'stalled' THEN st := 'playing'; is_failed := false; END IF;
        WHEN 'error' THEN
          st := 'errored';
          is_failed := true;
        WHEN 'ended' THEN
          st := 'ended';
        ELSE NULL;
      END CASE;
    END IF;
  END LOOP;
  IF v.session_id IS NULL THEN v.tenant_id := t; v.session_id := s; v.asset_id := a; END IF;
  v.player_version := pv; v.rendition := rn; v.first_received_at := first_at; v.last_ts_ms := last_ts;
  v.play_ts_ms := play_ts; v.state := st; v.played := was_played; v.started := was_started;
  v.failed := is_failed; v.startup_ms := startup; v.playing_ms := playing; v.stall_ms := stalled;
  v.stalls := n_stalls;
  RETURN v;
END $$;
`;

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
${foldViewSql("CREATE FUNCTION")}CREATE INDEX playback_views_time_idx ON playback_views (tenant_id, first_received_at)
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

/** What a view contributes to the rollups: the fields they sum, and those their keys come from. */
const PREV = [
  "first_received_at",
  "player_version",
  "rendition",
  "played",
  "started",
  "failed",
  "startup_ms",
  "playing_ms",
  "stall_ms",
  "stalls",
] as const;

const VIEW_TYPES: Record<(typeof PREV)[number], string> = {
  first_received_at: "bigint",
  player_version: "text",
  rendition: "text",
  played: "boolean",
  started: "boolean",
  failed: "boolean",
  startup_ms: "double precision",
  playing_ms: "double precision",
  stall_ms: "double precision",
  stalls: "integer",
};

const HOUR_MS = INTERVAL_MS.hour;
const DAY_MS = INTERVAL_MS.day;

const ROLLUP_TABLES = ["playback_rollups", "playback_startup_rollups"];

/** A rollup's key, in its unique index's order: the order rows are locked in, too. */
const KEY = "tenant_id, span, asset_scope, dimension, period, value";

/**
 * Rows of `sides` (tenant_id, asset_id, first_received_at, rendition, player_version and
 * `columns`) under each of their rollup keys: 2 spans × 6 keys. The asset filter without a group
 * reads ('', 'asset', asset).
 */
const keyedSql = (
  sides: string,
  columns: ReadonlyArray<string>,
) => `SELECT s.tenant_id, p.span, k.asset_scope,
    k.dimension, s.first_received_at - s.first_received_at % p.ms AS period, k.value, ${columns.map((c) => `s.${c}`).join(", ")}
  FROM (${sides}) s
  CROSS JOIN (VALUES ('hour', ${HOUR_MS}::int8), ('day', ${DAY_MS}::int8)) AS p (span, ms)
  CROSS JOIN LATERAL (VALUES ('', '', NULL), ('', 'asset', s.asset_id), ('', 'rendition', s.rendition),
    ('', 'player_version', s.player_version), (s.asset_id, 'rendition', s.rendition),
    (s.asset_id, 'player_version', s.player_version)) AS k (asset_scope, dimension, value)`;

const SUMS = ["views", "playing_ms", "stall_ms", "stalls", "failures", "exits"];

/**
 * Adds `sides`, each a view's signed sums (SUMS), to playback_rollups under their keys, in key
 * order, leaving out keys whose sums come to zero.
 */
const rollupTotalsSql = (sides: string) => `INSERT INTO playback_rollups AS r (${KEY}, ${SUMS.join(", ")})
  SELECT * FROM (
    SELECT ${KEY}, sum(views)::int8 AS views, sum(playing_ms) AS playing_ms, sum(stall_ms) AS stall_ms,
      sum(stalls)::int8 AS stalls, sum(failures)::int8 AS failures, sum(exits)::int8 AS exits
    FROM (${keyedSql(sides, SUMS)}) k GROUP BY ${KEY}) d
  WHERE views <> 0 OR playing_ms <> 0 OR stall_ms <> 0 OR stalls <> 0 OR failures <> 0 OR exits <> 0
  ORDER BY ${KEY}
  ON CONFLICT (${KEY}) DO UPDATE SET ${SUMS.map((c) => `${c} = r.${c} + excluded.${c}`).join(", ")}`;

/** Adds `sides`, each a view's startup bucket and a signed count `n`, to playback_startup_rollups. */
const rollupStartupSql = (sides: string) => `INSERT INTO playback_startup_rollups AS h (${KEY}, bucket, count)
  SELECT ${KEY}, bucket, sum(n)::int8 FROM (${keyedSql(sides, ["bucket", "n"])}) k
  GROUP BY ${KEY}, bucket HAVING sum(n) <> 0
  ORDER BY ${KEY}, bucket
  ON CONFLICT (${KEY}, bucket) DO UPDATE SET count = h.count + excluded.count`;

/** A view's keys, and its sums as a view counts them. */
const WHOLE = `tenant_id, asset_id, first_received_at, rendition, player_version, 1 AS views, playing_ms,
  stall_ms, stalls, failed::int AS failures, (played AND NOT started)::int AS exits`;

/**
 * Builds the rollups of every stored view, into empty rollups: what migration 17 runs on the
 * views already there, and what the analytics bench runs after inserting its generated views.
 */
export const buildRollupsSql = `WITH totals AS (
  ${rollupTotalsSql(`SELECT ${WHOLE} FROM playback_views`)}
)
${rollupStartupSql(`SELECT tenant_id, asset_id, first_received_at, rendition, player_version,
    startup_bucket(startup_ms) AS bucket, 1 AS n
  FROM playback_views WHERE startup_ms IS NOT NULL`)}`;

/**
 * What the views a statement changed (`changes`: the view with prev_* and `same_keys`) add to the
 * rollups. A view under the same keys as before (the common case: a batch of heartbeats) is one
 * row of differences; a new view is all of itself; one that moved to other keys (a rendition
 * named late, an earlier first event) is all of itself under the new keys and minus all it
 * contributed under the old. The histogram changes only where the bucket or the keys did.
 */
const CHANGED_SUMS = `SELECT tenant_id, asset_id, first_received_at, rendition, player_version, 0 AS views,
      playing_ms - prev_playing_ms AS playing_ms, stall_ms - prev_stall_ms AS stall_ms,
      stalls - prev_stalls AS stalls, failed::int - prev_failed::int AS failures,
      (played AND NOT started)::int - (prev_played AND NOT prev_started)::int AS exits
    FROM changes WHERE same_keys AND (playing_ms, stall_ms, stalls, failed, played, started)
      IS DISTINCT FROM (prev_playing_ms, prev_stall_ms, prev_stalls, prev_failed, prev_played, prev_started)
    UNION ALL
    SELECT ${WHOLE} FROM changes WHERE NOT same_keys
    UNION ALL
    SELECT tenant_id, asset_id, prev_first_received_at, prev_rendition, prev_player_version, -1,
      -prev_playing_ms, -prev_stall_ms, -prev_stalls, -prev_failed::int, -(prev_played AND NOT prev_started)::int
    FROM changes WHERE NOT same_keys AND prev_first_received_at IS NOT NULL`;

const MOVED_BUCKET = `NOT (same_keys AND startup_bucket(startup_ms) IS NOT DISTINCT FROM startup_bucket(prev_startup_ms))`;

const CHANGED_BUCKETS = `SELECT tenant_id, asset_id, first_received_at, rendition, player_version,
      startup_bucket(startup_ms) AS bucket, 1 AS n
    FROM changes WHERE startup_ms IS NOT NULL AND ${MOVED_BUCKET}
    UNION ALL
    SELECT tenant_id, asset_id, prev_first_received_at, prev_rendition, prev_player_version,
      startup_bucket(prev_startup_ms), -1
    FROM changes WHERE prev_startup_ms IS NOT NULL AND ${MOVED_BUCKET}`;

/**
 * Migration 17: rollups of the views, kept by the statement that folds them (`insertWithViews`),
 * so that a query reads the views only for the partial hours at its range's edges.
 *
 * playback_rollups holds the sums of the views of a tenant whose first event was received in one
 * UTC hour or day (`span`, `period` its start), under six keys per view: asset_scope '' (all
 * assets) or the view's asset, `dimension` '' (no group), 'asset', 'rendition' or
 * 'player_version', and `value` the view's value of that dimension. A view that never named a
 * rendition or a player version counts under value NULL: the key's unique index treats NULLs as
 * equal (NULLS NOT DISTINCT), so NULL is a value of its own that no text collides with (the
 * telemetry request allows '' for both). Key order: tenant, span, scope, dimension, then period
 * before value, so that every query reads one range of the index whatever its range of time.
 * playback_startup_rollups counts the views' startup times per bucket of the core's log
 * histogram (`startupBucket`; `startup_bucket` here divides by the same constant).
 *
 * The views' time index now holds keys only: rollups are where sums are read, and a view's
 * update then changes no indexed column (its first_received_at only when a batch arrives out
 * of order), so with room left on its page (fillfactor) the update is HOT: no index insert.
 * prev_* keep what a view contributed before the latest statement that changed it (NULL once
 * inserted): that statement sets them from the row it locked and returns both, and the rollups
 * take the difference. Rows stored before this migration need no prev_*: every update sets them
 * before they are read. Same policies as playback_views.
 */
export const playbackRollupsSql = `
ALTER TABLE playback_views
  ${PREV.map((f) => `ADD COLUMN prev_${f} ${VIEW_TYPES[f]}`).join(",\n  ")};
ALTER TABLE playback_views SET (fillfactor = 70);
DROP INDEX playback_views_time_idx;
CREATE INDEX playback_views_time_idx ON playback_views (tenant_id, first_received_at);
${foldViewSql("CREATE OR REPLACE FUNCTION")}
CREATE FUNCTION startup_bucket(ms double precision) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT (CASE WHEN ms < 1 THEN 0
    ELSE least(${MAX_STARTUP_BUCKET}, 1 + floor(ln(ms) / ${LN_STARTUP_BUCKET_GROWTH}::float8)) END)::smallint
$$;
CREATE TABLE playback_rollups (
  tenant_id text NOT NULL,
  span text NOT NULL CHECK (span IN ('hour', 'day')),
  asset_scope text NOT NULL,
  dimension text NOT NULL CHECK (dimension IN ('', 'asset', 'rendition', 'player_version')),
  period bigint NOT NULL,
  value text,
  views bigint NOT NULL,
  playing_ms double precision NOT NULL,
  stall_ms double precision NOT NULL,
  stalls bigint NOT NULL,
  failures bigint NOT NULL,
  exits bigint NOT NULL,
  CONSTRAINT playback_rollups_key UNIQUE NULLS NOT DISTINCT (${KEY})
) WITH (fillfactor = 70);
CREATE TABLE playback_startup_rollups (
  tenant_id text NOT NULL,
  span text NOT NULL CHECK (span IN ('hour', 'day')),
  asset_scope text NOT NULL,
  dimension text NOT NULL CHECK (dimension IN ('', 'asset', 'rendition', 'player_version')),
  period bigint NOT NULL,
  value text,
  bucket smallint NOT NULL,
  count bigint NOT NULL,
  CONSTRAINT playback_startup_rollups_key UNIQUE NULLS NOT DISTINCT (${KEY}, bucket)
) WITH (fillfactor = 70);
${tenantOwnedTablesSql(ROLLUP_TABLES)}
${ROLLUP_TABLES.map(
  (table) => `CREATE POLICY telemetry_views ON ${table}
  USING (current_setting('vod.telemetry', true) = 'ingest')
  WITH CHECK (current_setting('vod.telemetry', true) = 'ingest');`,
).join("\n")}
-- The views there are already: read and summed in telemetry's scope, as the tables' owner is
-- held to the policies too.
SELECT set_config('vod.telemetry', 'ingest', true);
${buildRollupsSql};
SELECT set_config('vod.telemetry', '', true);
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
 *
 * The rollups take each changed view's contribution minus what it contributed before (prev_*,
 * set from the locked row, which may be newer than this statement's snapshot when another node
 * changed it meanwhile), so a view whose rendition, player version or hour changes moves from one
 * key to the other. Rollup rows are locked in key order too, after the views, in every statement.
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
), folded AS (
  INSERT INTO playback_views AS v
  SELECT f.* FROM batch b
  LEFT JOIN playback_views cur ON cur.tenant_id = b.tenant_id AND cur.session_id = b.session_id
  CROSS JOIN LATERAL fold_view(NULL, b.tenant_id, b.session_id, b.asset_id,
    CASE WHEN cur.session_id IS NULL THEN b.events ELSE b.events[1:1] END) f
  ORDER BY b.tenant_id, b.session_id
  ON CONFLICT (tenant_id, session_id) DO UPDATE SET (${VIEW_FIELDS.join(", ")}, ${PREV.map((f) => `prev_${f}`).join(", ")}) = (
    SELECT ${VIEW_FIELDS.map((f) => `f.${f}`).join(", ")}, ${PREV.map((f) => `v.${f}`).join(", ")}
    FROM batch b CROSS JOIN LATERAL fold_view(v, b.tenant_id, b.session_id, b.asset_id, b.events) f
    WHERE b.tenant_id = excluded.tenant_id AND b.session_id = excluded.session_id)
  RETURNING v.*
), changes AS (
  SELECT *, prev_first_received_at IS NOT NULL
    AND first_received_at - first_received_at % ${HOUR_MS} = prev_first_received_at - prev_first_received_at % ${HOUR_MS}
    AND rendition IS NOT DISTINCT FROM prev_rendition
    AND player_version IS NOT DISTINCT FROM prev_player_version AS same_keys
  FROM folded
), totals AS (
  ${rollupTotalsSql(CHANGED_SUMS)}
)
${rollupStartupSql(CHANGED_BUCKETS)}`;
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

type Range = readonly [from: number, to: number];

/** Where a query's range is read from: views for partial hours, then hour and day rollups. */
export interface RangePieces {
  readonly views: ReadonlyArray<Range>;
  readonly hours: ReadonlyArray<Range>;
  readonly days: ReadonlyArray<Range>;
}

const floorTo = (t: number, size: number) => t - (((t % size) + size) % size);
const ceilTo = (t: number, size: number) => (floorTo(t, size) === t ? t : floorTo(t, size) + size);
const nonEmpty = (ranges: ReadonlyArray<Range>) => ranges.filter(([a, b]) => a < b);

/**
 * [from, to) as disjoint pieces: the partial hours at its edges from the views, the full hours
 * from hour rollups; unless the query is per hour, the full UTC days from day rollups and only the
 * full hours outside them from hour rollups.
 */
export const rangePieces = (from: number, to: number, interval?: AnalyticsInterval): RangePieces => {
  const [h0, h1] = [ceilTo(from, HOUR_MS), floorTo(to, HOUR_MS)];
  if (h0 >= h1) return { views: nonEmpty([[from, to]]), hours: [], days: [] };
  const views = nonEmpty([
    [from, h0],
    [h1, to],
  ]);
  const [d0, d1] = [ceilTo(from, DAY_MS), floorTo(to, DAY_MS)];
  if (interval === "hour" || d0 >= d1) return { views, hours: [[h0, h1]], days: [] };
  return {
    views,
    hours: nonEmpty([
      [h0, d0],
      [d1, h1],
    ]),
    days: [[d0, d1]],
  };
};

/** The rollup key a query reads, and the value it is held to (an asset filter without a group). */
const rollupKeyOf = (query: ViewQuery) => {
  if (query.groupBy === "rendition" || query.groupBy === "player_version")
    return { assetScope: query.assetId ?? "", dimension: query.groupBy, value: undefined };
  if (query.groupBy === "asset" || query.assetId !== undefined)
    return { assetScope: "", dimension: "asset", value: query.assetId };
  return { assetScope: "", dimension: "", value: undefined };
};

/**
 * One statement over a query's pieces: for each piece a SELECT of the cell's columns (`bucket`,
 * `"group"`) and `columns` of the rollups `table` or of the views, all in UNION ALL.
 */
const piecesSql = (
  query: ViewQuery,
  table: string,
  columns: { readonly rollup: string; readonly view: string; readonly viewWhere?: string },
) => {
  const params: unknown[] = [query.tenantId];
  const param = (value: unknown) => {
    params.push(value);
    return `$${params.length}`;
  };
  const pieces = rangePieces(query.from, query.to, query.interval);
  const size = query.interval ? INTERVAL_MS[query.interval] : undefined;
  // A rollup of the query's own interval is its bucket as it is: the index's order, so that the
  // server may group a series without sorting it.
  const cell = (at: string, group: string, span?: AnalyticsInterval) =>
    `${size === undefined ? "" : span === query.interval ? `${at} AS bucket, ` : `${at} - ${at} % ${size} AS bucket, `}${query.groupBy ? `${group} AS "group", ` : ""}`;
  const key = rollupKeyOf(query);
  // Parameters only where a piece uses them: the server cannot type a parameter nothing uses.
  let keyWhere: string | undefined;
  const rollupWhere = () => {
    keyWhere ??= `tenant_id = $1 AND asset_scope = ${param(key.assetScope)} AND dimension = ${param(key.dimension)}${key.value === undefined ? "" : ` AND value = ${param(key.value)}`}`;
    return keyWhere;
  };
  const selects: string[] = [];
  for (const [span, ranges] of [
    ["day", pieces.days],
    ["hour", pieces.hours],
  ] as const)
    for (const [a, b] of ranges)
      selects.push(
        `SELECT ${cell("period", "value", span)}${columns.rollup} FROM ${table}
         WHERE ${rollupWhere()} AND span = '${span}' AND period >= ${param(a)} AND period < ${param(b)}`,
      );
  const groupColumn = query.groupBy === "asset" ? "asset_id" : (query.groupBy ?? "");
  let asset: string | undefined;
  const assetWhere = () => {
    asset ??= query.assetId === undefined ? "" : ` AND asset_id = ${param(query.assetId)}`;
    return asset;
  };
  for (const [a, b] of pieces.views)
    selects.push(
      `SELECT ${cell("first_received_at", groupColumn)}${columns.view} FROM playback_views
       WHERE tenant_id = $1 AND first_received_at >= ${param(a)} AND first_received_at < ${param(b)}${assetWhere()}${columns.viewWhere ?? ""}`,
    );
  const names = [...(size === undefined ? [] : ["bucket"]), ...(query.groupBy ? ['"group"'] : [])];
  // Groups in code-point order, as the memory adapter sorts them, whatever the collation.
  const order = [
    ...(size === undefined ? [] : ["bucket"]),
    ...(query.groupBy ? ['"group" COLLATE "C" NULLS FIRST'] : []),
  ];
  return { union: selects.join("\n  UNION ALL\n  "), params, names, order };
};

const cellColumns = (names: ReadonlyArray<string>) => names.map((n) => `${n}, `).join("");

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
  const p = piecesSql(query, "playback_rollups", {
    rollup: "views, playing_ms, stall_ms, stalls, failures, exits",
    // Named: the first piece names the union's columns, and may be this one.
    view: `1::int8 AS views, playing_ms, stall_ms, stalls::int8 AS stalls, failed::int::int8 AS failures,
      (played AND NOT started)::int::int8 AS exits`,
  });
  const { rows } = await sql.query<ViewTotals>(
    tenantScope(query.tenantId),
    `SELECT ${cellColumns(p.names)}sum(views)::int8 AS views, sum(playing_ms)::float8 AS playing_ms,
       sum(stall_ms)::float8 AS stall_ms, sum(stalls)::int8 AS stalls, sum(failures)::int8 AS failures,
       sum(exits)::int8 AS exits
     FROM (
  ${p.union}
     ) p
     ${p.names.length > 0 ? `GROUP BY ${p.names.join(", ")}` : ""}
     HAVING sum(views) > 0
     ${p.order.length > 0 ? `ORDER BY ${p.order.join(", ")}` : ""}`,
    p.params,
  );
  return rows.map((r) => cellOf(r, query));
};

export const startupPercentiles = async (sql: ScopedSql, query: ViewQuery): Promise<ViewPercentiles[]> => {
  const p = piecesSql(query, "playback_startup_rollups", {
    rollup: "bucket AS startup_bucket, count",
    view: "startup_bucket(startup_ms) AS startup_bucket, 1::int8 AS count",
    viewWhere: " AND startup_ms IS NOT NULL",
  });
  // One row per cell with its "bucket:count" pairs as text, in no order, a bucket possibly more
  // than once (from several periods, or from the views at the edges): summed and ordered here. A
  // GROUP BY cell and bucket in SQL sorted or hashed every pair (155,000 for 90 days per hour),
  // past work_mem onto disk; text parses far faster than arrays.
  const { rows } = await sql.query<{ bucket?: number; group?: string | null; counts: string | null }>(
    tenantScope(query.tenantId),
    `SELECT ${cellColumns(p.names)}string_agg(startup_bucket || ':' || count, ',') AS counts
     FROM (
  ${p.union}
     ) p
     ${p.names.length > 0 ? `GROUP BY ${p.names.join(", ")} ORDER BY ${p.order.join(", ")}` : ""}`,
    p.params,
  );
  return rows.flatMap(({ counts, ...cell }) => {
    const tally = new Map<number, number>();
    // Without a cell, the aggregate answers one row even over nothing: null then.
    for (const pair of counts === null ? [] : counts.split(",")) {
      const at = pair.indexOf(":");
      const bucket = Number(pair.slice(0, at));
      tally.set(bucket, (tally.get(bucket) ?? 0) + Number(pair.slice(at + 1)));
    }
    const values = percentilesOfBuckets([...tally].filter(([, n]) => n > 0).sort(([a], [b]) => a - b));
    return values === null ? [] : [cellOf({ ...cell, values }, query)];
  });
};

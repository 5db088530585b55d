import { StorageError, type TelemetryEvent, type TelemetrySink } from "@vod/core";
import { Effect } from "effect";
import { deleteEventsBefore, insertWithViews, startupPercentiles, viewTotals } from "./analytics.js";
import type { SqlDatabase } from "./sql.js";
import { standaloneScoped, telemetryScope } from "./tenancy.js";

export interface PostgresTelemetrySinkOptions {
  /**
   * Events per statement, at most (default 5,000). Calls are never split, so a single call with
   * more events than this is still stored whole, in a statement of its own.
   */
  readonly maxBatchEvents?: number;
  /**
   * Whether events are folded into playback views as they are stored (default true). False
   * stores raw events only, and analytics answer no views: for a deployment whose analytics are
   * made elsewhere from the same events (docs/analytics.md, the scale plan).
   */
  readonly views?: boolean;
}

interface Pending {
  readonly events: ReadonlyArray<TelemetryEvent>;
  /** Each event's `extra` as JSON text, made by the caller, so that a bad one fails only its call. */
  readonly extras: ReadonlyArray<string>;
  readonly settle: (error?: StorageError) => void;
}

/** The columns of telemetry_events, named as the event's fields, with the type of each array. */
export const COLUMNS = [
  ["tenant_id", "text"],
  ["session_id", "text"],
  ["asset_id", "text"],
  ["received_at", "int8"],
  ["player_version", "text"],
  ["event", "text"],
  ["ts_ms", "float8"],
  ["playhead_ms", "float8"],
  ["rendition", "text"],
  ["error_code", "text"],
  ["startup_ms", "float8"],
  ["stall_ms", "float8"],
  ["bitrate_kbps", "float8"],
  // JSON text, cast to jsonb in the statement.
  ["extra", "text"],
] as const satisfies ReadonlyArray<readonly [keyof TelemetryEvent, string]>;

const NAMES = COLUMNS.map(([name]) => name).join(", ");

/*
 * One array parameter per column, so the statement is the same for any number of rows and never
 * meets the 65,535 bind-parameter limit. Measured here (14 columns, forms interleaved, medians,
 * a busy 2-core machine), rows/s with 1k / 10k rows per statement:
 *   PGlite 0.5:         unnest 34k / 46k; multi-row VALUES 20k / 26k; jsonb_to_recordset 33k / 41k;
 *                       COPY FROM '/dev/blob' 42k / 55k (PGlite only, outside SqlDatabase)
 *   PostgreSQL 15 (pg): unnest 48k / 57k; multi-row VALUES 28k / 22k; jsonb_to_recordset 31k / 49k
 * pg has no COPY FROM STDIN without pg-copy-streams, so unnest is the fastest form both engines share.
 */
const INSERT = `INSERT INTO telemetry_events (${NAMES})
SELECT ${COLUMNS.map(([name]) => (name === "extra" ? "extra::jsonb" : name)).join(", ")}
FROM unnest(${COLUMNS.map(([, type], i) => `$${i + 1}::${type}[]`).join(", ")}) AS t (${NAMES})`;

const INSERT_WITH_VIEWS = insertWithViews(COLUMNS);

const columnArrays = (batch: ReadonlyArray<Pending>) => {
  const arrays: unknown[][] = COLUMNS.map(() => []);
  for (const { events, extras } of batch)
    events.forEach((event, i) => {
      COLUMNS.forEach(([name], column) => {
        arrays[column]?.push(name === "extra" ? extras[i] : (event[name] ?? null));
      });
    });
  return arrays;
};

/**
 * Errors caused by the rows themselves (SQLSTATE classes 22, data exception, and 23, integrity
 * constraint violation): text with a NUL character, say. Retrying the other calls of the batch
 * without the offending one succeeds; with any other error (the database is away) it would not.
 */
const isDataError = (error: unknown) => {
  const code = typeof error === "object" && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === "string" && (code.startsWith("22") || code.startsWith("23"));
};

/**
 * Telemetry into telemetry_events and playback_views, with group commit: calls queue up, and one
 * flush at a time stores everything queued so far in one statement (the events and the views they
 * change), then settles each call; calls made while a
 * flush runs wait for the next. Under load the batches grow and the statements stay few.
 */
export const postgresTelemetrySink = (
  db: SqlDatabase,
  options: PostgresTelemetrySinkOptions = {},
): TelemetrySink => {
  const maxBatchEvents = options.maxBatchEvents ?? 5_000;
  const keepViews = options.views ?? true;
  const queue: Pending[] = [];
  let flushing = false;
  // Insert-only, across tenants: the one thing telemetry's scope may do (row-level-security.ts).
  const sql = standaloneScoped(db);

  const store = async (batch: ReadonlyArray<Pending>): Promise<void> => {
    try {
      await sql.query(telemetryScope, keepViews ? INSERT_WITH_VIEWS : INSERT, columnArrays(batch));
      for (const p of batch) p.settle();
    } catch (error) {
      if (batch.length > 1 && isDataError(error)) {
        // One call's rows spoil the statement: halve the batch until the culprit fails alone.
        const half = Math.ceil(batch.length / 2);
        await store(batch.slice(0, half));
        await store(batch.slice(half));
        return;
      }
      const failure = new StorageError({ message: "could not store telemetry events", cause: error });
      for (const p of batch) p.settle(failure);
    }
  };

  const flush = async () => {
    while (queue.length > 0) {
      // Whole calls, in the order made, up to the cap; at least one call, however large.
      let taken = 0;
      let events = 0;
      for (const p of queue) {
        if (taken > 0 && events + p.events.length > maxBatchEvents) break;
        taken++;
        events += p.events.length;
      }
      await store(queue.splice(0, taken));
    }
    flushing = false;
  };

  const read = <A>(run: () => Promise<A>, message: string) =>
    Effect.tryPromise({ try: run, catch: (cause) => new StorageError({ message, cause }) });

  return {
    viewTotals: (query) => read(() => viewTotals(sql, query), "could not read playback views"),
    startupPercentiles: (query) =>
      read(() => startupPercentiles(sql, query), "could not read playback views"),
    deleteEventsReceivedBefore: (cutoff) =>
      read(() => deleteEventsBefore(sql, cutoff), "could not delete telemetry events"),
    write: (events) =>
      events.length === 0
        ? Effect.void
        : Effect.flatMap(
            Effect.try({
              try: () => events.map((event) => JSON.stringify(event.extra ?? {})),
              catch: (cause) => new StorageError({ message: "a telemetry event is not JSON", cause }),
            }),
            (extras) =>
              Effect.async<void, StorageError>((resume) => {
                queue.push({
                  events,
                  extras,
                  settle: (error) => resume(error ? Effect.fail(error) : Effect.void),
                });
                if (!flushing) {
                  flushing = true;
                  // After the I/O of this turn of the event loop: requests read in the same turn
                  // join the statement. A microtask runs too early for that on PGlite, whose
                  // INSERT holds the main thread: every statement would carry one batch.
                  setImmediate(() => void flush());
                }
              }),
          ),
    // As the table's owner (the app role deletes nothing), held to the tenant by its policy.
    removeTenant: (tenantId) =>
      Effect.tryPromise({
        try: () =>
          sql.query(
            { role: "login", settings: { "vod.tenant_id": tenantId } },
            "DELETE FROM telemetry_events WHERE tenant_id = $1",
            [tenantId],
          ),
        catch: (cause) => new StorageError({ message: "could not delete telemetry events", cause }),
      }).pipe(Effect.asVoid),
  };
};

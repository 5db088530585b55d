import { Effect } from "effect";
import type { VodConfig } from "../config.js";
import {
  type AnalyticsMetric,
  type AnalyticsValue,
  MAX_ANALYTICS_RANGE_MS,
  metricOfTotals,
  type ViewCell,
  type ViewQuery,
  type ViewTotals,
} from "../domain/analytics.js";
import { InvalidRequest } from "../errors.js";
import type { Requests } from "../schema/index.js";
import type { VodPorts } from "../tokens.js";
import type { Principal } from "./authenticate.js";
import { orNotFound } from "./support.js";

type QueryInput = typeof Requests.AnalyticsQuery.Type;

export interface AnalyticsDatum extends ViewCell {
  readonly value: AnalyticsValue;
}

export interface AnalyticsAnswer {
  readonly metric: AnalyticsMetric;
  readonly from: number;
  readonly to: number;
  readonly data: ReadonlyArray<AnalyticsDatum>;
}

const NO_VIEWS: ViewTotals = { views: 0, playing_ms: 0, stall_ms: 0, stalls: 0, failures: 0, exits: 0 };

const badRange = (message: string, paths: ReadonlyArray<string>) =>
  new InvalidRequest({ message, details: { fields: paths.map((p) => ({ path: [p], message })) } });

/**
 * Playback analytics: a metric over the tenant's views whose first event was received in
 * [from, to), as one value, or per bucket and group that has views. Read from the views the
 * telemetry sink keeps as it stores events.
 */
export const makeAnalytics = (ports: VodPorts, config: VodConfig) => {
  const { telemetrySink, clock, storage } = ports;

  const query = (principal: Principal, metric: AnalyticsMetric, input: QueryInput) =>
    Effect.gen(function* () {
      // Another tenant's asset is not found, as everywhere; checked first, whatever the range.
      if (input.asset_id !== undefined)
        yield* orNotFound("asset")(storage.assets.get(principal.tenant.id, input.asset_id));
      if (input.from >= input.to) return yield* badRange("from must be before to", ["from", "to"]);
      if (input.to - input.from > MAX_ANALYTICS_RANGE_MS)
        return yield* badRange("from and to must be at most 90 days apart", ["from", "to"]);
      const q: ViewQuery = {
        tenantId: principal.tenant.id,
        from: input.from,
        to: input.to,
        assetId: input.asset_id,
        interval: input.interval,
        groupBy: input.group_by,
      };
      const cells = q.interval !== undefined || q.groupBy !== undefined;
      let data: AnalyticsDatum[];
      if (metric === "startup_time_ms") {
        const rows = yield* telemetrySink.startupPercentiles(q);
        data = rows.map(({ values, ...cell }) => ({
          ...cell,
          value: { p50: values[0] ?? 0, p90: values[1] ?? 0, p95: values[2] ?? 0 },
        }));
        // One value asked for and no view with a startup time: there is none.
        if (!cells && data.length === 0) data = [{ value: null }];
      } else {
        const rows = yield* telemetrySink.viewTotals(q);
        data = rows.map(({ bucket, group, ...totals }) => ({
          ...(bucket === undefined ? {} : { bucket }),
          ...(group === undefined ? {} : { group }),
          value: metricOfTotals(metric, totals),
        }));
        if (!cells && data.length === 0) data = [{ value: metricOfTotals(metric, NO_VIEWS) }];
      }
      return { metric, from: input.from, to: input.to, data } satisfies AnalyticsAnswer;
    });

  /** Deletes raw events past the retention (`telemetryRetentionMs`); views stay. Returns how many. */
  const sweepRawEvents = () =>
    config.telemetryRetentionMs === null
      ? Effect.succeed(0)
      : telemetrySink.deleteEventsReceivedBefore(clock.now() - config.telemetryRetentionMs);

  return { query, sweepRawEvents };
};

export type Analytics = ReturnType<typeof makeAnalytics>;

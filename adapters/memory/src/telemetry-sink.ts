import {
  foldViews,
  type PlaybackView,
  percentilesOfViews,
  type TelemetryEvent,
  type TelemetrySink,
  totalsOfViews,
} from "@vod/core";
import { Effect } from "effect";

export interface MemoryTelemetrySink extends TelemetrySink {
  /** Every event written so far and not yet past retention, in the order written (a live view, for tests and backdoors). */
  readonly events: ReadonlyArray<TelemetryEvent>;
  /** Every view, by tenant and session (`viewKey`). */
  readonly views: ReadonlyMap<string, PlaybackView>;
}

/** Telemetry kept in process memory: for tests and embedding; nothing survives a restart. */
export const memoryTelemetrySink = (): MemoryTelemetrySink => {
  const events: TelemetryEvent[] = [];
  const views = new Map<string, PlaybackView>();
  return {
    events,
    views,
    write: (batch) =>
      Effect.sync(() => {
        // A loop, not push(...batch): a spread of a very large batch can overflow the call stack.
        for (const event of batch) events.push(event);
        for (const [key, view] of foldViews(views, batch)) views.set(key, view);
      }),
    viewTotals: (query) => Effect.sync(() => totalsOfViews(views.values(), query)),
    startupPercentiles: (query) => Effect.sync(() => percentilesOfViews(views.values(), query)),
    deleteEventsReceivedBefore: (cutoff) =>
      Effect.sync(() => {
        const kept = events.filter((e) => e.received_at >= cutoff);
        const deleted = events.length - kept.length;
        events.length = 0;
        for (const event of kept) events.push(event);
        return deleted;
      }),
    removeTenant: (tenantId) =>
      Effect.sync(() => {
        // In place: `events` is a live view.
        let kept = 0;
        for (const event of events) if (event.tenant_id !== tenantId) events[kept++] = event;
        events.length = kept;
        for (const [key, view] of views) if (view.tenant_id === tenantId) views.delete(key);
      }),
  };
};

import type { TelemetryEvent, TelemetrySink } from "@vod/core";
import { Effect } from "effect";

export interface MemoryTelemetrySink extends TelemetrySink {
  /** Every event written so far, in the order written (a live view, for tests and backdoors). */
  readonly events: ReadonlyArray<TelemetryEvent>;
}

/** Telemetry kept in process memory: for tests and embedding; nothing survives a restart. */
export const memoryTelemetrySink = (): MemoryTelemetrySink => {
  const events: TelemetryEvent[] = [];
  return {
    events,
    write: (batch) =>
      Effect.sync(() => {
        // A loop, not push(...batch): a spread of a very large batch can overflow the call stack.
        for (const event of batch) events.push(event);
      }),
    removeTenant: (tenantId) =>
      Effect.sync(() => {
        // In place: `events` is a live view.
        let kept = 0;
        for (const event of events) if (event.tenant_id !== tenantId) events[kept++] = event;
        events.length = kept;
      }),
  };
};

import { Tokens } from "@vod/core";
import { ContainerModule } from "inversify";
import { memoryRateLimiter } from "./rate-limiter.js";
import { memoryStorage } from "./storage.js";

export * from "./clock-and-ids.js";
export { type MemoryJobQueue, type MemoryJobQueueOptions, memoryJobQueue } from "./job-queue.js";
export { memoryRateLimiter } from "./rate-limiter.js";
export { emptyState, type MemoryJob, type MemoryState } from "./state.js";
export { type MemoryStorage, memoryStorage } from "./storage.js";

/** Binds storage and the rate limiter in memory. */
export const memoryAdapters = (options: { storage?: ReturnType<typeof memoryStorage> } = {}) =>
  new ContainerModule(({ bind }) => {
    bind(Tokens.Storage).toConstantValue(options.storage ?? memoryStorage());
    bind(Tokens.RateLimiter).toConstantValue(memoryRateLimiter());
  });
export { memoryBackdoor } from "./backdoor.js";
export { memoryObjectStore } from "./object-store.js";
export { memoryRevocationStore } from "./revocation-store.js";
export { type MemoryTelemetrySink, memoryTelemetrySink } from "./telemetry-sink.js";

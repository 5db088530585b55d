export * from "./clock-and-ids.js";
export { type MemoryJobQueue, type MemoryJobQueueOptions, memoryJobQueue } from "./job-queue.js";
export { type MemoryMailer, memoryMailer } from "./mailer.js";
export { type MemoryObjectStore, memoryObjectStore } from "./object-store.js";
export { memoryRateLimiter } from "./rate-limiter.js";
export { memoryRevocationStore } from "./revocation-store.js";
export { type MemoryStorage, memoryStorage } from "./storage.js";
export { type MemoryTelemetrySink, memoryTelemetrySink } from "./telemetry-sink.js";

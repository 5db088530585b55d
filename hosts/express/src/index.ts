export { type ComposedVod, type ComposeOverrides, composeVod, openDatabase } from "./compose.js";
export { ConfigError, type HostConfig, loadConfig, type TrustProxy } from "./config.js";
export { DEFAULT_HEAP_GROWING_PERCENT, tuneHeapForRequests, tuneHeapForStreaming } from "./heap.js";
export { createLogger } from "./logger.js";
export { createOpsApp } from "./ops.js";
export { type HostOptions, type RunningHost, startHost } from "./server.js";

/**
 * Test-only entry point (`@vod/adapter-memory/testing`): reads and writes the stored state around the
 * adapter's rules, so tests can check what was stored. Production code imports the package root.
 */
export { memoryBackdoor, memoryObjectStoreBackdoor } from "./backdoor.js";
export { emptyState, type MemoryJob, type MemoryState } from "./state.js";

/**
 * Test-only entry point (`@vod/adapter-postgres/testing`): reads and writes the stored state around the
 * adapter's rules, so tests can check what was stored. Production code imports the package root.
 */
export { postgresBackdoor } from "./backdoor.js";
export { postgresTelemetryBackdoor } from "./telemetry-sink.js";

/**
 * Test-only entry point (`@vod/adapter-postgres/testing`): reads and writes the stored state around the
 * adapter's rules, so tests can check what was stored. Production code imports the package root.
 */
/** How an analytics query splits its range between views and rollups (pure). */
export { rangePieces } from "./analytics.js";
export { postgresBackdoor, postgresTelemetryBackdoor } from "./backdoor.js";
export { temporarySchemas } from "./temporary-schemas.js";

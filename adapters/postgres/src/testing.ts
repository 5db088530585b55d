/**
 * Test-only entry point (`@vod/adapter-postgres/testing`): reads and writes the stored state around the
 * adapter's rules, so tests can check what was stored. Production code imports the package root.
 */
export { postgresBackdoor, postgresTelemetryBackdoor } from "./backdoor.js";
export { temporarySchemas } from "./temporary-schemas.js";

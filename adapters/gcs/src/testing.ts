/**
 * Test-only entry point (`@vod/adapter-gcs/testing`): reads what the store put in a test server's
 * bucket, around the protocol, so tests can check what was stored. Production code imports the
 * package root.
 */
export { gcsTestBackdoor } from "./backdoor.js";

/**
 * Test-only entry point (`@vod/adapter-filesystem/testing`): reads and writes the stored state around the
 * adapter's rules, so tests can check what was stored. Production code imports the package root.
 */
export { type FilesystemObjectStoreBackdoor, filesystemBackdoor } from "./backdoor.js";

export * from "./fake-google.js";
export * from "./gcs-test-server/index.js";
export * from "./smtp-test-server.js";

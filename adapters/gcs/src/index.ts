export { type GcsObjectStoreConfig, gcsObjectStore } from "./object-store.js";

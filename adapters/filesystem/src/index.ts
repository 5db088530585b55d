export { type FilesystemObjectStoreConfig, filesystemObjectStore } from "./object-store.js";

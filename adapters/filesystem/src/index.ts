export { type FilesystemObjectStoreBackdoor, filesystemBackdoor } from "./backdoor.js";
export { type FilesystemObjectStoreConfig, filesystemObjectStore } from "./object-store.js";

import { Tokens } from "@vod/core";
import { ContainerModule } from "inversify";
import { type FilesystemObjectStoreConfig, filesystemObjectStore } from "./object-store.js";

export { type FilesystemObjectStoreBackdoor, filesystemBackdoor } from "./backdoor.js";
export { type FilesystemObjectStoreConfig, filesystemObjectStore } from "./object-store.js";

/** Binds the ObjectStore port to files under `config.root`. */
export const filesystemAdapters = (config: FilesystemObjectStoreConfig): ContainerModule =>
  new ContainerModule(({ bind }) => {
    bind(Tokens.ObjectStore).toConstantValue(filesystemObjectStore(config));
  });

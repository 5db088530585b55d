import { Tokens } from "@vod/core";
import { ContainerModule } from "inversify";
import { type GcsObjectStoreConfig, gcsObjectStore } from "./object-store.js";

export { type GcsObjectStoreConfig, gcsObjectStore } from "./object-store.js";

/** Binds the ObjectStore port to a Google Cloud Storage bucket. */
export const gcsAdapters = (config: GcsObjectStoreConfig): ContainerModule =>
  new ContainerModule(({ bind }) => {
    bind(Tokens.ObjectStore).toConstantValue(gcsObjectStore(config));
  });

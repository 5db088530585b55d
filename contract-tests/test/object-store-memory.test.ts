import { memoryObjectStore } from "@vod/adapter-memory";
import { memoryObjectStoreBackdoor } from "@vod/adapter-memory/testing";
import { describeObjectStore } from "@vod/contract-tests";

describeObjectStore(
  "memory",
  async () => {
    const store = memoryObjectStore();
    return { store, backdoor: memoryObjectStoreBackdoor(store), cleanup: async () => {} };
  },
  { receivePart: true, partUploadUrls: false, localPath: false, deliveryUrl: false, hashesOnAssembly: true },
);

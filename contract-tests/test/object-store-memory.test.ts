import { memoryObjectStore } from "@vod/adapter-memory";
import { describeObjectStore } from "@vod/contract-tests";

describeObjectStore(
  "memory",
  async () => {
    const store = memoryObjectStore();
    return { store, backdoor: store.backdoor, cleanup: async () => {} };
  },
  { receivePart: true, partUploadUrl: false, localPath: false, deliveryUrl: false, hashesOnAssembly: true },
);

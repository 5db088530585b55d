import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  manualClock,
  memoryBackdoor,
  memoryJobQueue,
  memoryObjectStore,
  memoryStorage,
} from "@vod/adapter-memory";
import { describeHostileInput, fakeMediaProcessor, startFakeGoogle, testHostEnv } from "@vod/contract-tests";
import { loadConfig, startHost } from "@vod/host-express";

// The memory set, with a job queue and a fake media processor so that ready assets exist.
describeHostileInput(
  "memory",
  async (env = {}) => {
    const google = await startFakeGoogle();
    const dataDir = await mkdtemp(join(tmpdir(), "vod-hostile-"));
    const storage = memoryStorage();
    const objectStore = memoryObjectStore();
    const clock = manualClock(Date.now());
    const host = await startHost(loadConfig({ ...testHostEnv(google, dataDir), ...env }), {
      storage,
      objectStore,
      jobQueue: memoryJobQueue(storage.state, { retryDelayMs: 100 }),
      mediaProcessor: fakeMediaProcessor(),
      clock,
    });
    return {
      baseUrl: host.url,
      backdoor: memoryBackdoor(storage.state),
      objects: objectStore.backdoor,
      clock,
      google,
      cleanup: async () => {
        await host.close(1_000);
        await google.close();
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  },
  { runs: 10 },
);

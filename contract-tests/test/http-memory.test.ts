import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { manualClock, memoryBackdoor, memoryObjectStore, memoryStorage } from "@vod/adapter-memory";
import { describeHttpApi, startFakeGoogle, testHostEnv } from "@vod/contract-tests";
import { loadConfig, startHost } from "@vod/host-express";
import { Effect } from "effect";

describeHttpApi("memory", async (env = {}) => {
  const google = await startFakeGoogle();
  const dataDir = await mkdtemp(join(tmpdir(), "vod-http-"));
  const storage = memoryStorage();
  const objectStore = memoryObjectStore();
  const clock = manualClock(Date.now());
  // No job queue: what completes enqueue stays queued, for the backdoor to read.
  const host = await startHost(loadConfig({ ...testHostEnv(google, dataDir), ...env }), {
    storage,
    objectStore,
    clock,
  });
  return {
    baseUrl: host.url,
    // A suspension goes through the core's use case, as an operator's does (`vod tenant suspend`):
    // a status written behind the host's back reaches its credential cache only after 60 s.
    backdoor: {
      ...memoryBackdoor(storage.state),
      setTenantStatus: (id: string, status: "active" | "suspended") =>
        Effect.runPromise(Effect.asVoid(host.vod.tenants.setStatus(id, status))),
    },
    objects: objectStore.backdoor,
    clock,
    google,
    cleanup: async () => {
      await host.close(1_000);
      await google.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
});

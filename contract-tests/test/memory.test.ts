import { memoryBackdoor, memoryJobQueue, memoryRateLimiter, memoryStorage } from "@vod/adapter-memory";
import { describeJobQueue, describeRateLimiter, describeStorage } from "@vod/contract-tests";
import { Effect } from "effect";

describeStorage("memory", async () => {
  const storage = memoryStorage();
  return { storage, backdoor: memoryBackdoor(storage.state), cleanup: async () => {} };
});

describeRateLimiter("memory", async () => ({ limiter: memoryRateLimiter(), cleanup: async () => {} }));

describeJobQueue("memory", async () => {
  const storage = memoryStorage();
  const queue = memoryJobQueue(storage.state, { maxAttempts: 3, retryDelayMs: 50, leaseMs: 400, pollMs: 20 });
  return {
    queue,
    enqueue: (assetId) =>
      Effect.runPromise(
        storage.transaction((tx) =>
          tx.jobs.enqueue("process-asset", { tenant_id: "tnt_q", asset_id: assetId }),
        ),
      ),
    leaseMs: 400,
    maxAttempts: 3,
    cleanup: async () => {},
  };
});

import { memoryJobQueue, memoryRateLimiter, memoryStorage } from "@vod/adapter-memory";
import { memoryBackdoor } from "@vod/adapter-memory/testing";
import { describeJobQueue, describeRateLimiter, describeStorage } from "@vod/contract-tests";
import { AssetId, TenantId } from "@vod/core";
import { Effect } from "effect";

describeStorage("memory", async () => {
  const storage = memoryStorage();
  return { storage, backdoor: memoryBackdoor(storage), cleanup: async () => {} };
});

describeRateLimiter("memory", async () => ({ limiter: memoryRateLimiter(), cleanup: async () => {} }));

describeJobQueue("memory", async () => {
  const storage = memoryStorage();
  const options = { maxAttempts: 3, retryDelayMs: 50, leaseMs: 400, maxRunMs: 1_500, pollMs: 20 };
  const queue = memoryJobQueue(storage, options);
  return {
    queue,
    // Another process, as far as jobs go: a second queue on the same state.
    otherProcess: async () => {
      const other = memoryJobQueue(storage, options);
      return { queue: other, die: async () => other.halt() };
    },
    enqueue: (assetId, options) =>
      Effect.runPromise(
        storage.transaction((tx) =>
          tx.jobs.enqueue(
            "process-asset",
            { tenant_id: TenantId("tnt_q"), asset_id: AssetId(assetId) },
            options,
          ),
        ),
      ),
    leaseMs: 400,
    maxRunMs: 1_500,
    maxAttempts: 3,
    cleanup: async () => {},
  };
});

import { type PgBossQueue, pgBossQueue, postgresStorage } from "@vod/adapter-postgres";
import { postgresBackdoor } from "@vod/adapter-postgres/testing";
import { describeJobQueue, describeStorage } from "@vod/contract-tests";
import { AssetId, type EnqueueOptions, TenantId } from "@vod/core";
import { Effect } from "effect";
import { afterAll, describe, expect, it } from "vitest";
import { migratedOnce, onEachEngine } from "./engines.js";

onEachEngine(({ name, open }) => {
  const engine = migratedOnce(open);
  let queue: Promise<PgBossQueue> | undefined;
  afterAll(async () => (await queue)?.close());
  describeStorage(name, async () => {
    const db = await engine.db();
    queue ??= pgBossQueue(db);
    const { enqueueWith } = await queue;
    return {
      storage: postgresStorage(db, { enqueue: enqueueWith }),
      backdoor: postgresBackdoor(db),
      cleanup: async () => {},
    };
  });
});

// The queue suite on pg-boss, in databases of its own, with timings short enough for a test run.
onEachEngine(({ name, open }) => {
  const engine = migratedOnce(open);
  describeJobQueue(`pg-boss on ${name}`, async () => {
    const db = await engine.db();
    const options = {
      maxAttempts: 3,
      retryDelaySeconds: 1,
      leaseSeconds: 2,
      maxRunSeconds: 6,
      maintenanceSeconds: 1,
      pollSeconds: 0.5,
    };
    const queue = await pgBossQueue(db, options);
    const storage = postgresStorage(db, { enqueue: queue.enqueueWith });
    return {
      queue,
      // Another process, as far as jobs go: a second pg-boss instance on the same schema.
      otherProcess: async () => {
        const other = await pgBossQueue(db, options);
        return {
          queue: other,
          die: async () => {
            other.halt();
            await other.close();
          },
        };
      },
      enqueue: (assetId: string, options?: EnqueueOptions) =>
        Effect.runPromise(
          storage.transaction((tx) =>
            tx.jobs.enqueue(
              "process-asset",
              { tenant_id: TenantId("tnt_q"), asset_id: AssetId(assetId) },
              options,
            ),
          ),
        ),
      leaseMs: 3_000,
      maxRunMs: 6_000,
      maxAttempts: 3,
      cleanup: () => queue.close(),
    };
  });
});

// A job committed in this process is fetched at once by this process's idle workers: they are
// woken after the commit, not left to their next poll (30 s here, far beyond the wait below).
onEachEngine(({ name, open }) => {
  const engine = migratedOnce(open);
  describe(`pg-boss on ${name}: waking local workers`, () => {
    it("starts a job committed after the workers' last poll without waiting for the next", async () => {
      const db = await engine.db();
      const queue = await pgBossQueue(db, { pollSeconds: 30, maintenanceSeconds: 60 });
      try {
        const storage = postgresStorage(db, { enqueue: queue.enqueueWith, enqueued: queue.wake });
        const started: string[] = [];
        const worker = await Effect.runPromise(
          queue.work("process-asset", { concurrency: 1 }, (job) =>
            Effect.sync(() => void started.push(job.data.asset_id)),
          ),
        );
        // Let the worker make its first (empty) fetch and go to sleep for its interval.
        await new Promise((r) => setTimeout(r, 1_500));
        const assetId = AssetId(`ast_wake_${Date.now()}`);
        await Effect.runPromise(
          storage.transaction((tx) =>
            tx.jobs.enqueue("process-asset", { tenant_id: TenantId("tnt_w"), asset_id: assetId }),
          ),
        );
        const until = Date.now() + 10_000;
        while (!started.includes(assetId) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
        expect(started).toContain(assetId);
        await Effect.runPromise(Effect.timeout(worker.stop, "1 second")).catch(() => undefined);
      } finally {
        await queue.close();
      }
    }, 30_000);
  });
});

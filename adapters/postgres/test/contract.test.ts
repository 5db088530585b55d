import { type PgBossQueue, pgBossQueue, postgresBackdoor, postgresStorage } from "@vod/adapter-postgres";
import { describeJobQueue, describeStorage } from "@vod/contract-tests";
import { Effect } from "effect";
import { afterAll } from "vitest";
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
    const queue = await pgBossQueue(db, {
      maxAttempts: 3,
      retryDelaySeconds: 1,
      leaseSeconds: 2,
      maintenanceSeconds: 1,
      pollSeconds: 0.5,
    });
    const storage = postgresStorage(db, { enqueue: queue.enqueueWith });
    return {
      queue,
      enqueue: (assetId: string) =>
        Effect.runPromise(
          storage.transaction((tx) =>
            tx.jobs.enqueue("process-asset", { tenant_id: "tnt_q", asset_id: assetId }),
          ),
        ),
      leaseMs: 3_000,
      maxAttempts: 3,
      cleanup: () => queue.close(),
    };
  });
});

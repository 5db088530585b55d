import { Effect, Option } from "effect";
import type { TenantId } from "../domain/ids.js";
import { originKey, tenantPrefixes } from "../domain/object-keys.js";
import type { Tenant, TenantStatus } from "../domain/tenant.js";
import { NotFound } from "../errors.js";
import { type Job, JobFailed } from "../ports/job-queue.js";
import type { VodPorts } from "../tokens.js";
import type { Forget } from "./authenticate.js";

const tenantNotFound = () => new NotFound({ message: "tenant not found" });

/** Open uploads aborted per round of the deletion job. */
const OPEN_UPLOADS_PER_ROUND = 100;

/**
 * What is done to a tenant as a whole: an operator suspends, activates or deletes it, and the
 * owner deletes their own (accounts.ts checks who asks). This goes through here, not SQL: the
 * status is stored first, then every node drops the tenant's cached credentials, so the next
 * request of any of its keys or sessions is refused on every node.
 */
export const makeTenants = (
  {
    clock,
    storage,
    objectStore,
    telemetrySink,
  }: Pick<VodPorts, "clock" | "storage" | "objectStore" | "telemetrySink">,
  forget: Forget,
) => {
  const setStatus = (tenantId: TenantId, status: Exclude<TenantStatus, "deleted">) =>
    Effect.gen(function* () {
      const tenant: Tenant = yield* storage.tenants.get(tenantId).pipe(
        Effect.flatMap((found) =>
          // A deleted tenant stays deleted: there is nothing left to activate.
          Option.isSome(found) && found.value.status !== "deleted"
            ? Effect.succeed(found.value)
            : Effect.fail(tenantNotFound()),
        ),
      );
      if (tenant.status !== status) yield* storage.tenants.setStatus(tenantId, status);
      // Told even when unchanged: an operator repeating the command heals a node that missed it.
      yield* forget({ kind: "tenant", id: tenantId });
      return { ...tenant, status };
    });

  /**
   * Deletes the tenant: from the commit on, every credential of it is refused (401) on every
   * node, its slug is retired for good, its keys are revoked and its webhooks deleted (nothing
   * is sent about it any more); the `delete-tenant` job, enqueued in the same transaction,
   * removes its objects and rows. Asking again for a tenant being deleted is harmless.
   */
  const remove = (tenantId: TenantId) =>
    Effect.gen(function* () {
      const found = yield* storage.tenants.get(tenantId);
      if (Option.isNone(found)) return yield* Effect.fail(tenantNotFound());
      const now = clock.now();
      yield* storage.transaction((tx) =>
        Effect.gen(function* () {
          if (!(yield* tx.tenants.markDeleted(tenantId, now))) return;
          yield* tx.apiKeys.revokeAll(tenantId, now);
          yield* tx.webhooks.removeAll(tenantId, now);
          yield* tx.jobs.enqueue("delete-tenant", { tenant_id: tenantId });
        }),
      );
      yield* forget({ kind: "tenant", id: tenantId });
      return { ...found.value, status: "deleted" as const };
    });

  /**
   * The `delete-tenant` job. Every step is harmless to repeat (at least once delivery). The
   * objects go first, while the open uploads that name their parts are still stored, then the
   * rows; the prefixes are emptied once more at the end, for what a processing run that was
   * under way stored meanwhile (a run that ends after the rows are gone finds its asset gone and
   * removes what it made).
   */
  const removeData = (job: Job<"delete-tenant">): Effect.Effect<void, JobFailed> =>
    Effect.gen(function* () {
      const tenantId = job.data.tenant_id;
      const tenant = yield* storage.tenants.get(tenantId);
      // Never a live tenant's data, whatever enqueued the job.
      if (Option.isSome(tenant) && tenant.value.status !== "deleted") return;
      for (;;) {
        const open = yield* storage.uploads.listOpen(tenantId, OPEN_UPLOADS_PER_ROUND);
        for (const upload of open) {
          yield* objectStore.abortMultipart({
            uploadId: upload.id,
            key: originKey(tenantId, upload.asset_id),
          });
          yield* storage.uploads.close(tenantId, upload.id, "aborted");
        }
        if (open.length < OPEN_UPLOADS_PER_ROUND) break;
      }
      const emptyPrefixes = Effect.forEach(tenantPrefixes(tenantId), (p) => objectStore.deletePrefix(p), {
        discard: true,
      });
      yield* emptyPrefixes;
      yield* telemetrySink.removeTenant(tenantId);
      yield* storage.tenants.purge(tenantId);
      yield* emptyPrefixes;
    }).pipe(
      Effect.catchTag(
        "StorageError",
        (e): Effect.Effect<never, JobFailed> => Effect.fail(new JobFailed({ message: e.message, cause: e })),
      ),
    );

  return {
    setStatus,
    suspend: (tenantId: TenantId) => setStatus(tenantId, "suspended"),
    activate: (tenantId: TenantId) => setStatus(tenantId, "active"),
    remove,
    removeData,
  };
};

export type Tenants = ReturnType<typeof makeTenants>;

import { Effect } from "effect";
import type { TenantId } from "../domain/ids.js";
import type { Tenant, TenantStatus } from "../domain/tenant.js";
import type { VodPorts } from "../tokens.js";
import type { Forget } from "./authenticate.js";
import { orNotFound } from "./support.js";

/**
 * What an operator does to a tenant. Suspending goes through here, not SQL: the status is stored
 * first, then every node drops the tenant's cached credentials, so the next request of any of
 * its keys or sessions is refused (403) on every node.
 */
export const makeTenants = ({ storage }: Pick<VodPorts, "storage">, forget: Forget) => {
  const setStatus = (tenantId: TenantId, status: TenantStatus) =>
    Effect.gen(function* () {
      const tenant: Tenant = yield* orNotFound("tenant")(storage.tenants.get(tenantId));
      if (tenant.status !== status) yield* storage.tenants.setStatus(tenantId, status);
      // Told even when unchanged: an operator repeating the command heals a node that missed it.
      yield* forget({ kind: "tenant", id: tenantId });
      return { ...tenant, status };
    });

  return {
    setStatus,
    suspend: (tenantId: TenantId) => setStatus(tenantId, "suspended"),
    activate: (tenantId: TenantId) => setStatus(tenantId, "active"),
  };
};

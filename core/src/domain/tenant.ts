import type { TenantId } from "./ids.js";
export const tenantPlans = ["free", "pro", "enterprise"] as const;
export type TenantPlan = (typeof tenantPlans)[number];
/**
 * `deleted`: deletion was asked (the owner or an operator); every credential is refused from then
 * on, and the `delete-tenant` job removes the row with the rest of the tenant's data.
 */
export const tenantStatuses = ["active", "suspended", "deleted"] as const;
export type TenantStatus = (typeof tenantStatuses)[number];

export interface Tenant {
  readonly id: TenantId;
  readonly slug: string;
  readonly name: string;
  readonly plan: TenantPlan;
  readonly status: TenantStatus;
  readonly created_at: number;
}

/** Lowercase ASCII slug: accents folded, runs of anything else become one dash. */
export const slugify = (name: string): string => {
  const slug = name
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 48)
    .replace(/-+$/g, "");
  return slug.length > 0 ? slug : "tenant";
};

/** The tenant's name when signup gives none: the email's local part. */
export const defaultTenantName = (email: string): string => email.split("@")[0] ?? email;

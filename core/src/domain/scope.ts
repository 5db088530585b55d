/** Scopes of part 5: each includes the ones below it. */
export const scopes = ["read", "write", "admin"] as const;
export type Scope = (typeof scopes)[number];

const rank: Record<Scope, number> = { read: 0, write: 1, admin: 2 };

export const includesScope = (have: Scope, need: Scope): boolean => rank[have] >= rank[need];

/** A key carries exactly one scope; when several are asked for, the highest wins (DECISIONS). */
export const highestScope = (requested: ReadonlyArray<Scope>): Scope =>
  requested.reduce<Scope>((best, s) => (rank[s] > rank[best] ? s : best), "read");

export const roles = ["owner", "admin", "member"] as const;
export type Role = (typeof roles)[number];

/** Roles act with a scope: owner and admin with admin, member with write (DECISIONS). */
export const scopeOfRole = (role: Role): Scope => (role === "member" ? "write" : "admin");

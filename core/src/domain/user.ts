import type { TenantId } from "./ids.js";
import type { Role } from "./scope.js";

export interface User {
  readonly id: string;
  readonly tenant_id: TenantId;
  readonly email: string;
  readonly email_verified: boolean;
  readonly name: string | null;
  readonly role: Role;
  readonly created_at: number;
}

/** A user as stored: the public record plus its password hash (null for identity-provider-only users). */
export interface UserRecord extends User {
  readonly password_hash: string | null;
}

export const publicUser = ({ password_hash: _, ...user }: UserRecord): User => user;

/** An identity-provider account linked to a user. */
export interface Identity {
  readonly provider: "google";
  readonly subject: string;
  readonly user_id: string;
  readonly tenant_id: TenantId;
  readonly created_at: number;
}

/** Emails are unique without regard to case; this is the form they are compared in. */
export const normalizeEmail = (email: string): string => email.trim().toLowerCase();

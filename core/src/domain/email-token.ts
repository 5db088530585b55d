import type { Expiring } from "./expiry.js";
import type { TenantId } from "./ids.js";

/** What a link sent by mail does: confirm the user's email, or set a new password. */
export const emailTokenPurposes = ["verify_email", "reset_password"] as const;
export type EmailTokenPurpose = (typeof emailTokenPurposes)[number];

/** How long a link works (DECISIONS "Account security"). */
export const emailTokenLifetimeMs: Readonly<Record<EmailTokenPurpose, number>> = {
  verify_email: 24 * 60 * 60 * 1000,
  reset_password: 30 * 60 * 1000,
};

/** A single-use token sent by mail; only its hash is stored. */
export interface EmailToken extends Expiring {
  /** SHA-256 (hex) of the token; the token itself is only in the mail. */
  readonly token_hash: string;
  readonly purpose: EmailTokenPurpose;
  readonly tenant_id: TenantId;
  readonly user_id: string;
  /** The address it was sent to: it proves that address, no other. */
  readonly email: string;
  /** Set when the link was used; it then works no more. */
  readonly used_at: number | null;
}

import { Effect } from "effect";
import type { TenantId } from "../domain/ids.js";
import type { Repositories } from "../ports/repositories.js";

/**
 * Someone just proved they hold the user's email (a verified Google identity, a reset link). When
 * the account's own email was never proven, its signup may have been made by someone else, who
 * could have made keys and webhooks that would outlive the takeover: they end with the proof
 * (DECISIONS "Account security"). The caller ends the user's sessions, with its own reason, and
 * tells every node (`forget` of the tenant) once the transaction commits. Answers whether the
 * account was unproven, so the caller knows to do so.
 */
export const proveEmail = (
  tx: Repositories,
  user: { readonly tenant_id: TenantId; readonly id: string; readonly email_verified: boolean },
  now: number,
) =>
  Effect.gen(function* () {
    if (user.email_verified) return false;
    yield* tx.users.setEmailVerified(user.tenant_id, user.id, true);
    yield* tx.apiKeys.revokeAll(user.tenant_id, now);
    // A deleted webhook's pending deliveries are not sent (webhooks.ts, deliver).
    yield* tx.webhooks.removeAll(user.tenant_id, now);
    return true;
  });

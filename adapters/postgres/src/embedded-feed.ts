import type { Revocation, RevocationFeed } from "@vod/core";
import { Effect } from "effect";
import type { EmbeddedDatabase } from "./pglite-process.js";

const isRevocation = (message: unknown): message is { readonly revocation: Revocation } =>
  typeof message === "object" &&
  message !== null &&
  "revocation" in message &&
  typeof (message as { revocation: { kind?: unknown } }).revocation?.kind === "string";

/**
 * Revocations told to every process on one embedded database, through the process that owns it:
 * `vod tenant suspend` run beside `vod serve` reaches the host's caches at once. Like any feed it
 * is not the truth (the database is): a message lost with a process is learnt at the next look-up.
 */
export const embeddedRevocationFeed = (db: EmbeddedDatabase): RevocationFeed => {
  const listeners = new Set<(revocation: Revocation) => void>();
  const tell = (revocation: Revocation) => {
    for (const listener of listeners) listener(revocation);
  };
  db.onBroadcast((message) => {
    if (isRevocation(message)) tell(message.revocation);
  });
  return {
    // Resolved once the owner has passed it on, so a command that exits next has told the host.
    publish: (revocation) =>
      Effect.promise(async () => {
        tell(revocation);
        await db.publish({ revocation }).catch(() => undefined);
      }),
    watch: (listener) => void listeners.add(listener),
  };
};

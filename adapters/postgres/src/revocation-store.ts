import { type RevocationStore, StorageError } from "@vod/core";
import { Effect } from "effect";
import type { Queryable } from "./sql.js";

/** Every this many revokes, this node deletes the rows nobody needs any more. */
const PRUNE_EVERY = 1_000;
/**
 * Rows are deleted this long after their `until`, by the database's clock: a node whose clock
 * lags the database's still finds every session it would consider unexpired.
 */
const PRUNE_GRACE_MS = 3_600_000;

const storageError = (cause: unknown) =>
  new StorageError({ message: "revocation store request failed", cause });

/**
 * Revoked playback sessions in playback_revocations: the truth every node shares. A session
 * revoked twice keeps the later `until`; rows whose `until` has passed are deleted now and then.
 */
export const postgresRevocationStore = (db: Queryable): RevocationStore => {
  let revokes = 0;
  const run = (text: string, params: ReadonlyArray<unknown>) =>
    Effect.tryPromise({ try: () => db.query(text, params), catch: storageError });

  const prune = run(
    `DELETE FROM playback_revocations
     WHERE until <= (extract(epoch FROM now()) * 1000)::bigint - $1`,
    [PRUNE_GRACE_MS],
  );

  return {
    revoke: (sessionId, until) =>
      Effect.zipRight(
        run(
          `INSERT INTO playback_revocations (session_id, until) VALUES ($1, $2)
           ON CONFLICT (session_id) DO UPDATE
           SET until = GREATEST(playback_revocations.until, EXCLUDED.until)`,
          [sessionId, until],
        ),
        // The revocation is stored by now; a failed prune loses nothing, the next one catches up.
        Effect.suspend(() => (++revokes % PRUNE_EVERY === 0 ? Effect.ignore(prune) : Effect.void)),
      ),
    isRevoked: (sessionId, now) =>
      Effect.map(
        run("SELECT 1 FROM playback_revocations WHERE session_id = $1 AND until > $2", [sessionId, now]),
        (result) => result.rows.length > 0,
      ),
  };
};

import type { Effect } from "effect";
import type { StorageError } from "../errors.js";
import type { Repositories } from "./repositories.js";

/**
 * The repositories, plus a unit of work. Outside `transaction` each call stands alone.
 */
export interface Storage extends Repositories {
  /**
   * Runs `work` with repositories bound to one transaction: its writes all commit when it
   * succeeds and none do when it fails. Transactions do not see each other's uncommitted writes.
   */
  transaction<A, E>(work: (tx: Repositories) => Effect.Effect<A, E>): Effect.Effect<A, E | StorageError>;
}

import {
  manualClock,
  memoryObjectStore,
  memoryRateLimiter,
  memoryRevocationStore,
  memoryStorage,
  memoryTelemetrySink,
  randomIds,
} from "@vod/adapter-memory";
import { TokenRejected, type VodPorts } from "@vod/core";
import { catalogLinks } from "@vod/http";
import { Effect } from "effect";

/**
 * The core's ports over memory, for what the HTTP suites cannot force or watch: a clock that
 * stands still (pass a `manualClock` to move it), passwords kept as `plain:<password>`, tokens that sign as JSON and never verify, and no
 * Google sign-in; `overrides` replace any of them.
 */
export const memoryCorePorts = (overrides: Partial<VodPorts> = {}): VodPorts => ({
  clock: manualClock(Date.now()),
  ids: randomIds(),
  storage: memoryStorage(),
  passwordHasher: {
    hash: (password) => Effect.succeed(`plain:${password}`),
    verify: (hash, password) => Effect.succeed(hash === `plain:${password}`),
  },
  tokenSigner: {
    sign: (_purpose, claims) => Effect.succeed(JSON.stringify(claims)),
    verify: () => Effect.fail(new TokenRejected({ reason: "signature" })),
  },
  identityVerifier: { verify: () => Effect.die("no Google sign-in here") },
  rateLimiter: memoryRateLimiter(),
  objectStore: memoryObjectStore(),
  revocationStore: memoryRevocationStore(),
  links: catalogLinks({ media: "http://localhost:8080", drm: "http://localhost:8080" }),
  telemetrySink: memoryTelemetrySink(),
  ...overrides,
});

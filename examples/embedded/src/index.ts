import { argon2PasswordHasher } from "@vod/adapter-argon2";
import { googleIdentityVerifier } from "@vod/adapter-google-identity";
import { generateSigningKeys, joseTokenSigner } from "@vod/adapter-jose";
import {
  memoryObjectStore,
  memoryRateLimiter,
  memoryRevocationStore,
  memoryStorage,
  memoryTelemetrySink,
  randomIds,
  systemClock,
} from "@vod/adapter-memory";
import { webVttTextTrackReader } from "@vod/adapter-webvtt";
import { createVod, type Vod, type VodPorts } from "@vod/core";
import { catalogLinks } from "@vod/http";
import { Effect } from "effect";

/**
 * The whole platform in one call, no container and no HTTP: what a team embedding it in its own
 * server (Fastify, Hono, a queue worker) or a test would write. `ports` replaces or adds some
 * (a storage the test keeps, a mailer).
 */
export const embeddedVod = async (ports: Partial<VodPorts> = {}): Promise<Vod> =>
  createVod({
    clock: systemClock(),
    ids: randomIds(),
    storage: memoryStorage(),
    passwordHasher: argon2PasswordHasher(),
    tokenSigner: joseTokenSigner({
      issuer: "https://vod.example",
      audience: "https://vod.example",
      keys: await generateSigningKeys(),
    }),
    identityVerifier: googleIdentityVerifier({}),
    rateLimiter: memoryRateLimiter(),
    objectStore: memoryObjectStore(),
    revocationStore: memoryRevocationStore(),
    // The addresses playback sessions and uploads hand out, as `@vod/http` serves them.
    links: catalogLinks({ media: "http://localhost:8080", drm: "http://localhost:8080" }),
    telemetrySink: memoryTelemetrySink(),
    textTrackReader: webVttTextTrackReader(),
    ...ports,
  });

/** Signs a user up, creates an API key and an asset with it, and lists the tenant's assets. */
export const walkthrough = (vod: Vod) =>
  Effect.gen(function* () {
    const signedUp = yield* vod.accounts.signup(
      {
        email: `owner-${Date.now()}@example.com`,
        password: "correct horse battery",
        tenantName: "Example Films",
      },
      "127.0.0.1",
    );
    const owner = yield* vod.authenticate({ bearer: signedUp.access_token });
    const key = yield* vod.apiKeys.create(owner, { name: "backend", scopes: ["write"] });
    const integration = yield* vod.authenticate({ apiKey: key.key });
    const { asset } = yield* vod.assets.create(integration, { title: "Launch trailer" });
    const page = yield* vod.assets.list(integration, { limit: 10 });
    return { tenant: signedUp.tenant, key, asset, page };
  });

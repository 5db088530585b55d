import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// Tests import the workspace packages by name; point those names at the sources so a test run
// never depends on a stale dist/.
const src = (dir: string, entry = "index") =>
  fileURLToPath(new URL(`./${dir}/src/${entry}.ts`, import.meta.url));

export default defineConfig({
  resolve: {
    // The test-only subpaths come first: an alias also matches the names under it.
    alias: {
      "@vod/adapter-memory/testing": src("adapters/memory", "testing"),
      "@vod/adapter-postgres/testing": src("adapters/postgres", "testing"),
      "@vod/adapter-redis/testing": src("adapters/redis", "testing"),
      "@vod/adapter-filesystem/testing": src("adapters/filesystem", "testing"),
      "@vod/adapter-gcs/testing": src("adapters/gcs", "testing"),
      "@vod/test-services/browser": src("test-services", "browser"),
      "@vod/core": src("core"),
      "@vod/http": src("http"),
      "@vod/player/files": src("clients/player", "files"),
      "@vod/adapter-memory": src("adapters/memory"),
      "@vod/adapter-postgres": src("adapters/postgres"),
      "@vod/adapter-redis": src("adapters/redis"),
      "@vod/adapter-prometheus": src("adapters/prometheus"),
      "@vod/adapter-filesystem": src("adapters/filesystem"),
      "@vod/adapter-gcs": src("adapters/gcs"),
      "@vod/adapter-ffmpeg": src("adapters/ffmpeg"),
      "@vod/adapter-jose": src("adapters/jose"),
      "@vod/adapter-argon2": src("adapters/argon2"),
      "@vod/adapter-google-identity": src("adapters/google-identity"),
      "@vod/adapter-webhook-http": src("adapters/webhook-http"),
      "@vod/adapter-smtp": src("adapters/smtp"),
      "@vod/client": src("clients/client"),
      "@vod/adapter-webvtt": src("adapters/webvtt"),
      "@vod/host-express": src("hosts/express"),
      "@vod/contract-tests": src("contract-tests"),
      "@vod/test-services": src("test-services"),
      "@vod/example-embedded": src("examples/embedded"),
      "@vod/example-fastify": src("examples/fastify"),
      "@vod/example-client": src("examples/client", "flow"),
      "@vod/example-web-page": src("examples/web-page", "server"),
    },
  },
  test: {
    include: [
      "{core,http,adapters/*,hosts/*,clients/*,contract-tests,test-services,examples/*}/test/**/*.test.ts",
      "test/**/*.test.ts",
    ],
    // The player's bundle, which the media app serves (clients/player/build.mjs), from the sources.
    globalSetup: ["contract-tests/src/global-setup.ts", "clients/player/build.mjs"],
    reporters: ["default", "./scripts/summary-reporter.ts"],
    testTimeout: 20_000,
    hookTimeout: 30_000,
  },
});

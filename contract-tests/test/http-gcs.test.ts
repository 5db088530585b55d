import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { manualClock, memoryBackdoor, memoryStorage } from "@vod/adapter-memory";
import {
  createGcsTestServer,
  describeHttpApi,
  type GcsTestServer,
  startFakeGoogle,
  testHostEnv,
  uid,
} from "@vod/contract-tests";
import { loadConfig, startHost } from "@vod/host-express";
import { afterAll, beforeAll } from "vitest";
import { gcsTestBackdoor } from "../../adapters/gcs/test/backdoor.js";

// The host composes its object store from VOD_OBJECT_STORE=gcs exactly as in production, with
// Application Default Credentials from GOOGLE_APPLICATION_CREDENTIALS, pointed at the GCS test
// server; part PUTs go to the bucket on the URLs the store signs. State is in memory, read back
// through the memory backdoor; objects are read from the test server's bucket.
let server: GcsTestServer;
beforeAll(async () => {
  server = await createGcsTestServer();
  process.env.GOOGLE_APPLICATION_CREDENTIALS = server.credentialsPath;
});
afterAll(async () => {
  delete process.env.GOOGLE_APPLICATION_CREDENTIALS;
  await server.close();
});

describeHttpApi("memory + gcs", async (env = {}) => {
  const google = await startFakeGoogle();
  const dataDir = await mkdtemp(join(tmpdir(), "vod-http-gcs-"));
  const storage = memoryStorage();
  const clock = manualClock(Date.now());
  const prefix = `${uid("h")}/`;
  const host = await startHost(
    loadConfig({
      ...testHostEnv(google, dataDir),
      VOD_OBJECT_STORE: "gcs",
      VOD_GCS_BUCKET: server.bucket,
      VOD_GCS_PREFIX: prefix,
      VOD_GCS_API_ENDPOINT: server.endpoint,
      ...env,
    }),
    { storage, clock },
  );
  return {
    baseUrl: host.url,
    backdoor: memoryBackdoor(storage.state),
    objects: gcsTestBackdoor(server, prefix),
    objectStore: { signsPartUrls: true, checksAtCompletion: false },
    clock,
    google,
    cleanup: async () => {
      await host.close(1_000);
      await google.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
});

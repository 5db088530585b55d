import { randomBytes } from "node:crypto";
import { Storage } from "@google-cloud/storage";
import { gcsObjectStore } from "@vod/adapter-gcs";
import { gcsTestBackdoor } from "@vod/adapter-gcs/testing";
import { describeObjectStore, suiteName, uid } from "@vod/contract-tests";
import { createGcsTestServer, type GcsTestServer } from "@vod/test-services";
import { Effect } from "effect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const capabilities = {
  receivePart: false,
  partUploadUrls: true,
  localPath: false,
  hashesOnAssembly: false,
} as const;

describe("GCS object store on the test server", () => {
  let server: GcsTestServer;
  beforeAll(async () => {
    // Tiny parts: the suite's bodies are KiB, and the 5 MiB rule is GCS's, not the port's.
    server = await createGcsTestServer({ minPartSize: 0 });
  });
  afterAll(() => server.close());

  const subject = (delivery: "proxy" | "redirect", signing: "service account" | "hmac") => async () => {
    const prefix = `${uid("t")}/`;
    const store = gcsObjectStore({
      bucket: server.bucket,
      prefix,
      apiEndpoint: server.endpoint,
      keyFilename: server.credentialsPath,
      delivery,
      ...(signing === "hmac" ? { hmacKey: server.hmacKey } : {}),
    });
    const backdoor = gcsTestBackdoor(server, prefix);
    return { store, backdoor, cleanup: async () => {} };
  };

  describeObjectStore("gcs (test server, proxy delivery)", subject("proxy", "service account"), {
    ...capabilities,
    deliveryUrl: false,
  });
  describeObjectStore("gcs (test server, redirect delivery)", subject("redirect", "service account"), {
    ...capabilities,
    deliveryUrl: true,
  });
  // URLs signed with the HMAC key (GOOG4-HMAC-SHA256): the same refusals, checked by the server.
  describeObjectStore("gcs (test server, HMAC-signed URLs)", subject("redirect", "hmac"), {
    ...capabilities,
    deliveryUrl: true,
  });

  it("refuses a URL signed with an HMAC secret the bucket does not know", async () => {
    const prefix = `${uid("t")}/`;
    const store = gcsObjectStore({
      bucket: server.bucket,
      prefix,
      apiEndpoint: server.endpoint,
      keyFilename: server.credentialsPath,
      delivery: "proxy",
      hmacKey: { accessId: server.hmacKey.accessId, secret: `${server.hmacKey.secret}x` },
    });
    const ref = { uploadId: uid("upl"), key: `origins/${uid("ast")}` };
    await Effect.runPromise(store.createMultipart(ref));
    const [url] = await Effect.runPromise(
      store.partUploadUrls(ref, [{ number: 1, size: 3 }], Date.now() + 60_000),
    );
    const reply = await fetch(url!, { method: "PUT", body: new Uint8Array(3) });
    expect(reply.status).toBe(403);
    expect(await reply.text()).toContain("SignatureDoesNotMatch");
    expect(server.backdoor.uploads().find((u) => u.name === `${prefix}${ref.key}`)?.parts).toEqual([]);
  });
});

// A real bucket, with Application Default Credentials, when one is named.
const realBucket = process.env.VOD_TEST_GCS_BUCKET;
describe.skipIf(!realBucket)(
  suiteName(
    "GCS object store on a real bucket",
    !!realBucket,
    "VOD_TEST_GCS_BUCKET and Application Default Credentials",
    "",
  ),
  () => {
    const bucket = realBucket ?? "";
    const prefix = `vod-contract-${randomBytes(6).toString("hex")}/`;
    // The backdoor reads through the plain SDK, beside the adapter; what the run leaves goes after.
    const sdk = new Storage();
    afterAll(async () => {
      await sdk.bucket(bucket).deleteFiles({ prefix, force: true });
    });
    describeObjectStore(
      "gcs (real bucket)",
      async () => {
        const store = gcsObjectStore({ bucket, prefix, delivery: "redirect" });
        const read = async (key: string) => {
          try {
            return new Uint8Array((await sdk.bucket(bucket).file(`${prefix}${key}`).download())[0]);
          } catch (e) {
            if ((e as { code?: number }).code === 404) return undefined;
            throw e;
          }
        };
        return {
          store,
          backdoor: {
            read,
            exists: async (key) => (await read(key)) !== undefined,
            keysUnder: async (under) =>
              (await sdk.bucket(bucket).getFiles({ prefix: `${prefix}${under}` }))[0].map((file) =>
                file.name.slice(prefix.length),
              ),
            // GCS has no call that reads a part's bytes back: the suite then checks the listing only.
          },
          cleanup: async () => {},
        };
      },
      { ...capabilities, deliveryUrl: true, minPartSize: 5 * 1024 * 1024 },
    );
  },
);

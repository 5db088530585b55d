import type { GcsTestServer, ObjectStoreBackdoor } from "@vod/contract-tests";

/**
 * What the GCS store really put in the test server's bucket, read around the protocol: objects by
 * name, and the parts of a core upload, found through the bucket upload id the store's marker
 * object (`<prefix>.multipart/<uploadId>`) records.
 */
export const gcsTestBackdoor = (server: GcsTestServer, prefix = ""): ObjectStoreBackdoor => ({
  read: async (key) => {
    const bytes = await server.backdoor.read(`${prefix}${key}`);
    return bytes && new Uint8Array(bytes);
  },
  exists: async (key) => (await server.backdoor.read(`${prefix}${key}`)) !== undefined,
  storedParts: async (uploadId) => {
    const marker = await server.backdoor.read(`${prefix}.multipart/${uploadId}`);
    const gcsId = marker && (JSON.parse(marker.toString("utf8")) as { gcsUploadId: string }).gcsUploadId;
    if (!gcsId) return [];
    return (await server.backdoor.partBodies(gcsId)).map(({ number, bytes }) => ({
      number,
      bytes: new Uint8Array(bytes),
    }));
  },
});

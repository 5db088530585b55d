// Structural, so that the adapter depends on no test package: what it reads of a
// `@vod/test-services` GCS test server, and what it answers, `@vod/contract-tests`' ObjectStoreBackdoor.
interface GcsTestServer {
  readonly backdoor: {
    read(name: string): Promise<Buffer | undefined>;
    objects(prefix?: string): Promise<ReadonlyArray<{ readonly name: string }>>;
    partBodies(uploadId: string): Promise<ReadonlyArray<{ readonly number: number; readonly bytes: Buffer }>>;
  };
}
interface ObjectStoreBackdoor {
  read(key: string): Promise<Uint8Array | undefined>;
  exists(key: string): Promise<boolean>;
  keysUnder(prefix: string): Promise<ReadonlyArray<string>>;
  storedParts(
    uploadId: string,
  ): Promise<ReadonlyArray<{ readonly number: number; readonly bytes: Uint8Array }>>;
}

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
  keysUnder: async (under) =>
    (await server.backdoor.objects(`${prefix}${under}`)).map((object) => object.name.slice(prefix.length)),
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

import {
  manualClock,
  memoryObjectStore,
  memoryRateLimiter,
  memoryRevocationStore,
  memoryStorage,
  memoryTelemetrySink,
  randomIds,
} from "@vod/adapter-memory";
import { memoryBackdoor, memoryObjectStoreBackdoor } from "@vod/adapter-memory/testing";
import { fakeMediaProcessor } from "@vod/contract-tests";
import {
  type Asset,
  AssetId,
  createVod,
  type Job,
  type MediaProcessor,
  newAssetDraft,
  originKey,
  type Principal,
  renditionKey,
  TenantId,
  type VodPorts,
} from "@vod/core";
import { catalogLinks } from "@vod/http";
import { Effect } from "effect";
import { describe, expect, it } from "vitest";

/** A port this test never runs: an effect of any of its methods dies, failing the test loudly. */
const unused = <T extends object>(name: string): T =>
  new Proxy({} as T, {
    get: (_, method) => () =>
      Effect.die(new Error(`${name}.${String(method)} was not expected in this test`)),
  });

/** The fake media processor, held after its first file until `release` is called. */
const gatedProcessor = () => {
  const inner = fakeMediaProcessor();
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let reachedGate!: () => void;
  const atGate = new Promise<void>((resolve) => {
    reachedGate = resolve;
  });
  let emitted = 0;
  const processor: MediaProcessor = {
    ...inner,
    package: (input, source, ladder, emit, options) =>
      inner.package(
        input,
        source,
        ladder,
        (file) =>
          Effect.zipRight(
            emitted++ === 1
              ? Effect.promise(() => {
                  reachedGate();
                  return released;
                })
              : Effect.void,
            emit(file),
          ),
        options,
      ),
  };
  return { processor, atGate, release };
};

/**
 * The race the deletion job leaves to processing: an asset deleted while its processing run
 * stores renditions. Whichever order the job and the run's last writes take, nothing of the
 * asset is left, and the run ends quietly.
 */
describe("deleting an asset while it is processed (memory)", () => {
  it("the run ends as skipped and removes what it stored after the deletion job ran", async () => {
    const clock = manualClock(Date.now());
    const storage = memoryStorage();
    const objects = memoryObjectStore();
    const gate = gatedProcessor();
    const ports: VodPorts = {
      clock,
      ids: randomIds(),
      storage,
      passwordHasher: unused("passwordHasher"),
      tokenSigner: unused("tokenSigner"),
      identityVerifier: unused("identityVerifier"),
      rateLimiter: memoryRateLimiter(),
      objectStore: objects,
      revocationStore: memoryRevocationStore(),
      links: catalogLinks({ media: "http://localhost:8080", drm: "http://localhost:8080" }),
      telemetrySink: memoryTelemetrySink(),
      mediaProcessor: gate.processor,
    };
    const vod = createVod(ports);
    const now = clock.now();
    const tenant = {
      id: TenantId("tnt_race"),
      slug: "race",
      name: "Race",
      plan: "free",
      status: "active",
      created_at: now,
    };
    await Effect.runPromise(storage.tenants.insert(tenant as never));
    const asset: Asset = {
      ...newAssetDraft({ id: AssetId("asset_race0000000000000"), tenant_id: tenant.id, now }),
      status: "uploaded",
      origin_size_bytes: 4,
    };
    await Effect.runPromise(storage.assets.insert(asset));
    await Effect.runPromise(
      objects.put(originKey(tenant.id, asset.id), new Uint8Array([1, 2, 3, 4]), "video/mp4"),
    );
    const principal = { kind: "api_key", tenant, keyId: "key_race", scope: "write" } as unknown as Principal;

    const job: Job<"process-asset"> = {
      id: "job_1",
      name: "process-asset",
      data: { tenant_id: tenant.id, asset_id: asset.id },
      attempt: 1,
      maxAttempts: 3,
    };
    const processing = Effect.runPromise(vod.processing.processAsset(job));
    await gate.atGate;
    expect(
      await memoryObjectStoreBackdoor(objects).exists(renditionKey(tenant.id, asset.id, "360p/init.mp4")),
    ).toBe(true);

    await Effect.runPromise(vod.assets.remove(principal, asset.id));
    const [deletion] = (await memoryBackdoor(storage).jobs()).filter((j) => j.name === "delete-asset");
    expect(deletion).toMatchObject({ data: { tenant_id: tenant.id, asset_id: asset.id, upload_ids: [] } });
    // The deletion job runs while processing still holds files to store.
    await Effect.runPromise(
      vod.assets.removeObjects({
        ...job,
        id: "job_2",
        name: "delete-asset",
        data: deletion?.data,
      } as Job<"delete-asset">),
    );
    expect(await memoryObjectStoreBackdoor(objects).exists(originKey(tenant.id, asset.id))).toBe(false);
    gate.release();

    expect(await processing).toStrictEqual({ status: "skipped" });
    for (const path of ["master.m3u8", "poster.jpg", "360p/init.mp4", "360p/seg_1.m4s", "360p/playlist.m3u8"])
      expect(await memoryObjectStoreBackdoor(objects).exists(renditionKey(tenant.id, asset.id, path))).toBe(
        false,
      );
    expect(await memoryBackdoor(storage).asset(asset.id)).toBeUndefined();
  });
});

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
  MediaRejected,
  newAssetDraft,
  originKey,
  type Principal,
  staticRenditionKey,
  TenantId,
  type VodPorts,
} from "@vod/core";
import { catalogLinks } from "@vod/http";
import { Effect, Either } from "effect";
import { describe, expect, it } from "vitest";

/** A port this test never runs: an effect of any of its methods dies, failing the test loudly. */
const unused = <T extends object>(name: string): T =>
  new Proxy({} as T, {
    get: (_, method) => () =>
      Effect.die(new Error(`${name}.${String(method)} was not expected in this test`)),
  });

/**
 * A platform on memory adapters with the fake media processor, whose `remux` is `remux(inner)`,
 * and a ready asset of `mp4_support: standard` processed by the real processing job.
 */
const setUp = async (remux: (inner: NonNullable<MediaProcessor["remux"]>) => MediaProcessor["remux"]) => {
  const clock = manualClock(Date.now());
  const storage = memoryStorage();
  const objects = memoryObjectStore();
  const inner = fakeMediaProcessor();
  const made: string[] = [];
  const processor: MediaProcessor = {
    ...inner,
    remux: (tracks, file, emit) => {
      made.push(file.path);
      return (
        remux(inner.remux as NonNullable<MediaProcessor["remux"]>) as NonNullable<MediaProcessor["remux"]>
      )(tracks, file, emit);
    },
  };
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
    mediaProcessor: processor,
  };
  const vod = createVod(ports);
  const now = clock.now();
  const tenant = {
    id: TenantId("tnt_static"),
    slug: "static",
    name: "Static",
    plan: "free",
    status: "active",
    created_at: now,
  };
  await Effect.runPromise(storage.tenants.insert(tenant as never));
  const asset: Asset = {
    ...newAssetDraft({
      id: AssetId("asset_static00000000000"),
      tenant_id: tenant.id,
      mp4_support: "standard",
      now,
    }),
    status: "uploaded",
    origin_size_bytes: 4,
  };
  await Effect.runPromise(storage.assets.insert(asset));
  await Effect.runPromise(
    objects.put(originKey(tenant.id, asset.id), new Uint8Array([1, 2, 3, 4]), "video/mp4"),
  );
  const processed = await Effect.runPromise(
    vod.processing.processAsset({
      id: "job_process",
      name: "process-asset",
      data: { tenant_id: tenant.id, asset_id: asset.id },
      attempt: 1,
      maxAttempts: 3,
    }),
  );
  expect(processed).toStrictEqual({ status: "ready" });
  const principal = { kind: "api_key", tenant, keyId: "key_static", scope: "write" } as unknown as Principal;
  const job = (attempt: number): Job<"static-renditions"> => ({
    id: `job_static_${attempt}`,
    name: "static-renditions",
    data: { tenant_id: tenant.id, asset_id: asset.id },
    attempt,
    maxAttempts: 3,
  });
  const stored = async () => (await memoryBackdoor(storage).asset(asset.id)) as unknown as Asset;
  const exists = (name: string) =>
    memoryObjectStoreBackdoor(objects).exists(staticRenditionKey(tenant.id, asset.id, name));
  return { vod, storage, objects, asset, principal, job, stored, exists, made };
};

describe("the static-renditions job (memory)", () => {
  it("is enqueued when the ladder completes; retries what failed, keeping what is ready, then marks it failed", async () => {
    const t = await setUp(
      (inner) => (tracks, file, emit) =>
        file.path === "low.mp4"
          ? Effect.fail(new MediaRejected({ code: "processing_error", message: "ffmpeg was killed" }))
          : inner(tracks, file, emit),
    );
    const enqueued = (await memoryBackdoor(t.storage).jobs()).filter((j) => j.name === "static-renditions");
    expect(enqueued.map((j) => j.data)).toStrictEqual([t.job(1).data]);

    const first = await Effect.runPromise(Effect.either(t.vod.staticRenditions.run(t.job(1))));
    expect(Either.isLeft(first) && first.left._tag).toBe("JobFailed");
    expect((await t.stored()).static_renditions).toStrictEqual([
      { name: "high.mp4", status: "ready", size_bytes: expect.any(Number) },
      { name: "low.mp4", status: "preparing", size_bytes: null },
    ]);
    expect(await t.exists("high.mp4")).toBe(true);

    const last = await Effect.runPromise(t.vod.staticRenditions.run(t.job(3)));
    expect(last).toMatchObject({ status: "failed", failure_code: "processing_error" });
    expect((await t.stored()).static_renditions.map((r) => [r.name, r.status])).toStrictEqual([
      ["high.mp4", "ready"],
      ["low.mp4", "failed"],
    ]);
    // high.mp4 was made once: the retry made only what was not ready.
    expect(t.made).toStrictEqual(["high.mp4", "low.mp4", "low.mp4"]);
    expect(await t.exists("low.mp4")).toBe(false);
  });

  it("makes again a file listed ready that is no longer stored (a removal that raced a making)", async () => {
    const t = await setUp((inner) => inner);
    expect(await Effect.runPromise(t.vod.staticRenditions.run(t.job(1)))).toStrictEqual({ status: "ready" });
    expect(t.made).toStrictEqual(["high.mp4", "low.mp4"]);
    await Effect.runPromise(
      t.objects.deletePrefix(staticRenditionKey(t.asset.tenant_id, t.asset.id, "high.mp4")),
    );
    expect(await Effect.runPromise(t.vod.staticRenditions.run(t.job(1)))).toStrictEqual({ status: "ready" });
    expect(t.made).toStrictEqual(["high.mp4", "low.mp4", "high.mp4"]);
    expect(await t.exists("high.mp4")).toBe(true);
    expect((await t.stored()).static_renditions.map((r) => r.status)).toStrictEqual(["ready", "ready"]);
  });

  it("turned off while it runs: the PATCH empties the list, and the run removes what it stored", async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let reached!: () => void;
    const atGate = new Promise<void>((resolve) => {
      reached = resolve;
    });
    const t = await setUp(
      (inner) => (tracks, file, emit) =>
        Effect.zipRight(
          inner(tracks, file, emit),
          Effect.promise(() => {
            reached();
            return released;
          }),
        ).pipe(Effect.map(() => ({ size: 1 }))),
    );
    const running = Effect.runPromise(t.vod.staticRenditions.run(t.job(1)));
    await atGate;
    expect(await t.exists("high.mp4")).toBe(true);
    const off = await Effect.runPromise(
      t.vod.assets.update(t.principal, t.asset.id, { mp4_support: "none" }),
    );
    expect(off.asset).toMatchObject({ mp4_support: "none", static_renditions: [] });
    // The PATCH enqueued the removal too; the run itself leaves nothing either way.
    const jobs = (await memoryBackdoor(t.storage).jobs()).filter((j) => j.name === "static-renditions");
    expect(jobs).toHaveLength(2);
    release();
    expect(await running).toStrictEqual({ status: "skipped" });
    expect(await t.exists("high.mp4")).toBe(false);
    expect(await t.exists("low.mp4")).toBe(false);
    expect((await t.stored()).static_renditions).toStrictEqual([]);
  });
});

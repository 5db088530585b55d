import { originKey, renditionKey } from "@vod/core";
import { describe, expect, it } from "vitest";
import {
  type Credential,
  createApiKey,
  createAsset,
  credentialOptions,
  expectError,
  expectInvalidFields,
  expectNoContent,
  expectStatus,
  type Harness,
  type MakeHttpSubject,
  SECOND,
  sendTo,
  sharedSubject,
  signUp,
  startUpload,
  type WireAsset,
  type WireUploadSession,
} from "./client.js";
import { type CreatedPlayback, untilReady, uploadAndComplete } from "./playback.js";

/** A tenant of its own with a write key and a read key. */
const tenant = async (h: Harness) => {
  const owner = await signUp(h.api);
  const write = { apiKey: (await createApiKey(h.api, { bearer: owner.access_token }, ["write"])).key };
  const read = { apiKey: (await createApiKey(h.api, { bearer: owner.access_token }, ["read"])).key };
  return { tenantId: owner.tenant.id, write, read };
};

const patch = (h: Harness, credential: Credential, id: string, json: unknown) =>
  h.api.request<{ asset: WireAsset }>("PATCH", `/v1/assets/${id}`, {
    ...credentialOptions(credential),
    json,
  });

const getAsset = (h: Harness, credential: Credential, id: string) =>
  h.api.get<{ asset: WireAsset }>(`/v1/assets/${id}`, credentialOptions(credential));

/**
 * Polls until `done` holds: the deletion job runs on the host's worker within moments. Not a
 * timed assertion: it waits for the stored state, however long the worker takes (up to the cap).
 */
const eventually = async (what: string, done: () => Promise<boolean>) => {
  for (let i = 0; i < 600; i++) {
    if (await done()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`never happened: ${what}`);
};

/** PATCH and DELETE of assets, with the deletion's background removal of the objects. */
export const describeAssetLifecycle = (makeSubject: MakeHttpSubject): void => {
  describe("asset lifecycle", () => {
    const subject = sharedSubject(makeSubject, { VOD_WORKER_CONCURRENCY: "1" });

    it("PATCH changes title and visibility (200 {asset}); public sets published_at, private clears it", async () => {
      const h = subject();
      const { write, tenantId } = await tenant(h);
      const asset = await createAsset(h.api, write, { title: "draft" });
      h.clock.advance(5 * SECOND);
      const published = expectStatus(
        await patch(h, write, asset.id, { title: "Launch trailer", visibility: "public" }),
        200,
      ).body;
      expect(published).toStrictEqual({
        asset: { ...asset, title: "Launch trailer", visibility: "public", published_at: h.clock.now() },
      });
      expect(await h.backdoor.asset(asset.id)).toStrictEqual({ ...published.asset, tenant_id: tenantId });
      expect(expectStatus(await getAsset(h, write, asset.id), 200).body).toStrictEqual(published);

      // Setting public again keeps the first time; a title alone leaves visibility as it is.
      h.clock.advance(SECOND);
      const again = expectStatus(await patch(h, write, asset.id, { visibility: "public" }), 200).body;
      expect(again.asset.published_at).toBe(published.asset.published_at);
      const hidden = expectStatus(await patch(h, write, asset.id, { visibility: "private" }), 200).body;
      expect(hidden.asset).toStrictEqual({ ...published.asset, visibility: "private", published_at: null });
      const renamed = expectStatus(await patch(h, write, asset.id, { title: "Final cut" }), 200).body;
      expect(renamed.asset).toStrictEqual({ ...hidden.asset, title: "Final cut" });
    });

    it("PATCH refuses drm_enabled, unknown fields and bad visibility (400, details.fields), changing nothing", async () => {
      const h = subject();
      const { write } = await tenant(h);
      const asset = await createAsset(h.api, write, { title: "kept" });
      expectInvalidFields(await patch(h, write, asset.id, { drm_enabled: true }), [["drm_enabled"]]);
      expectInvalidFields(await patch(h, write, asset.id, { titel: "typo" }), [["titel"]]);
      expectInvalidFields(await patch(h, write, asset.id, { visibility: "unlisted" }), [["visibility"]]);
      expectInvalidFields(await patch(h, write, asset.id, { title: "x".repeat(201) }), [["title"]]);
      expect(expectStatus(await getAsset(h, write, asset.id), 200).body.asset).toStrictEqual(asset);
    });

    it("PATCH and DELETE need the write scope (403) and see no other tenant's asset (404)", async () => {
      const h = subject();
      const mine = await tenant(h);
      const other = await tenant(h);
      const asset = await createAsset(h.api, mine.write, { title: "mine" });
      expectError(await patch(h, mine.read, asset.id, { title: "nope" }), 403, "forbidden");
      expectError(await h.api.del(`/v1/assets/${asset.id}`, credentialOptions(mine.read)), 403, "forbidden");
      expectError(await patch(h, other.write, asset.id, { title: "nope" }), 404, "not_found");
      expectError(
        await h.api.del(`/v1/assets/${asset.id}`, credentialOptions(other.write)),
        404,
        "not_found",
      );
      expectError(await patch(h, mine.write, "asset_missing", { title: "nope" }), 404, "not_found");
      expect(expectStatus(await getAsset(h, mine.write, asset.id), 200).body.asset).toStrictEqual(asset);
    });

    it("DELETE answers 204 and the asset is gone at once: GET, PATCH and a second DELETE 404, the list leaves it out", async () => {
      const h = subject();
      const { write } = await tenant(h);
      const kept = await createAsset(h.api, write, { title: "kept" });
      const asset = await createAsset(h.api, write, { title: "doomed" });
      expectNoContent(await h.api.del(`/v1/assets/${asset.id}`, credentialOptions(write)));
      expectError(await getAsset(h, write, asset.id), 404, "not_found");
      expectError(await patch(h, write, asset.id, { title: "back" }), 404, "not_found");
      expectError(await h.api.del(`/v1/assets/${asset.id}`, credentialOptions(write)), 404, "not_found");
      const list = expectStatus(
        await h.api.get<{ data: WireAsset[] }>("/v1/assets", credentialOptions(write)),
        200,
      ).body;
      expect(list.data.map((a) => a.id)).toStrictEqual([kept.id]);
      expect(await h.backdoor.asset(asset.id)).toBeUndefined();
      // Nothing new can start on it.
      expectError(
        await h.api.post("/v1/uploads", {
          ...credentialOptions(write),
          json: { asset_id: asset.id, size_bytes: 10 },
        }),
        404,
        "not_found",
      );
    });

    it("DELETE aborts the asset's open upload, and the job removes its stored parts", async () => {
      const h = subject();
      const { write, tenantId } = await tenant(h);
      const asset = await createAsset(h.api, write, { title: "half uploaded" });
      const bytes = new Uint8Array(3_000).fill(3);
      const upload = await startUpload(h.api, write, { asset_id: asset.id, size_bytes: bytes.byteLength });
      const [part] = upload.parts;
      if (part === undefined) throw new Error("no part URL");
      expectStatus(await sendTo("PUT", part.url, { body: bytes }), 200);
      expect(await h.objects.storedParts(upload.id)).toHaveLength(1);

      expectNoContent(await h.api.del(`/v1/assets/${asset.id}`, credentialOptions(write)));
      const resumed = expectStatus(
        await h.api.get<{ upload: WireUploadSession }>(`/v1/uploads/${upload.id}`, credentialOptions(write)),
        200,
      ).body;
      expect(resumed.upload.status).toBe("aborted");
      expect((await h.backdoor.upload(upload.id))?.status).toBe("aborted");
      // The job removes what was stored; after it the part URL takes no more bytes.
      await eventually("the deletion job completes", async () =>
        (await h.backdoor.jobs()).some(
          (job) =>
            job.name === "delete-asset" &&
            (job.data as { asset_id?: string }).asset_id === asset.id &&
            job.state === "completed",
        ),
      );
      expect(await h.objects.storedParts(upload.id)).toStrictEqual([]);
      expect((await sendTo("PUT", part.url, { body: bytes })).status).toBeGreaterThanOrEqual(400);
      expect(await h.objects.exists(originKey(tenantId, asset.id))).toBe(false);
    });

    it("DELETE of a ready asset ends its playback sessions (manifest refused, 401) and the job removes origin and renditions", async () => {
      const h = subject();
      const { write, tenantId } = await tenant(h);
      const asset = await createAsset(h.api, write, { title: "ready" });
      await uploadAndComplete(h.api, write, asset.id);
      await untilReady(h.api, write, asset.id);
      const origin = originKey(tenantId, asset.id);
      const master = renditionKey(tenantId, asset.id, "master.m3u8");
      expect(await h.objects.exists(origin)).toBe(true);
      expect(await h.objects.exists(master)).toBe(true);
      const played = expectStatus(
        await h.api.post<CreatedPlayback>("/v1/playback/sessions", {
          ...credentialOptions(write),
          json: { asset_id: asset.id },
        }),
        201,
      ).body;
      expectStatus(await sendTo("GET", played.urls.manifest), 200);

      expectNoContent(await h.api.del(`/v1/assets/${asset.id}`, credentialOptions(write)));
      expectError(await sendTo("GET", played.urls.manifest), 401, "unauthorized");
      expect((await h.backdoor.playbackSession(played.session.id))?.ended_at).toBe(h.clock.now());
      await eventually("origin and renditions are removed", async () => {
        const left = await Promise.all([h.objects.exists(origin), h.objects.exists(master)]);
        return left.every((exists) => !exists);
      });
      // New sessions cannot be made on it.
      expectError(
        await h.api.post("/v1/playback/sessions", {
          ...credentialOptions(write),
          json: { asset_id: asset.id },
        }),
        404,
        "not_found",
      );
    });
  });
};

import { renditionKey, staticRenditionKey } from "@vod/core";
import { describe, expect, it } from "vitest";
import {
  type Credential,
  createApiKey,
  createAsset,
  credentialOptions,
  expectError,
  expectInvalidFields,
  expectStatus,
  type Harness,
  type MakeHttpSubject,
  sendTo,
  sharedSubject,
  signUp,
  type WireAsset,
} from "./client.js";
import { type CreatedPlayback, untilReady, uploadAndComplete } from "./playback.js";

/** A tenant of its own with a write key. */
const tenant = async (h: Harness) => {
  const owner = await signUp(h.api);
  const write = { apiKey: (await createApiKey(h.api, { bearer: owner.access_token }, ["write"])).key };
  return { tenantId: owner.tenant.id, write };
};

const patch = (h: Harness, credential: Credential, id: string, json: unknown) =>
  h.api.request<{ asset: WireAsset }>("PATCH", `/v1/assets/${id}`, {
    ...credentialOptions(credential),
    json,
  });

const getAsset = async (h: Harness, credential: Credential, id: string) =>
  expectStatus(await h.api.get<{ asset: WireAsset }>(`/v1/assets/${id}`, credentialOptions(credential)), 200)
    .body.asset;

/** Polls until no static rendition of the asset is preparing (the worker's job runs within moments). */
const untilStaticSettled = async (h: Harness, credential: Credential, id: string) => {
  for (let i = 0; i < 1_200; i++) {
    const asset = await getAsset(h, credential, id);
    if (asset.static_renditions.length > 0 && asset.static_renditions.every((r) => r.status !== "preparing"))
      return asset;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the static renditions of ${id} never settled`);
};

const eventually = async (what: string, done: () => Promise<boolean>) => {
  for (let i = 0; i < 600; i++) {
    if (await done()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`never happened: ${what}`);
};

const bytesOf = async (url: string, headers: Record<string, string> = {}) => {
  const response = await fetch(url, { headers });
  return { response, bytes: Buffer.from(await response.arrayBuffer()) };
};

/**
 * Static MP4 renditions (DECISIONS "Images, downloads and text tracks") as HTTP on every adapter
 * set and object store: the asset's fields, their validation, the job a PATCH enqueues, what is
 * served and stored. The host's remux is the fake media processor's (the packaged track's bytes
 * joined), so a file is checked against the rendition it was made of; hosts/express's
 * static-renditions test makes them of real media with ffmpeg.
 */
export const describeStaticRenditions = (makeSubject: MakeHttpSubject): void => {
  describe("static renditions (mp4_support)", () => {
    const subject = sharedSubject(makeSubject, { VOD_WORKER_CONCURRENCY: "1" });

    it("creates assets with mp4_support none by default, standard when asked, and stores it", async () => {
      const h = subject();
      const { write, tenantId } = await tenant(h);
      const plain = await createAsset(h.api, write, { title: "plain" });
      expect(plain).toMatchObject({ mp4_support: "none", static_renditions: [] });
      const asked = expectStatus(
        await h.api.post<{ asset: WireAsset }>("/v1/assets", {
          ...credentialOptions(write),
          json: { title: "downloads", mp4_support: "standard" },
        }),
        201,
      ).body.asset;
      expect(asked).toMatchObject({ mp4_support: "standard", static_renditions: [] });
      expect(await h.backdoor.asset(asked.id)).toStrictEqual({ ...asked, tenant_id: tenantId });
    });

    it("refuses an unknown mp4_support, and standard for a DRM asset (400, details.fields), storing nothing", async () => {
      const h = subject();
      const { write } = await tenant(h);
      const post = (json: unknown) => h.api.post("/v1/assets", { ...credentialOptions(write), json });
      expectInvalidFields(await post({ mp4_support: "capped-1080p" }), [["mp4_support"]]);
      expectInvalidFields(await post({ mp4_support: true }), [["mp4_support"]]);
      expectInvalidFields(await post({ drm: true, mp4_support: "standard" }), [["mp4_support"]]);
      const list = await h.api.get<{ data: WireAsset[] }>("/v1/assets", credentialOptions(write));
      expect(expectStatus(list, 200).body.data).toStrictEqual([]);

      const drm = await createAsset(h.api, write, { title: "protected", drm: true });
      expectInvalidFields(await patch(h, write, drm.id, { mp4_support: "standard" }), [["mp4_support"]]);
      expectInvalidFields(await patch(h, write, drm.id, { mp4_support: "all" }), [["mp4_support"]]);
      expect(await getAsset(h, write, drm.id)).toStrictEqual(drm);
      // Off is what a DRM asset has: asking for it again is no change.
      expect(
        expectStatus(await patch(h, write, drm.id, { mp4_support: "none" }), 200).body.asset,
      ).toStrictEqual(drm);
    });

    it("PATCH standard on a ready asset makes high.mp4 and low.mp4 of its highest and lowest renditions, served with ranges and downloads", async () => {
      const h = subject();
      const { write, tenantId } = await tenant(h);
      const created = await createAsset(h.api, write, { title: "clip" });
      await uploadAndComplete(h.api, write, created.id);
      const ready = await untilReady(h.api, write, created.id);
      const before = expectStatus(
        await h.api.post<CreatedPlayback & { urls: Record<string, string> }>("/v1/playback/sessions", {
          ...credentialOptions(write),
          json: { asset_id: created.id },
        }),
        201,
      ).body;
      expect(Object.keys(before.urls)).not.toContain("mp4_high");
      const files = before.urls.manifest.replace(/master\.m3u8$/, "");
      expectError(await sendTo("GET", `${files}high.mp4`), 404, "not_found");

      const patched = expectStatus(await patch(h, write, created.id, { mp4_support: "standard" }), 200).body
        .asset;
      expect(patched).toMatchObject({ mp4_support: "standard" });
      const asset = await untilStaticSettled(h, write, created.id);
      // The fake source has no audio track packaged: no audio.m4a.
      expect(asset.static_renditions.map((r) => [r.name, r.status])).toEqual([
        ["high.mp4", "ready"],
        ["low.mp4", "ready"],
      ]);
      expect(await h.backdoor.asset(created.id)).toMatchObject({
        static_renditions: asset.static_renditions,
      });

      const heights = ready.renditions
        .filter((r) => r.status === "ready")
        .sort((a, b) => a.height - b.height);
      const source = { "high.mp4": heights[heights.length - 1], "low.mp4": heights[0] };
      const session = expectStatus(
        await h.api.post<CreatedPlayback & { urls: Record<string, string> }>("/v1/playback/sessions", {
          ...credentialOptions(write),
          json: { asset_id: created.id },
        }),
        201,
      ).body;
      const base = session.urls.manifest.replace(/master\.m3u8$/, "");
      expect(session.urls.mp4_high).toBe(`${base}high.mp4`);
      expect(session.urls.mp4_low).toBe(`${base}low.mp4`);
      expect(Object.keys(session.urls)).not.toContain("audio");
      expectError(await sendTo("GET", `${base}audio.m4a`), 404, "not_found");

      for (const name of ["high.mp4", "low.mp4"] as const) {
        const rendition = source[name]?.name as string;
        // Made of the rendition's own packaged bytes: its init segment and its segment.
        const init = await h.objects.read(renditionKey(tenantId, created.id, `${rendition}/init.mp4`));
        const segment = await h.objects.read(renditionKey(tenantId, created.id, `${rendition}/seg_1.m4s`));
        const expected = Buffer.concat([init ?? new Uint8Array(), segment ?? new Uint8Array()]);
        const stored = await h.objects.read(staticRenditionKey(tenantId, created.id, name));
        expect(Buffer.from(stored ?? []).equals(expected), name).toBe(true);
        expect(asset.static_renditions.find((r) => r.name === name)?.size_bytes).toBe(expected.length);

        const whole = await bytesOf(`${base}${name}`);
        expect(whole.response.status).toBe(200);
        expect(whole.response.headers.get("content-type")).toBe("video/mp4");
        expect(whole.bytes.equals(expected)).toBe(true);

        const head = await fetch(`${base}${name}`, { method: "HEAD" });
        expect(head.status).toBe(200);
        expect(head.headers.get("content-type")).toBe("video/mp4");

        // A download is answered by the media app on every store: its ranges too.
        const download = `${base}${name}?download=${encodeURIComponent(`clip ${name}`)}`;
        const part = await bytesOf(download, { range: "bytes=2-9", origin: "https://shop.example" });
        // A page on any origin may read the file's name.
        expect(part.response.headers.get("access-control-expose-headers")?.toLowerCase()).toContain(
          "content-disposition",
        );
        expect(part.response.status).toBe(206);
        expect(part.response.headers.get("content-range")).toBe(`bytes 2-9/${expected.length}`);
        expect(part.response.headers.get("content-disposition")).toBe(`attachment; filename="clip ${name}"`);
        expect(part.bytes.equals(expected.subarray(2, 10))).toBe(true);
        const past = await sendTo("GET", download, { headers: { range: `bytes=${expected.length}-` } });
        expect(expectError(past, 416, "invalid_request").details).toMatchObject({ size: expected.length });
      }
      // Only their own routes serve them: not as a file of the renditions.
      expectError(await sendTo("GET", `${base}static/high.mp4`), 404, "not_found");
      expectInvalidFields(await sendTo("GET", `${base}high.mp4?download=a%2Fb.mp4`), [["download"]]);
      expectInvalidFields(await sendTo("GET", `${base}low.mp4?download=`), [["download"]]);
    });

    it("makes them once the ladder completes for an asset created with standard; none turns them off and removes the files", async () => {
      const h = subject();
      const { write, tenantId } = await tenant(h);
      const created = expectStatus(
        await h.api.post<{ asset: WireAsset }>("/v1/assets", {
          ...credentialOptions(write),
          json: { title: "from the start", mp4_support: "standard" },
        }),
        201,
      ).body.asset;
      await uploadAndComplete(h.api, write, created.id);
      const asset = await untilStaticSettled(h, write, created.id);
      expect(asset.static_renditions.map((r) => r.status)).toEqual(["ready", "ready"]);
      const high = staticRenditionKey(tenantId, created.id, "high.mp4");
      const low = staticRenditionKey(tenantId, created.id, "low.mp4");
      expect(await h.objects.exists(high)).toBe(true);

      const off = expectStatus(await patch(h, write, created.id, { mp4_support: "none" }), 200).body.asset;
      expect(off).toMatchObject({ mp4_support: "none", static_renditions: [] });
      const session = expectStatus(
        await h.api.post<CreatedPlayback & { urls: Record<string, string> }>("/v1/playback/sessions", {
          ...credentialOptions(write),
          json: { asset_id: created.id },
        }),
        201,
      ).body;
      expect(Object.keys(session.urls)).not.toContain("mp4_high");
      const base = session.urls.manifest.replace(/master\.m3u8$/, "");
      expectError(await sendTo("GET", `${base}high.mp4`), 404, "not_found");
      await eventually(
        "the static renditions' files removed",
        async () => !(await h.objects.exists(high)) && !(await h.objects.exists(low)),
      );
      // The renditions stay.
      expect(await h.objects.exists(renditionKey(tenantId, created.id, "master.m3u8"))).toBe(true);
    });

    it("removes the static renditions' files with the asset", async () => {
      const h = subject();
      const { write, tenantId } = await tenant(h);
      const created = await createAsset(h.api, write, { title: "gone" });
      await uploadAndComplete(h.api, write, created.id);
      await untilReady(h.api, write, created.id);
      expectStatus(await patch(h, write, created.id, { mp4_support: "standard" }), 200);
      await untilStaticSettled(h, write, created.id);
      const high = staticRenditionKey(tenantId, created.id, "high.mp4");
      expect(await h.objects.exists(high)).toBe(true);
      expect((await h.api.del(`/v1/assets/${created.id}`, credentialOptions(write))).status).toBe(204);
      await eventually("the asset's files removed", async () => !(await h.objects.exists(high)));
    });
  });
};

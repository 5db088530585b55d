import { describe, expect, it } from "vitest";
import {
  type AssetPage,
  type Credential,
  createApiKey,
  createAsset,
  credentialOptions,
  expectError,
  expectInvalidFields,
  expectStatus,
  type HttpClient,
  type MakeHttpSubject,
  SECOND,
  sharedSubject,
  signUp,
  type WireAsset,
} from "./client.js";

/** Every field of a new draft. */
const draft = (fields: {
  id?: unknown;
  title: string;
  drm_enabled: boolean;
  mp4_support?: "none" | "standard";
  created_at: number;
}): WireAsset =>
  ({
    id: fields.id ?? expect.any(String),
    title: fields.title,
    status: "pending",
    failure_code: null,
    source_width: null,
    source_height: null,
    source_fps: null,
    source_codec: null,
    source_duration_ms: null,
    source_bitrate_kbps: null,
    origin_size_bytes: null,
    checksum_sha256: null,
    drm_enabled: fields.drm_enabled,
    visibility: "private",
    published_at: null,
    renditions: [],
    ready_at: null,
    mp4_support: fields.mp4_support ?? "none",
    static_renditions: [],
    created_at: fields.created_at,
  }) as WireAsset;

/** Walks every page of GET /v1/assets with `query`, returning the pages. */
const allPages = async (api: HttpClient, credential: Credential, query: string): Promise<AssetPage[]> => {
  const pages: AssetPage[] = [];
  let cursor: string | null = null;
  do {
    const path: string = `/v1/assets?${query}${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`;
    const page: AssetPage = expectStatus(
      await api.get<AssetPage>(path, credentialOptions(credential)),
      200,
    ).body;
    pages.push(page);
    cursor = page.next_cursor;
    if (pages.length > 50) throw new Error("pagination does not end");
  } while (cursor !== null);
  return pages;
};

/** Asset drafts: create, get, and the keyset-paginated list. */
export const describeAssets = (makeSubject: MakeHttpSubject): void => {
  describe("assets", () => {
    const subject = sharedSubject(makeSubject);

    it("creates a draft (201) with every field, DRM as asked, and stores it in the tenant", async () => {
      const { api, backdoor, clock } = subject();
      const account = await signUp(api);
      const reply = await api.post<{ asset: WireAsset }>("/v1/assets", {
        bearer: account.access_token,
        json: { title: "Launch trailer", drm: true },
      });
      expect(reply.status).toBe(201);
      expect(reply.body).toStrictEqual({
        asset: draft({ title: "Launch trailer", drm_enabled: true, created_at: clock.now() }),
      });
      expect(await backdoor.asset(reply.body.asset.id)).toStrictEqual({
        ...reply.body.asset,
        tenant_id: account.tenant.id,
      });
    });

    it("titles a draft Untitled and leaves DRM off when the body omits them, or is absent", async () => {
      const { api, clock } = subject();
      const account = await signUp(api);
      const empty = await api.post<{ asset: WireAsset }>("/v1/assets", {
        bearer: account.access_token,
        json: {},
      });
      expect(empty.status).toBe(201);
      expect(empty.body.asset).toStrictEqual(
        draft({ title: "Untitled", drm_enabled: false, created_at: clock.now() }),
      );
      const none = await api.post<{ asset: WireAsset }>("/v1/assets", { bearer: account.access_token });
      expect(none.status).toBe(201);
      expect(none.body.asset).toStrictEqual(
        draft({ title: "Untitled", drm_enabled: false, created_at: clock.now() }),
      );
      const off = await createAsset(api, { bearer: account.access_token }, { title: "Clear", drm: false });
      expect(off.drm_enabled).toBe(false);
    });

    it("refuses a title of 201 characters and a drm that is not a boolean; accepts 200", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const post = (json: unknown) => api.post("/v1/assets", { bearer: account.access_token, json });
      expectInvalidFields(await post({ title: "t".repeat(201) }), [["title"]]);
      expectInvalidFields(await post({ drm: "yes" }), [["drm"]]);
      expectStatus(await post({ title: "t".repeat(200) }), 201);
    });

    it("gets an asset (200), and answers 404 for an unknown id or another tenant's asset", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const stranger = await signUp(api);
      const asset = await createAsset(api, { bearer: account.access_token }, { title: "Mine" });
      const got = await api.get<{ asset: WireAsset }>(`/v1/assets/${asset.id}`, {
        bearer: account.access_token,
      });
      expect(got.status).toBe(200);
      expect(got.body).toStrictEqual({ asset });
      expectError(
        await api.get(`/v1/assets/${asset.id}`, { bearer: stranger.access_token }),
        404,
        "not_found",
      );
      expectError(
        await api.get("/v1/assets/ast_doesnotexist00000000", { bearer: account.access_token }),
        404,
        "not_found",
      );
      const theirs = expectStatus(
        await api.get<AssetPage>("/v1/assets", { bearer: stranger.access_token }),
        200,
      );
      expect(theirs.body).toStrictEqual({ data: [], next_cursor: null });
    });

    it("lets a read key get and list assets but not create them (403)", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const asset = await createAsset(api, { bearer: account.access_token });
      const read = await createApiKey(api, { bearer: account.access_token }, ["read"]);
      expectError(
        await api.post("/v1/assets", { apiKey: read.key, json: { title: "no" } }),
        403,
        "forbidden",
      );
      expectStatus(await api.get(`/v1/assets/${asset.id}`, { apiKey: read.key }), 200);
      const list = expectStatus(await api.get<AssetPage>("/v1/assets", { apiKey: read.key }), 200);
      expect(list.body).toStrictEqual({ data: [asset], next_cursor: null });
      const write = await createApiKey(api, { bearer: account.access_token }, ["write"]);
      await createAsset(api, { apiKey: write.key });
    });

    it("pages through every asset newest first with limit=2, ending with next_cursor null", async () => {
      const { api, clock } = subject();
      const account = await signUp(api);
      const created: WireAsset[] = [];
      for (let i = 1; i <= 5; i++) {
        created.push(await createAsset(api, { bearer: account.access_token }, { title: `Asset ${i}` }));
        clock.advance(SECOND);
      }
      const pages = await allPages(api, { bearer: account.access_token }, "limit=2");
      expect(pages.map((p) => p.data.length)).toEqual([2, 2, 1]);
      expect(pages.slice(0, -1).every((p) => typeof p.next_cursor === "string")).toBe(true);
      expect(pages.at(-1)?.next_cursor).toBeNull();
      const seen = pages.flatMap((p) => p.data);
      expect(seen).toStrictEqual([...created].reverse());
    });

    it("pages assets created in the same millisecond without duplicates or gaps", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const created = await Promise.all(
        Array.from({ length: 5 }, () => createAsset(api, { bearer: account.access_token })),
      );
      const seen = (await allPages(api, { bearer: account.access_token }, "limit=2")).flatMap((p) => p.data);
      expect(seen).toHaveLength(5);
      expect(new Set(seen.map((a) => a.id)).size).toBe(5);
      expect(seen.map((a) => a.id).sort()).toEqual(created.map((a) => a.id).sort());
    });

    it("filters by status", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const a = await createAsset(api, { bearer: account.access_token });
      const pending = await api.get<AssetPage>("/v1/assets?status=pending", { bearer: account.access_token });
      expect(pending.status).toBe(200);
      expect(pending.body).toStrictEqual({ data: [a], next_cursor: null });
      for (const status of ["uploaded", "processing", "ready", "failed"]) {
        const other = await api.get<AssetPage>(`/v1/assets?status=${status}`, {
          bearer: account.access_token,
        });
        expect(other.status).toBe(200);
        expect(other.body).toStrictEqual({ data: [], next_cursor: null });
      }
      expectInvalidFields(await api.get("/v1/assets?status=bogus", { bearer: account.access_token }), [
        ["status"],
      ]);
    });

    it("refuses limit=0, limit=101, limit=abc and limit=1.5 with 400", async () => {
      const { api } = subject();
      const account = await signUp(api);
      for (const limit of ["0", "101", "abc", "1.5", "-1", "1&limit=2"]) {
        const reply = await api.get(`/v1/assets?limit=${limit}`, { bearer: account.access_token });
        expectInvalidFields(reply, [["limit"]]);
      }
      expectStatus(await api.get("/v1/assets?limit=1", { bearer: account.access_token }), 200);
      expectStatus(await api.get("/v1/assets?limit=100", { bearer: account.access_token }), 200);
    });

    it("refuses a tampered cursor, and a cursor of another tenant, with 400", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const stranger = await signUp(api);
      for (let i = 0; i < 3; i++) await createAsset(api, { bearer: account.access_token });
      await createAsset(api, { bearer: stranger.access_token });
      const first = expectStatus(
        await api.get<AssetPage>("/v1/assets?limit=1", { bearer: account.access_token }),
        200,
      ).body;
      const cursor = first.next_cursor;
      if (cursor === null) throw new Error("expected a next page");
      const list = (c: string, bearer: string) =>
        api.get(`/v1/assets?limit=1&cursor=${encodeURIComponent(c)}`, { bearer });
      expectStatus(await list(cursor, account.access_token), 200);

      const flip = (text: string, at: number) =>
        `${text.slice(0, at)}${text[at] === "A" ? "B" : "A"}${text.slice(at + 1)}`;
      for (const tampered of [flip(cursor, 0), flip(cursor, cursor.length - 1), "garbage", `${cursor}.x`]) {
        expectInvalidFields(await list(tampered, account.access_token), [["cursor"]]);
      }
      expectInvalidFields(await list(cursor, stranger.access_token), [["cursor"]]);
    });

    it("returns 50 assets when no limit is given", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const ids = new Set<string>();
      for (let batch = 0; batch < 3; batch++) {
        const made = await Promise.all(
          Array.from({ length: 17 }, () => createAsset(api, { bearer: account.access_token })),
        );
        for (const a of made) ids.add(a.id);
      }
      expect(ids.size).toBe(51);
      const first = expectStatus(
        await api.get<AssetPage>("/v1/assets", { bearer: account.access_token }),
        200,
      ).body;
      expect(first.data).toHaveLength(50);
      expect(first.next_cursor).toEqual(expect.any(String));
      const rest = expectStatus(
        await api.get<AssetPage>(`/v1/assets?cursor=${encodeURIComponent(first.next_cursor ?? "")}`, {
          bearer: account.access_token,
        }),
        200,
      ).body;
      expect(rest.data).toHaveLength(1);
      expect(rest.next_cursor).toBeNull();
      expect(new Set([...first.data, ...rest.data].map((a) => a.id))).toEqual(ids);
    });
  });
};

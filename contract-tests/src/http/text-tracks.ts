import { textTrackKey } from "@vod/core";
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
  MiB,
  sharedSubject,
  signUp,
  type WireAsset,
} from "./client.js";
import { type CreatedPlayback, untilReady, uploadAndComplete } from "./playback.js";

interface WireTextTrack {
  id: string;
  type: "text";
  language_code: string;
  name: string;
  closed_captions: boolean;
  status: "ready";
  created_at: number;
}

const VTT = [
  "WEBVTT",
  "",
  "NOTE made for the contract",
  "",
  "first",
  "00:00:00.500 --> 00:00:02.000 align:start",
  "Bonjour",
  "",
  "00:00:05.000 --> 00:00:07.000",
  "Across a segment boundary",
  "",
].join("\n");

const SRT = [
  "1",
  "00:00:01,000 --> 00:00:03,500",
  "Olá",
  "",
  "2",
  "00:00:03,600 --> 00:00:04,000",
  "tchau",
  "",
].join("\r\n");

const BROKEN_VTT = [
  "WEBVTT",
  "",
  "00:00:01.000 --> 00:00:02.000",
  "ok",
  "",
  "00:00:0x.000 --> 00:00:03.000",
  "bad",
  "",
].join("\n");

/**
 * Text tracks (DECISIONS "Images, downloads and text tracks") on every adapter set and object
 * store: the routes, what is stored (rows and objects), the manifests a session fetches, the
 * refusals and the limit. The renditions are the fake media processor's (a 4 s source); the
 * real-media test is hosts/express's text-tracks test.
 */
export const describeTextTracks = (makeSubject: MakeHttpSubject): void => {
  describe("text tracks", () => {
    const subject = sharedSubject(makeSubject, { VOD_WORKER_CONCURRENCY: "1" });

    const tenant = async (h: Harness) => {
      const owner = await signUp(h.api);
      const write = await createApiKey(h.api, { bearer: owner.access_token }, ["write"]);
      const read = await createApiKey(h.api, { bearer: owner.access_token }, ["read"]);
      return {
        owner,
        credential: { apiKey: write.key } as Credential,
        read: { apiKey: read.key } as Credential,
      };
    };

    const readyAsset = async (h: Harness, credential: Credential): Promise<WireAsset> => {
      const asset = await createAsset(h.api, credential, { title: "captioned" });
      await uploadAndComplete(h.api, credential, asset.id);
      return untilReady(h.api, credential, asset.id);
    };

    const add = (h: Harness, credential: Credential, assetId: string, body: unknown) =>
      h.api.post<{ track: WireTextTrack }>(`/v1/assets/${assetId}/tracks`, {
        ...credentialOptions(credential),
        json: body,
      });

    const list = async (h: Harness, credential: Credential, assetId: string) =>
      expectStatus(
        await h.api.get<{ data: WireTextTrack[] }>(
          `/v1/assets/${assetId}/tracks`,
          credentialOptions(credential),
        ),
        200,
      ).body.data;

    const session = async (h: Harness, credential: Credential, assetId: string) =>
      expectStatus(
        await h.api.post<CreatedPlayback>("/v1/playback/sessions", {
          ...credentialOptions(credential),
          json: { asset_id: assetId },
        }),
        201,
      ).body;

    const text = async (url: string) => {
      const res = await fetch(url);
      return { status: res.status, type: res.headers.get("content-type"), body: await res.text() };
    };

    it("adds a WebVTT and an SRT track: 201, stored as WebVTT under the asset, listed oldest first", async () => {
      const h = subject();
      const { owner, credential, read } = await tenant(h);
      const asset = await readyAsset(h, credential);
      const before = h.clock.now();
      const vtt = expectStatus(
        await add(h, credential, asset.id, { type: "text", language_code: "fr", content: VTT }),
        201,
      ).body.track;
      expect(vtt).toStrictEqual({
        id: expect.any(String),
        type: "text",
        language_code: "fr",
        name: "French",
        closed_captions: false,
        status: "ready",
        created_at: expect.any(Number),
      });
      expect(vtt.created_at).toBeGreaterThanOrEqual(before);
      h.clock.advance(1_000);
      const srt = expectStatus(
        await add(h, credential, asset.id, {
          type: "text",
          language_code: "PT-br",
          name: "Português (CC)",
          closed_captions: true,
          content: SRT,
        }),
        201,
      ).body.track;
      expect(srt).toMatchObject({ language_code: "pt-BR", name: "Português (CC)", closed_captions: true });

      expect((await list(h, read, asset.id)).map((t) => t.id)).toEqual([vtt.id, srt.id]);
      expect(await h.backdoor.textTrack(srt.id)).toMatchObject({
        id: srt.id,
        tenant_id: owner.tenant.id,
        asset_id: asset.id,
        language_code: "pt-BR",
        closed_captions: true,
        deleted_at: null,
      });
      const stored = await h.objects.read(textTrackKey(owner.tenant.id, asset.id, `${srt.id}.vtt`));
      expect(new TextDecoder().decode(stored)).toBe(
        "WEBVTT\n\n1\n00:00:01.000 --> 00:00:03.500\nOlá\n\n2\n00:00:03.600 --> 00:00:04.000\ntchau\n",
      );
      // Three objects a track, whatever its length: the whole file, the segments, the playlist.
      for (const name of [`${vtt.id}.vtt`, `${vtt.id}-segments.vtt`, `${vtt.id}.m3u8`])
        expect(await h.objects.exists(textTrackKey(owner.tenant.id, asset.id, name))).toBe(true);
    });

    it("lists ready tracks in the session's HLS master (one subtitle group) and DASH manifest; their files play", async () => {
      const h = subject();
      const { credential } = await tenant(h);
      const asset = await readyAsset(h, credential);
      const fr = expectStatus(
        await add(h, credential, asset.id, { type: "text", language_code: "fr", content: VTT }),
        201,
      ).body.track;
      // Listed oldest first: the second is a second younger.
      h.clock.advance(1_000);
      const pt = expectStatus(
        await add(h, credential, asset.id, {
          type: "text",
          language_code: "pt-BR",
          closed_captions: true,
          content: SRT,
        }),
        201,
      ).body.track;
      const { urls } = await session(h, credential, asset.id);

      const master = await text(urls.manifest);
      expect(master.status).toBe(200);
      const media = master.body.split("\n").filter((l) => l.startsWith("#EXT-X-MEDIA:TYPE=SUBTITLES"));
      expect(media).toEqual([
        `#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="French",LANGUAGE="fr",DEFAULT=NO,AUTOSELECT=YES,FORCED=NO,URI="text/${fr.id}.m3u8"`,
        `#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="Brazilian Portuguese",LANGUAGE="pt-BR",DEFAULT=NO,AUTOSELECT=YES,FORCED=NO,CHARACTERISTICS="public.accessibility.transcribes-spoken-dialog,public.accessibility.describes-music-and-sound",URI="text/${pt.id}.m3u8"`,
      ]);
      const variants = master.body.split("\n").filter((l) => l.startsWith("#EXT-X-STREAM-INF:"));
      expect(variants.length).toBe(2);
      for (const v of variants) expect(v).toMatch(/,SUBTITLES="subs"$/);

      const base = urls.manifest.slice(0, urls.manifest.lastIndexOf("/") + 1);
      const playlist = await text(`${base}text/${fr.id}.m3u8`);
      expect(playlist.status).toBe(200);
      expect(playlist.body).toContain("#EXT-X-TARGETDURATION:6\n");
      // The fake's 4 s source and a cue to 7 s: two segments, 6 s and 1 s, byte ranges of one file.
      const ranges = [...playlist.body.matchAll(/#EXTINF:([\d.]+),\n#EXT-X-BYTERANGE:(\d+)@(\d+)\n(\S+)\n/g)];
      expect(ranges.map((m) => [m[1], m[4]])).toEqual([
        ["6.000", `${fr.id}-segments.vtt`],
        ["1.000", `${fr.id}-segments.vtt`],
      ]);
      const segment = async (i: number) => {
        const [, , length, offset] = ranges[i]!;
        const res = await fetch(`${base}text/${fr.id}-segments.vtt`, {
          headers: { range: `bytes=${offset}-${Number(offset) + Number(length) - 1}` },
        });
        expect(res.status).toBe(206);
        expect(res.headers.get("content-type")).toMatch(/^text\/vtt/);
        return res.text();
      };
      expect(await segment(1)).toBe(
        "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000\n\n00:00:05.000 --> 00:00:07.000\nAcross a segment boundary\n",
      );
      // The cue from 5 s to 7 s crosses the boundary at 6 s: in both segments.
      const first = await segment(0);
      expect(
        first.startsWith("WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000\n\nfirst\n00:00:00.500"),
      ).toBe(true);
      expect(first).toContain("Across a segment boundary");

      const dash = await text(urls.dash);
      expect(dash.status).toBe(200);
      expect(dash.type).toMatch(/^application\/dash\+xml/);
      const sets = [
        ...dash.body.matchAll(/<AdaptationSet [^>]*contentType="text"[\s\S]*?<\/AdaptationSet>/g),
      ].map((m) => m[0]);
      expect(sets).toHaveLength(2);
      expect(sets[0]).toContain('lang="fr"');
      expect(sets[0]).toContain('value="subtitle"');
      expect(sets[0]).toContain(`<BaseURL>text/${fr.id}.vtt</BaseURL>`);
      expect(sets[1]).toContain('lang="pt-BR"');
      expect(sets[1]).toContain('value="caption"');
      const whole = await text(`${base}text/${pt.id}.vtt`);
      expect(whole.status).toBe(200);
      expect(whole.body.startsWith("WEBVTT\n\n1\n00:00:01.000 --> 00:00:03.500\nOlá")).toBe(true);
    });

    it("removes a track: 204, gone from the list, the manifests and the store; again 404", async () => {
      const h = subject();
      const { owner, credential } = await tenant(h);
      const asset = await readyAsset(h, credential);
      const kept = expectStatus(
        await add(h, credential, asset.id, { type: "text", language_code: "en", content: VTT }),
        201,
      ).body.track;
      const gone = expectStatus(
        await add(h, credential, asset.id, { type: "text", language_code: "de", content: SRT }),
        201,
      ).body.track;
      const { urls } = await session(h, credential, asset.id);
      expect((await text(urls.manifest)).body).toContain(`URI="text/${gone.id}.m3u8"`);

      const path = `/v1/assets/${asset.id}/tracks/${gone.id}`;
      expectNoContent(await h.api.del(path, credentialOptions(credential)));
      expect((await list(h, credential, asset.id)).map((t) => t.id)).toEqual([kept.id]);
      const master = (await text(urls.manifest)).body;
      expect(master).not.toContain(gone.id);
      expect(master).toContain(`URI="text/${kept.id}.m3u8"`);
      expect((await text(urls.dash)).body).not.toContain(gone.id);
      expect(await h.objects.exists(textTrackKey(owner.tenant.id, asset.id, `${gone.id}.vtt`))).toBe(false);
      expect(await h.objects.exists(textTrackKey(owner.tenant.id, asset.id, `${gone.id}-segments.vtt`))).toBe(
        false,
      );
      expect(await h.objects.exists(textTrackKey(owner.tenant.id, asset.id, `${gone.id}.m3u8`))).toBe(false);
      expect((await h.backdoor.textTrack(gone.id))?.deleted_at).toEqual(expect.any(Number));
      expectError(await h.api.del(path, credentialOptions(credential)), 404, "not_found");
      // Without tracks the master is the stored one again.
      expectNoContent(
        await h.api.del(`/v1/assets/${asset.id}/tracks/${kept.id}`, credentialOptions(credential)),
      );
      expect((await text(urls.manifest)).body).not.toContain("SUBTITLES");
    });

    it("refuses content that is neither WebVTT nor SRT with 400 naming the line, and bad fields by name", async () => {
      const h = subject();
      const { credential } = await tenant(h);
      const asset = await createAsset(h.api, credential, { title: "drafts take tracks too" });
      const broken = expectInvalidFields(
        await add(h, credential, asset.id, { type: "text", language_code: "en", content: BROKEN_VTT }),
        [["content"]],
      );
      expect(broken[0]?.message).toMatch(/^line 6: /);
      const body = (
        await add(h, credential, asset.id, { type: "text", language_code: "en", content: "just words" })
      ).body as unknown as { details: { line: number } };
      expect(body.details.line).toBe(1);
      expectInvalidFields(
        await add(h, credential, asset.id, { type: "audio", language_code: "en", content: VTT }),
        [["type"]],
      );
      expectInvalidFields(
        await add(h, credential, asset.id, { type: "text", language_code: "not a language", content: VTT }),
        [["language_code"]],
      );
      expectInvalidFields(await add(h, credential, asset.id, { type: "text", content: VTT }), [
        ["language_code"],
      ]);
      expectInvalidFields(
        await add(h, credential, asset.id, { type: "text", language_code: "en", name: "", content: VTT }),
        [["name"]],
      );
      const big = `WEBVTT\n\n00:00:01.000 --> 00:00:02.000\n${"x".repeat(2 * MiB)}\n`;
      expectInvalidFields(
        await add(h, credential, asset.id, { type: "text", language_code: "en", content: big }),
        [["content"]],
      );
      // Exactly 2 MiB of content is taken.
      const fits = `WEBVTT\n\n00:00:01.000 --> 00:00:02.000\n`;
      expectStatus(
        await add(h, credential, asset.id, {
          type: "text",
          language_code: "en",
          content: `${fits}${"y".repeat(2 * MiB - fits.length)}`,
        }),
        201,
      );
      expect((await list(h, credential, asset.id)).length).toBe(1);
    });

    it("takes 30 tracks per asset; the 31st is 409 quota_exceeded until one is removed", async () => {
      const h = subject();
      const { credential } = await tenant(h);
      const asset = await createAsset(h.api, credential, { title: "many languages" });
      const ids: string[] = [];
      for (let i = 0; i < 29; i++)
        ids.push(
          expectStatus(
            await add(h, credential, asset.id, { type: "text", language_code: "en", content: VTT }),
            201,
          ).body.track.id,
        );
      // Three at once for the last place: one gets it.
      const racing = await Promise.all(
        [1, 2, 3].map(() =>
          add(h, credential, asset.id, { type: "text", language_code: "en", content: VTT }),
        ),
      );
      expect(racing.map((r) => r.status).sort()).toEqual([201, 409, 409]);
      const refused = expectError(
        await add(h, credential, asset.id, { type: "text", language_code: "en", content: VTT }),
        409,
        "conflict",
      );
      expect(refused.details).toEqual({ reason: "quota_exceeded", limit: 30 });
      expect((await list(h, credential, asset.id)).length).toBe(30);
      expectNoContent(
        await h.api.del(`/v1/assets/${asset.id}/tracks/${ids[0]}`, credentialOptions(credential)),
      );
      expectStatus(
        await add(h, credential, asset.id, { type: "text", language_code: "en", content: VTT }),
        201,
      );
    });

    it("needs write to add or remove and read to list; another tenant's asset or track is 404", async () => {
      const h = subject();
      const a = await tenant(h);
      const b = await tenant(h);
      const asset = await createAsset(h.api, a.credential, { title: "mine" });
      const track = expectStatus(
        await add(h, a.credential, asset.id, { type: "text", language_code: "en", content: VTT }),
        201,
      ).body.track;
      expectError(
        await add(h, a.read, asset.id, { type: "text", language_code: "en", content: VTT }),
        403,
        "forbidden",
      );
      expectError(
        await h.api.del(`/v1/assets/${asset.id}/tracks/${track.id}`, credentialOptions(a.read)),
        403,
        "forbidden",
      );
      expectError(
        await add(h, b.credential, asset.id, { type: "text", language_code: "en", content: VTT }),
        404,
        "not_found",
      );
      expectError(
        await h.api.get(`/v1/assets/${asset.id}/tracks`, credentialOptions(b.credential)),
        404,
        "not_found",
      );
      expectError(
        await h.api.del(`/v1/assets/${asset.id}/tracks/${track.id}`, credentialOptions(b.credential)),
        404,
        "not_found",
      );
      const other = await createAsset(h.api, b.credential, { title: "theirs" });
      expectError(
        await h.api.del(`/v1/assets/${other.id}/tracks/${track.id}`, credentialOptions(b.credential)),
        404,
        "not_found",
      );
      expect((await list(h, a.credential, asset.id)).map((t) => t.id)).toEqual([track.id]);
    });

    it("keeps a track added to a draft through its processing: the ready asset's master lists it, its files play", async () => {
      const h = subject();
      const { credential } = await tenant(h);
      const asset = await createAsset(h.api, credential, { title: "captioned first" });
      const track = expectStatus(
        await add(h, credential, asset.id, { type: "text", language_code: "en", content: VTT }),
        201,
      ).body.track;
      await uploadAndComplete(h.api, credential, asset.id);
      await untilReady(h.api, credential, asset.id);
      const { urls } = await session(h, credential, asset.id);
      expect((await text(urls.manifest)).body).toContain(`URI="text/${track.id}.m3u8"`);
      const base = urls.manifest.slice(0, urls.manifest.lastIndexOf("/") + 1);
      const playlist = await text(`${base}text/${track.id}.m3u8`);
      expect(playlist.status).toBe(200);
      // Added before the duration was known: segments up to the last cue's end (7 s).
      expect(playlist.body.match(/#EXTINF:/g)).toHaveLength(2);
      expect((await text(`${base}text/${track.id}-segments.vtt`)).body).toContain("Bonjour");
    });

    it("removes a deleted asset's track files with its renditions", async () => {
      const h = subject();
      const { owner, credential } = await tenant(h);
      const asset = await readyAsset(h, credential);
      const track = expectStatus(
        await add(h, credential, asset.id, { type: "text", language_code: "en", content: VTT }),
        201,
      ).body.track;
      const key = textTrackKey(owner.tenant.id, asset.id, `${track.id}.vtt`);
      expect(await h.objects.exists(key)).toBe(true);
      expectNoContent(await h.api.del(`/v1/assets/${asset.id}`, credentialOptions(credential)));
      for (let i = 0; i < 200 && (await h.objects.exists(key)); i++)
        await new Promise((r) => setTimeout(r, 50));
      expect(await h.objects.exists(key)).toBe(false);
      expectError(
        await h.api.get(`/v1/assets/${asset.id}/tracks`, credentialOptions(credential)),
        404,
        "not_found",
      );
    });
  });
};

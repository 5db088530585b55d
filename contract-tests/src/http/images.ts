import { beforeAll, describe, expect, it } from "vitest";
import {
  type Credential,
  createApiKey,
  createAsset,
  credentialOptions,
  type ErrorBody,
  expectError,
  expectInvalidFields,
  expectStatus,
  type Harness,
  type MakeHttpSubject,
  type Reply,
  sendTo,
  sharedSubject,
  signUp,
  type WireAsset,
} from "./client.js";
import { type CreatedPlayback, untilReady, uploadAndComplete } from "./playback.js";

interface Tenant {
  readonly tenantId: string;
  readonly credential: Credential;
  readonly clear: WireAsset;
  readonly drm: WireAsset;
}

/** Width and height of a baseline JPEG, from its SOF0 marker. */
const jpegSize = (bytes: Uint8Array) => {
  const view = Buffer.from(bytes);
  expect(view.readUInt16BE(0)).toBe(0xffd8);
  for (let at = 2; at < view.length - 9; ) {
    const marker = view.readUInt16BE(at);
    if (marker === 0xffc0) return { width: view.readUInt16BE(at + 7), height: view.readUInt16BE(at + 5) };
    at += 2 + view.readUInt16BE(at + 2);
  }
  throw new Error("no SOF0 marker in the JPEG");
};

/** The series `vod_images_made_total{kind}` of the host's /metrics: images decoded and stored. */
const imagesMade = async (h: Harness, kind: string) => {
  const text = await (await fetch(`${h.baseUrl}/metrics`)).text();
  const found = new RegExp(`^vod_images_made_total\\{kind="${kind}"\\} (\\d+)$`, "m").exec(text)?.[1];
  if (found === undefined) throw new Error(`no vod_images_made_total{kind="${kind}"} in /metrics`);
  return Number(found);
};

const get = (url: string, headers: Record<string, string> = {}) =>
  sendTo<ErrorBody | undefined>("GET", url, { headers }) as Promise<Reply<ErrorBody | undefined>>;

const bytesOf = async (url: string, init: RequestInit = {}) => {
  const response = await fetch(url, init);
  return { response, bytes: new Uint8Array(await response.arrayBuffer()) };
};

/**
 * Images a playback token fetches (DECISIONS "Images, downloads and text tracks"), as HTTP on
 * every adapter set and object store: routes, parameters, what is stored and when nothing is
 * made again. The host's images come from a fake maker over the fake media processor's
 * renditions (a 4 s, 640x360 source); hosts/express's images test makes them of real media.
 */
export const describePlaybackImages = (makeSubject: MakeHttpSubject): void => {
  describe("playback images: thumbnails, animated previews, storyboards", () => {
    const subject = sharedSubject(makeSubject, { VOD_WORKER_CONCURRENCY: "1" });
    let tenantOf: Promise<Tenant> | undefined;
    const tenant = (h: Harness) => {
      tenantOf ??= (async () => {
        const owner = await signUp(h.api);
        const key = await createApiKey(h.api, { bearer: owner.access_token }, ["write"]);
        const credential = { apiKey: key.key };
        const clear = await createAsset(h.api, credential, { title: "clear" });
        const drm = await createAsset(h.api, credential, { title: "protected", drm: true });
        await uploadAndComplete(h.api, credential, clear.id);
        await uploadAndComplete(h.api, credential, drm.id);
        return {
          tenantId: owner.tenant.id,
          credential,
          clear: await untilReady(h.api, credential, clear.id),
          drm: await untilReady(h.api, credential, drm.id),
        };
      })();
      return tenantOf;
    };
    beforeAll(async () => {
      await tenant(subject());
    }, 90_000);

    const session = async (h: Harness, asset: WireAsset) => {
      const t = await tenant(h);
      return expectStatus(
        await h.api.post<CreatedPlayback>("/v1/playback/sessions", {
          ...credentialOptions(t.credential),
          json: { asset_id: asset.id },
        }),
        201,
      ).body;
    };
    const filesOf = (created: CreatedPlayback) => created.urls.manifest.replace(/master\.m3u8$/, "");

    it("makes the session's thumbnail once, stores it under the asset, and serves the stored bytes", async () => {
      const h = subject();
      const t = await tenant(h);
      const created = await session(h, t.clear);
      const before = await imagesMade(h, "thumbnail");
      const first = await bytesOf(created.urls.thumbnail, { headers: { origin: "https://player.example" } });
      expect(first.response.status).toBe(200);
      expect(first.response.headers.get("content-type")).toBe("image/jpeg");
      expect(first.response.headers.get("cache-control")).toMatch(/^private, max-age=\d+, immutable$/);
      expect(first.response.headers.get("access-control-allow-origin")).not.toBeNull();
      // The default: the middle (2 s) at the source's size.
      expect(jpegSize(first.bytes)).toEqual({ width: 640, height: 360 });
      const key = `renditions/${t.tenantId}/${t.clear.id}/images/thumbnail-2000-640x360-preserve.jpg`;
      expect(Buffer.from((await h.objects.read(key)) ?? []).equals(Buffer.from(first.bytes))).toBe(true);
      expect(await imagesMade(h, "thumbnail")).toBe(before + 1);

      // The same image asked another way (explicit time, another session), and by HEAD: no making.
      const other = filesOf(await session(h, t.clear));
      const again = await bytesOf(`${other}thumbnail.jpg?time=2.000`);
      expect(again.response.status).toBe(200);
      expect(Buffer.from(again.bytes).equals(Buffer.from(first.bytes))).toBe(true);
      const head = await fetch(`${other}thumbnail.jpg?time=2`, { method: "HEAD" });
      expect(head.status).toBe(200);
      expect(head.headers.get("content-length")).toBe(String(first.bytes.byteLength));
      expect(await imagesMade(h, "thumbnail")).toBe(before + 1);
    });

    it("answers each format with its content type, and a range of a stored image with 206", async () => {
      const h = subject();
      const t = await tenant(h);
      const files = filesOf(await session(h, t.clear));
      const cases: Array<[string, string]> = [
        ["thumbnail.png?time=1&width=320", "image/png"],
        ["thumbnail.webp?time=1&width=320&height=320&fit_mode=pad", "image/webp"],
        ["animated.gif", "image/gif"],
        ["animated.webp?start=1&end=3&width=160&fps=5", "image/webp"],
        ["storyboard.jpg", "image/jpeg"],
        ["storyboard.webp", "image/webp"],
        ["storyboard.vtt", "text/vtt"],
      ];
      for (const [file, type] of cases) {
        const { response, bytes } = await bytesOf(`${files}${file}`);
        expect(response.status, file).toBe(200);
        expect(response.headers.get("content-type"), file).toBe(type);
        expect(bytes.byteLength, file).toBeGreaterThan(0);
      }
      // HEAD of each, for each asset, with a stray empty bearer a player might send: the GET's headers.
      const drmFiles = filesOf(await session(h, t.drm));
      for (const [file, type] of cases)
        for (const base of [files, drmFiles]) {
          const head = await fetch(`${base}${file}`, {
            method: "HEAD",
            headers: { authorization: "Bearer " },
          });
          expect(head.status, `HEAD ${file}`).toBe(200);
          expect(head.headers.get("content-type"), `HEAD ${file}`).toBe(type);
        }
      const ranged = await fetch(`${files}thumbnail.png?time=1&width=320`, {
        headers: { range: "bytes=0-7" },
      });
      expect(ranged.status).toBe(206);
      expect(Buffer.from(await ranged.arrayBuffer())).toEqual(Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]));
    });

    it("refuses bad parameters with 400 naming each field, and a time past the end", async () => {
      const h = subject();
      const t = await tenant(h);
      const files = filesOf(await session(h, t.clear));
      const before = await imagesMade(h, "thumbnail");
      const cases: Array<[string, string[]]> = [
        ["thumbnail.jpg?time=soon", ["time"]],
        ["thumbnail.jpg?time=4", ["time"]],
        ["thumbnail.jpg?time=NaN&width=0", ["time", "width"]],
        ["thumbnail.jpg?width=641", ["width"]],
        ["thumbnail.jpg?height=1921", ["height"]],
        ["thumbnail.jpg?fit_mode=stretch", ["fit_mode"]],
        ["animated.gif?start=0&end=10.5", ["end"]],
        ["animated.gif?start=3&end=2", ["end"]],
        ["animated.gif?fps=60", ["fps"]],
        ["animated.gif?start=1&end=1.05&fps=10", ["end"]],
        ["animated.gif?start=3.99", ["start"]],
        ["animated.webp?width=641", ["width"]],
      ];
      for (const [file, fields] of cases)
        expectInvalidFields(
          await get(`${files}${file}`),
          fields.map((f) => [f]),
        );
      expect(await imagesMade(h, "thumbnail")).toBe(before);
    });

    it("writes a storyboard VTT covering the duration in order, every tile inside the stored sprite", async () => {
      const h = subject();
      const t = await tenant(h);
      const created = await session(h, t.clear);
      const vtt = await (await fetch(created.urls.storyboard)).text();
      expect(vtt.startsWith("WEBVTT\n\n")).toBe(true);
      const cues = [...vtt.matchAll(/^(\S+) --> (\S+)\n(\S+)#xywh=(\d+),(\d+),(\d+),(\d+)$/gm)].map((m) => ({
        start: m[1],
        end: m[2],
        image: m[3],
        rect: [4, 5, 6, 7].map((i) => Number(m[i])) as [number, number, number, number],
      }));
      expect(cues.map((c) => [c.start, c.end])).toEqual([
        ["00:00:00.000", "00:00:02.000"],
        ["00:00:02.000", "00:00:04.000"],
      ]);
      const sprite = await bytesOf(`${filesOf(created)}${cues[0]?.image}`);
      expect(sprite.response.status).toBe(200);
      const size = jpegSize(sprite.bytes);
      for (const { rect } of cues) {
        const [x, y, w, h2] = rect;
        expect(x + w).toBeLessThanOrEqual(size.width);
        expect(y + h2).toBeLessThanOrEqual(size.height);
      }
    });

    it("makes a DRM asset's images from its origin, not its encrypted segments", async () => {
      const h = subject();
      const t = await tenant(h);
      const created = await session(h, t.drm);
      const { response, bytes } = await bytesOf(`${filesOf(created)}thumbnail.jpg?time=1&width=160`);
      expect(response.status).toBe(200);
      expect(jpegSize(bytes)).toEqual({ width: 160, height: 90 });
      expect(
        await h.objects.exists(
          `renditions/${t.tenantId}/${t.drm.id}/images/thumbnail-1000-160x90-preserve.jpg`,
        ),
      ).toBe(true);
    });

    it("refuses a forged or ended session's token with 401 on every image route", async () => {
      const h = subject();
      const t = await tenant(h);
      const created = await session(h, t.clear);
      const files = filesOf(created);
      const at = files.lastIndexOf(".") + 1;
      const forged = `${files.slice(0, at)}${files[at] === "A" ? "B" : "A"}${files.slice(at + 1)}`;
      expectStatus(
        await h.api.del(`/v1/playback/sessions/${created.session.id}`, credentialOptions(t.credential)),
        204,
      );
      for (const file of ["thumbnail.jpg", "animated.gif", "storyboard.jpg", "storyboard.vtt"]) {
        expectError(await get(`${forged}${file}`), 401, "unauthorized");
        expectError(await get(`${files}${file}`), 401, "unauthorized");
      }
    });
  });
};

import { renditionsPrefix } from "@vod/core";
import { beforeAll, describe, expect, it } from "vitest";
import {
  type Credential,
  createApiKey,
  createAsset,
  credentialOptions,
  type ErrorBody,
  expectError,
  expectInvalidFields,
  expectNoContent,
  expectStatus,
  expectUnauthorized,
  type Harness,
  type HttpClient,
  type MakeHttpSubject,
  MINUTE,
  putPart,
  type Reply,
  SECOND,
  sendTo,
  sharedSubject,
  signUp,
  startUpload,
  type WireAsset,
} from "./client.js";
import { expectRateLimited } from "./rate-limits.js";

/** A browser's CORS preflight from a player page's origin; it must be allowed for that origin. */
const corsPreflight = async (url: string, method: string, headers: string) => {
  const preflight = await fetch(url, {
    method: "OPTIONS",
    headers: {
      origin: "https://player.example",
      "access-control-request-method": method,
      "access-control-request-headers": headers,
    },
  });
  expect(preflight.status).toBe(204);
  expect(preflight.headers.get("access-control-allow-origin")).toBe("https://player.example");
  return preflight;
};

// ---------------------------------------------------------------------------------------------
// Wire shapes.

export interface WirePlaybackSession {
  id: string;
  asset_id: string;
  expires_at: number;
  drm: boolean;
}

export interface CreatedPlayback {
  session: WirePlaybackSession;
  token: string;
  urls: {
    manifest: string;
    telemetry: string;
    entitlement?: string;
    thumbnail: string;
    storyboard: string;
    dash: string;
  };
}

export interface WireEntitlement {
  expires_at: number;
  license_headers: Record<string, string>;
  key_systems: Record<string, { license_url: string; certificate_url?: string }>;
}

export interface WireLicence {
  keys: Array<{ kty: string; kid: string; k: string }>;
  type?: string;
}

// ---------------------------------------------------------------------------------------------
// Fixtures.

/** Key systems configured beside the built-in ClearKey, as an operator with a DRM vendor would. */
const KEY_SYSTEM_ENV = {
  VOD_DRM_WIDEVINE_LICENSE_URL: "https://widevine.example/license",
  VOD_DRM_PLAYREADY_LICENSE_URL: "https://playready.example/rightsmanager.asmx",
  VOD_DRM_FAIRPLAY_LICENSE_URL: "https://fairplay.example/license",
  VOD_DRM_FAIRPLAY_CERTIFICATE_URL: "https://fairplay.example/cert.der",
};

/** Telemetry batches a session may send per minute on the area's host (default 120). */
const TELEMETRY_PER_MINUTE = 6;

const ENTITLEMENT_TTL_MS = 300 * SECOND;
const TELEMETRY_GRACE_MS = 15 * MINUTE;

/** The tenant of the area: a write key (never expires, unlike an access token the clock outruns). */
interface Catalog {
  readonly tenantId: string;
  readonly credential: Credential;
  readonly clear: WireAsset;
  readonly drm: WireAsset;
  readonly pending: WireAsset;
}

export const uploadAndComplete = async (api: HttpClient, credential: Credential, assetId: string) => {
  const bytes = new Uint8Array(2_000).fill(7);
  const upload = await startUpload(api, credential, { asset_id: assetId, size_bytes: bytes.byteLength });
  for (const part of upload.parts) expectStatus(await sendTo("PUT", part.url, { body: bytes }), 200);
  expectStatus(
    await api.post(`/v1/uploads/${upload.id}/complete`, { ...credentialOptions(credential), json: {} }),
    200,
  );
};

/** Polls the asset until processing settles (the worker takes the job within moments). */
export const untilReady = async (
  api: HttpClient,
  credential: Credential,
  assetId: string,
): Promise<WireAsset> => {
  for (let i = 0; i < 1_200; i++) {
    const { asset } = expectStatus(
      await api.get<{ asset: WireAsset }>(`/v1/assets/${assetId}`, credentialOptions(credential)),
      200,
    ).body;
    // Every rendition settled, so that what a test reads does not change under it.
    if (asset.status === "ready" && asset.renditions.every((r) => r.status !== "pending")) return asset;
    if (asset.status === "failed") throw new Error(`asset ${assetId} failed: ${asset.failure_code}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`asset ${assetId} never became ready`);
};

const makeCatalog = async (api: HttpClient): Promise<Catalog> => {
  const owner = await signUp(api);
  const key = await createApiKey(api, { bearer: owner.access_token }, ["write"]);
  const credential = { apiKey: key.key };
  const clear = await createAsset(api, credential, { title: "clear" });
  const drm = await createAsset(api, credential, { title: "protected", drm: true });
  const pending = await createAsset(api, credential, { title: "pending" });
  await uploadAndComplete(api, credential, clear.id);
  await uploadAndComplete(api, credential, drm.id);
  return {
    tenantId: owner.tenant.id,
    credential,
    clear: await untilReady(api, credential, clear.id),
    drm: await untilReady(api, credential, drm.id),
    pending,
  };
};

/** URIs a playlist names: its non-comment lines and the URI attributes of its tags (not data: URIs). */
const urisOf = (playlist: string): string[] =>
  playlist
    .split("\n")
    .map((line) => line.trim())
    .flatMap((line) => {
      if (line === "") return [];
      if (!line.startsWith("#")) return [line];
      return [...line.matchAll(/URI="([^"]+)"/g)]
        .map((m) => m[1] ?? "")
        .filter((u) => !u.startsWith("data:"));
    });

/** The 16-byte key id a ClearKey EXT-X-KEY line carries in its data: URI, as base64url. */
const clearKeyKidOf = (playlist: string): string => {
  const line = playlist.split("\n").find((l) => l.startsWith("#EXT-X-KEY:")) ?? "";
  const data = /URI="data:text\/plain;base64,([A-Za-z0-9+/=]+)"/.exec(line)?.[1];
  if (data === undefined) throw new Error(`no ClearKey key line in:\n${playlist}`);
  const kid = Buffer.from(data, "base64");
  expect(kid.byteLength).toBe(16);
  return kid.toString("base64url");
};

/**
 * The token with the first character of its signature changed. (Not the last: in base64url the
 * last character of a 64-byte signature carries padding bits, and some changes leave it valid.)
 */
const forge = (token: string): string => {
  const at = token.lastIndexOf(".") + 1;
  return `${token.slice(0, at)}${token[at] === "A" ? "B" : "A"}${token.slice(at + 1)}`;
};

/** A raw request to an absolute URL whose JSON error body, when there is one, is parsed. */
const fetchReply = (
  method: string,
  url: string,
  options: { readonly body?: string; readonly headers?: Readonly<Record<string, string>> } = {},
): Promise<Reply<ErrorBody | undefined>> =>
  sendTo(method, url, {
    headers: options.headers ?? {},
    ...(options.body === undefined ? {} : { body: new TextEncoder().encode(options.body) }),
  });

const bytesOf = async (url: string, headers: Record<string, string> = {}) => {
  const response = await fetch(url, { headers });
  return { response, bytes: new Uint8Array(await response.arrayBuffer()) };
};

/** A telemetry event with every spec field of a heartbeat and one extra key. */
const heartbeat = (n: number) => ({
  event: "heartbeat",
  ts_ms: 1_000 + n,
  playhead_ms: n * 10,
  rendition: "360p",
  bitrate_kbps: 800,
  custom: { n },
});

/**
 * Playback, content protection and telemetry as a player and its backend see them (spec part 4,
 * DECISIONS "Playback", "Telemetry", "Content protection"). One host for the area, with a worker
 * and the fake media processor: the contract here is HTTP, not media (hosts/express's playback
 * test plays real ffmpeg output).
 */
export const describePlayback = (makeSubject: MakeHttpSubject): void => {
  describe("playback, content protection and telemetry", () => {
    const subject = sharedSubject(makeSubject, {
      VOD_WORKER_CONCURRENCY: "1",
      VOD_RATE_LIMIT_TELEMETRY_PER_MINUTE: String(TELEMETRY_PER_MINUTE),
      ...KEY_SYSTEM_ENV,
    });
    let catalogOf: Promise<Catalog> | undefined;
    /** The area's tenant and assets, made once (processing is the slow part). */
    const catalog = (h: Harness) => {
      catalogOf ??= makeCatalog(h.api);
      return catalogOf;
    };
    // Made before the first test, so that no test's own time limit pays for processing.
    beforeAll(async () => {
      await catalog(subject());
    }, 90_000);

    const createSession = (h: Harness, credential: Credential, json: unknown) =>
      h.api.post<CreatedPlayback>("/v1/playback/sessions", { ...credentialOptions(credential), json });
    const session = async (h: Harness, asset: WireAsset, extra: Record<string, unknown> = {}) => {
      const c = await catalog(h);
      return expectStatus(await createSession(h, c.credential, { asset_id: asset.id, ...extra }), 201).body;
    };
    const endSession = async (h: Harness, id: string) =>
      h.api.del(`/v1/playback/sessions/${id}`, credentialOptions((await catalog(h)).credential));

    const entitle = (url: string, token: string | undefined) =>
      sendTo<WireEntitlement & ErrorBody>("POST", url, {
        headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
      });
    const license = (url: string, headers: Record<string, string>, body: unknown) =>
      fetchReply("POST", url, {
        headers,
        body: typeof body === "string" ? body : JSON.stringify(body),
      }) as Promise<Reply<WireLicence & ErrorBody>>;
    const beacon = (url: string, body: unknown, contentType = "text/plain;charset=UTF-8") =>
      fetchReply("POST", url, {
        headers: { "content-type": contentType },
        body: typeof body === "string" ? body : JSON.stringify(body),
      });

    /** Every file a player fetches: master, media playlist, init segment, media segments. */
    const walk = async (manifest: string) => {
      const master = await (await fetch(manifest)).text();
      const [mediaUri] = urisOf(master);
      const mediaUrl = new URL(mediaUri ?? "", manifest).toString();
      const playlist = await (await fetch(mediaUrl)).text();
      const files = urisOf(playlist).map((uri) => new URL(uri, mediaUrl).toString());
      const segment = files.find((f) => f.endsWith(".m4s"));
      if (segment === undefined) throw new Error(`no segment in:\n${playlist}`);
      return { master, mediaUrl, playlist, files, segment };
    };

    describe("POST /v1/playback/sessions", () => {
      it("mints a session (201): the session, a v1 token, manifest and telemetry URLs, no entitlement URL", async () => {
        const h = subject();
        const c = await catalog(h);
        const reply = await createSession(h, c.credential, { asset_id: c.clear.id });
        expect(reply.status).toBe(201);
        const now = h.clock.now();
        const { session: s, token, urls } = reply.body;
        expect(reply.body).toStrictEqual({
          session: {
            id: expect.any(String),
            asset_id: c.clear.id,
            expires_at: now + 3_600 * SECOND,
            drm: false,
          },
          token: expect.stringMatching(/^v1\.[\w-]+\.[\w-]+\.[\w-]+$/),
          urls: {
            manifest: expect.any(String),
            telemetry: expect.any(String),
            thumbnail: expect.any(String),
            storyboard: expect.any(String),
            dash: expect.any(String),
          },
        });
        const manifest = new URL(urls.manifest);
        expect(new URL(urls.dash).pathname).toBe(`/v1/play/${token}/manifest.mpd`);
        const dash = await fetch(urls.dash);
        expect(dash.status).toBe(200);
        expect(dash.headers.get("content-type")).toMatch(/^application\/dash\+xml/);
        expect(await dash.text()).toMatch(/<Representation id="360p"[\s\S]*<Representation id="240p"/);
        expect(manifest.pathname).toBe(`/v1/play/${token}/master.m3u8`);
        expect(new URL(urls.thumbnail).pathname).toBe(`/v1/play/${token}/thumbnail.jpg`);
        expect(new URL(urls.storyboard).pathname).toBe(`/v1/play/${token}/storyboard.vtt`);
        expect(new URL(urls.telemetry).pathname).toBe("/v1/telemetry");
        expect("entitlement" in urls).toBe(false);
        expect(await h.backdoor.playbackSession(s.id)).toMatchObject({
          id: s.id,
          tenant_id: c.tenantId,
          asset_id: c.clear.id,
          drm: false,
          expires_at: now + 3_600 * SECOND,
          created_at: now,
          ended_at: null,
        });
      });

      it("mints a protected session with an entitlement URL", async () => {
        const h = subject();
        const c = await catalog(h);
        const { session: s, urls } = await session(h, c.drm);
        expect(s).toStrictEqual({
          id: expect.any(String),
          asset_id: c.drm.id,
          expires_at: h.clock.now() + 3_600 * SECOND,
          drm: true,
        });
        expect(Object.keys(urls).sort()).toEqual([
          "dash",
          "entitlement",
          "manifest",
          "storyboard",
          "telemetry",
          "thumbnail",
        ]);
        expect(new URL(urls.entitlement ?? "").pathname).toBe("/v1/drm/entitlement");
        // The DASH manifest signals the content key for ClearKey players by its KID.
        const mpd = await (await fetch(urls.dash)).text();
        expect(mpd).toMatch(
          /<ContentProtection value="cenc" schemeIdUri="urn:mpeg:dash:mp4protection:2011" cenc:default_KID="[0-9a-f-]{36}"\/>/,
        );
        expect((await h.backdoor.playbackSession(s.id))?.drm).toBe(true);
      });

      it("bounds ttl_seconds to 60..86,400 whole seconds", async () => {
        const h = subject();
        const c = await catalog(h);
        for (const ttl of [59, 86_401, 0, -60, 90.5, "600", null])
          expectInvalidFields(
            await createSession(h, c.credential, { asset_id: c.clear.id, ttl_seconds: ttl }),
            [["ttl_seconds"]],
          );
        for (const ttl of [60, 86_400]) {
          const { session: s } = await session(h, c.clear, { ttl_seconds: ttl });
          expect(s.expires_at).toBe(h.clock.now() + ttl * SECOND);
        }
      });

      it("refuses a malformed body with the fields named", async () => {
        const h = subject();
        const c = await catalog(h);
        expectInvalidFields(await createSession(h, c.credential, {}), [["asset_id"]]);
        expectInvalidFields(await createSession(h, c.credential, { asset_id: "" }), [["asset_id"]]);
        expectInvalidFields(await createSession(h, c.credential, { asset_id: c.clear.id, ttl: 60 }), [
          ["ttl"],
        ]);
      });

      it("answers 409 upload_in_progress for an asset that is not ready, 404 for an unknown or foreign one", async () => {
        const h = subject();
        const c = await catalog(h);
        expectError(
          await createSession(h, c.credential, { asset_id: c.pending.id }),
          409,
          "upload_in_progress",
        );
        expectError(await createSession(h, c.credential, { asset_id: "ast_unknown" }), 404, "not_found");
        const other = await signUp(h.api);
        expectError(
          await createSession(h, { bearer: other.access_token }, { asset_id: c.clear.id }),
          404,
          "not_found",
        );
      });

      it("needs a credential; the read scope is enough to create and end sessions", async () => {
        const h = subject();
        const c = await catalog(h);
        expectUnauthorized(await h.api.post("/v1/playback/sessions", { json: { asset_id: c.clear.id } }));
        const owner = await signUp(h.api);
        const reader = await createApiKey(h.api, { bearer: owner.access_token }, ["read"]);
        const asset = await createAsset(h.api, { bearer: owner.access_token });
        await uploadAndComplete(h.api, { bearer: owner.access_token }, asset.id);
        await untilReady(h.api, { apiKey: reader.key }, asset.id);
        const created = expectStatus(
          await createSession(h, { apiKey: reader.key }, { asset_id: asset.id }),
          201,
        );
        expectNoContent(
          await h.api.del(`/v1/playback/sessions/${created.body.session.id}`, { apiKey: reader.key }),
        );
      });
    });

    describe("DELETE /v1/playback/sessions/{id}", () => {
      it("ends the session (204, stored ended_at); again 204; unknown or foreign 404", async () => {
        const h = subject();
        const c = await catalog(h);
        const { session: s } = await session(h, c.clear);
        expectNoContent(await endSession(h, s.id));
        const ended = h.clock.now();
        expect(await h.backdoor.playbackSession(s.id)).toMatchObject({ id: s.id, ended_at: ended });
        h.clock.advance(SECOND);
        expectNoContent(await endSession(h, s.id));
        expect((await h.backdoor.playbackSession(s.id))?.ended_at).toBe(ended);
        expectError(await endSession(h, "pbs_unknown"), 404, "not_found");
        const other = await signUp(h.api);
        expectError(
          await h.api.del(`/v1/playback/sessions/${s.id}`, { bearer: other.access_token }),
          404,
          "not_found",
        );
        expectUnauthorized(await h.api.del(`/v1/playback/sessions/${s.id}`));
      });
    });

    describe("delivery: /v1/play/{token}/...", () => {
      it("serves the master and media playlists with the token in every URI a player resolves", async () => {
        const h = subject();
        const c = await catalog(h);
        const { token, urls } = await session(h, c.clear);
        const tokenPath = `/v1/play/${token}/`;
        const master = await fetch(urls.manifest, { headers: { origin: "https://player.example" } });
        expect(master.status).toBe(200);
        expect(master.headers.get("content-type")).toBe("application/vnd.apple.mpegurl");
        expect(master.headers.get("cache-control")).toBe("private, no-cache");
        expect(master.headers.get("access-control-allow-origin")).toBe("https://player.example");
        const masterText = await master.text();
        expect(masterText.startsWith("#EXTM3U")).toBe(true);
        const walked = await walk(urls.manifest);
        expect(walked.playlist.startsWith("#EXTM3U")).toBe(true);
        expect(walked.playlist).not.toContain("#EXT-X-KEY");
        // Nothing a player resolves leaves the media host and the token's path.
        const origin = new URL(urls.manifest).origin;
        for (const url of [urls.manifest, walked.mediaUrl, ...walked.files]) {
          expect(new URL(url).origin).toBe(origin);
          expect(new URL(url).pathname.startsWith(tokenPath)).toBe(true);
          const reply = await fetch(url);
          expect({ url, status: reply.status }).toEqual({ url, status: 200 });
          await reply.arrayBuffer();
        }
      });

      it("serves each file with its type; segments as stored, private and immutable", async () => {
        const h = subject();
        const c = await catalog(h);
        const { urls } = await session(h, c.clear);
        const { mediaUrl, files } = await walk(urls.manifest);
        const prefix = renditionsPrefix(c.tenantId, c.clear.id);
        const base = urls.manifest.slice(0, -"master.m3u8".length);
        const types: Record<string, string> = {
          m3u8: "application/vnd.apple.mpegurl",
          mp4: "video/mp4",
          m4s: "video/iso.segment",
        };
        for (const url of [urls.manifest, mediaUrl, ...files]) {
          const { response, bytes } = await bytesOf(url);
          expect(response.status).toBe(200);
          const extension = url.slice(url.lastIndexOf(".") + 1);
          expect(response.headers.get("content-type")).toBe(types[extension]);
          expect(response.headers.get("accept-ranges")).toBe("bytes");
          expect(response.headers.get("content-length")).toBe(String(bytes.byteLength));
          // Segments are the stored bytes as they are (playlists may be rewritten as they are served).
          if (extension !== "m3u8") {
            const stored = await h.objects.read(`${prefix}${url.slice(base.length)}`);
            expect(stored).toBeDefined();
            expect(Buffer.from(bytes).equals(Buffer.from(stored ?? new Uint8Array()))).toBe(true);
            expect(response.headers.get("cache-control")).toMatch(/^private, max-age=\d+, immutable$/);
          } else expect(response.headers.get("cache-control")).toBe("private, no-cache");
        }
      });

      it("serves byte ranges: 206 with Content-Range, open ranges, clamped ends, 416 past the end with the error body", async () => {
        const h = subject();
        const c = await catalog(h);
        const { segment } = await walk((await session(h, c.clear)).urls.manifest);
        const whole = await bytesOf(segment);
        const size = whole.bytes.byteLength;
        expect(size).toBeGreaterThan(100);
        const cases = [
          { range: "bytes=10-99", start: 10, end: 99 },
          { range: "bytes=0-0", start: 0, end: 0 },
          { range: `bytes=${size - 10}-`, start: size - 10, end: size - 1 },
          { range: `bytes=50-${size + 500}`, start: 50, end: size - 1 },
        ];
        for (const { range, start, end } of cases) {
          const part = await bytesOf(segment, { range });
          expect({ range, status: part.response.status }).toEqual({ range, status: 206 });
          expect(part.response.headers.get("content-range")).toBe(`bytes ${start}-${end}/${size}`);
          expect(part.response.headers.get("content-length")).toBe(String(end - start + 1));
          expect(Buffer.from(part.bytes).equals(Buffer.from(whole.bytes.subarray(start, end + 1)))).toBe(
            true,
          );
        }
        // Every error is the spec's JSON (part 7), this one too (docs/decisions.md).
        for (const range of [`bytes=${size}-`, `bytes=${size + 5}-${size + 10}`]) {
          const refused = await fetchReply("GET", segment, { headers: { range } });
          const body = expectError(refused, 416, "invalid_request");
          expect(body.details).toStrictEqual({ reason: "range_not_satisfiable", size });
          expect(refused.headers.get("content-range")).toBe(`bytes */${size}`);
        }
      });

      it("serves a suffix range (bytes=-N, RFC 9110 14.1.2): the last N bytes", async () => {
        const h = subject();
        const c = await catalog(h);
        const { segment } = await walk((await session(h, c.clear)).urls.manifest);
        const whole = await bytesOf(segment);
        const size = whole.bytes.byteLength;
        for (const n of [100, 1]) {
          const part = await bytesOf(segment, { range: `bytes=-${n}` });
          expect({ n, status: part.response.status }).toEqual({ n, status: 206 });
          expect(part.response.headers.get("content-range")).toBe(`bytes ${size - n}-${size - 1}/${size}`);
          expect(Buffer.from(part.bytes).equals(Buffer.from(whole.bytes.subarray(size - n)))).toBe(true);
        }
        // A suffix longer than the file is the whole file.
        const all = await bytesOf(segment, { range: `bytes=-${size + 50}` });
        expect(all.response.status).toBe(206);
        expect(all.response.headers.get("content-range")).toBe(`bytes 0-${size - 1}/${size}`);
      });

      it("answers HEAD with the headers of GET and no body, ranges included", async () => {
        const h = subject();
        const c = await catalog(h);
        const { urls } = await session(h, c.clear);
        const { segment } = await walk(urls.manifest);
        const size = (await bytesOf(segment)).bytes.byteLength;
        const head = await fetch(segment, { method: "HEAD" });
        expect(head.status).toBe(200);
        expect(head.headers.get("content-length")).toBe(String(size));
        expect(head.headers.get("content-type")).toBe("video/iso.segment");
        expect(head.headers.get("accept-ranges")).toBe("bytes");
        expect(await head.text()).toBe("");
        const ranged = await fetch(segment, { method: "HEAD", headers: { range: "bytes=0-9" } });
        expect(ranged.status).toBe(206);
        expect(ranged.headers.get("content-range")).toBe(`bytes 0-9/${size}`);
        const manifest = await fetch(urls.manifest, { method: "HEAD" });
        expect(manifest.status).toBe(200);
        expect(manifest.headers.get("content-type")).toBe("application/vnd.apple.mpegurl");
        expect(await manifest.text()).toBe("");
      });

      it("answers the CORS preflight of a segment, allowing Range", async () => {
        const h = subject();
        const c = await catalog(h);
        const { segment } = await walk((await session(h, c.clear)).urls.manifest);
        const preflight = await corsPreflight(segment, "GET", "range");
        expect(preflight.headers.get("access-control-allow-methods")).toMatch(/\bGET\b/);
        expect(preflight.headers.get("access-control-allow-headers")).toMatch(/\brange\b/i);
      });

      it("answers 404 not_found for a file the asset does not have, 401 for a forged token, 403 for an access token", async () => {
        const h = subject();
        const c = await catalog(h);
        const { token, urls } = await session(h, c.clear);
        const base = urls.manifest.slice(0, -"master.m3u8".length);
        for (const name of ["nothing.m3u8", "360p/seg_999.m4s", "master.txt", "a/b/c.m4s"])
          expectError(await fetchReply("GET", base + name), 404, "not_found");
        expectError(await fetchReply("GET", urls.manifest.replace(token, forge(token))), 401, "unauthorized");
        expectError(
          await fetchReply("GET", urls.manifest.replace(token, "v1.not.a.token")),
          401,
          "unauthorized",
        );
        const owner = await signUp(h.api);
        expectError(
          await fetchReply("GET", urls.manifest.replace(token, owner.access_token)),
          403,
          "forbidden",
        );
      });
    });

    describe("revocation on the node that ended the session", () => {
      it("refuses the manifest, playlists, segments, entitlement, licence and telemetry at the next request", async () => {
        const h = subject();
        const c = await catalog(h);
        const { session: s, token, urls } = await session(h, c.drm);
        const { mediaUrl, segment } = await walk(urls.manifest);
        const entitlement = expectStatus(await entitle(urls.entitlement ?? "", token), 200).body;
        const licenceUrl = entitlement.key_systems["org.w3.clearkey"]?.license_url ?? "";
        const kid = clearKeyKidOf(await (await fetch(mediaUrl)).text());
        expectStatus(await license(licenceUrl, entitlement.license_headers, { kids: [kid] }), 200);
        expect((await beacon(urls.telemetry, { token, events: [heartbeat(1)] })).status).toBe(204);

        expectNoContent(await endSession(h, s.id));
        for (const url of [urls.manifest, mediaUrl, segment])
          expectError(await fetchReply("GET", url), 401, "unauthorized");
        expectUnauthorized(await entitle(urls.entitlement ?? "", token));
        expectError(
          await license(licenceUrl, entitlement.license_headers, { kids: [kid] }),
          401,
          "unauthorized",
        );
        expectError(await beacon(urls.telemetry, { token, events: [heartbeat(2)] }), 401, "unauthorized");
        expect((await h.backdoor.playbackSession(s.id))?.ended_at).toBe(h.clock.now());
        expect((await h.telemetryEvents(s.id)).map((e) => e.ts_ms)).toEqual([1_001]);
      });
    });

    describe("a suspended tenant", () => {
      it("is refused the manifest, segments, entitlement, licence (403), telemetry (401) and part PUTs (403), until activated", async () => {
        const h = subject();
        const owner = await signUp(h.api);
        const credential = {
          apiKey: (await createApiKey(h.api, { bearer: owner.access_token }, ["write"])).key,
        };
        const drm = await createAsset(h.api, credential, { title: "suspended", drm: true });
        await uploadAndComplete(h.api, credential, drm.id);
        await untilReady(h.api, credential, drm.id);
        const pending = await createAsset(h.api, credential, { title: "pending" });
        const bytes = new Uint8Array(2_000).fill(3);
        const upload = await startUpload(h.api, credential, {
          asset_id: pending.id,
          size_bytes: bytes.byteLength,
        });
        const partUrl = upload.parts[0]?.url ?? "";
        const created = expectStatus(await createSession(h, credential, { asset_id: drm.id }), 201).body;
        const { token, urls } = created;
        const { mediaUrl, segment } = await walk(urls.manifest);
        const entitlement = expectStatus(await entitle(urls.entitlement ?? "", token), 200).body;
        const licenceUrl = entitlement.key_systems["org.w3.clearkey"]?.license_url ?? "";
        const kid = clearKeyKidOf(await (await fetch(mediaUrl)).text());
        expectStatus(await license(licenceUrl, entitlement.license_headers, { kids: [kid] }), 200);
        expect((await beacon(urls.telemetry, { token, events: [heartbeat(1)] })).status).toBe(204);

        await h.backdoor.setTenantStatus(owner.tenant.id, "suspended");
        for (const url of [urls.manifest, mediaUrl, segment])
          expectError(await fetchReply("GET", url), 403, "forbidden");
        expectError(await entitle(urls.entitlement ?? "", token), 403, "forbidden");
        const refused = await license(licenceUrl, entitlement.license_headers, { kids: [kid] });
        expectError(refused, 403, "forbidden");
        expect(refused.text).not.toContain(kid);
        expectError(await beacon(urls.telemetry, { token, events: [heartbeat(2)] }), 401, "unauthorized");
        if (h.objectStore?.signsPartUrls) {
          // A bucket takes parts on its own signed URLs, which we cannot refuse (docs/decisions.md):
          // the upload cannot be completed while the tenant is suspended.
          expectStatus(await putPart(partUrl, bytes), 200);
          expectError(
            await h.api.post(`/v1/uploads/${upload.id}/complete`, {
              ...credentialOptions(credential),
              json: {},
            }),
            403,
            "forbidden",
          );
        } else {
          expectError(await putPart(partUrl, bytes), 403, "forbidden");
          expect(await h.objects.storedParts(upload.id)).toEqual([]);
        }
        expect((await h.telemetryEvents(created.session.id)).map((e) => e.ts_ms)).toEqual([1_001]);

        await h.backdoor.setTenantStatus(owner.tenant.id, "active");
        for (const url of [urls.manifest, mediaUrl, segment]) expectStatus(await fetchReply("GET", url), 200);
        expectStatus(await entitle(urls.entitlement ?? "", token), 200);
        const licence = expectStatus(
          await license(licenceUrl, entitlement.license_headers, { kids: [kid] }),
          200,
        );
        expect(licence.body.keys.map((k) => k.kid)).toEqual([kid]);
        expect((await beacon(urls.telemetry, { token, events: [heartbeat(3)] })).status).toBe(204);
        expectStatus(await putPart(partUrl, bytes), 200);
        expect((await h.telemetryEvents(created.session.id)).map((e) => e.ts_ms)).toEqual([1_001, 1_003]);
      });
    });

    describe("expiry", () => {
      it("ends delivery and entitlements at expires_at; telemetry is taken 15 minutes longer", async () => {
        const h = subject();
        const c = await catalog(h);
        const { session: s, token, urls } = await session(h, c.drm, { ttl_seconds: 60 });
        const entitlement = expectStatus(await entitle(urls.entitlement ?? "", token), 200).body;
        // Never past the session: a 60 s session's entitlement ends with it, not in 300 s.
        // (The token behind it counts whole seconds, so it may end up to a second before.)
        expect(entitlement.expires_at).toBeLessThanOrEqual(s.expires_at);
        expect(entitlement.expires_at).toBeGreaterThan(s.expires_at - SECOND);
        const licenceUrl = entitlement.key_systems["org.w3.clearkey"]?.license_url ?? "";
        const { mediaUrl } = await walk(urls.manifest);
        const kid = clearKeyKidOf(await (await fetch(mediaUrl)).text());

        h.clock.advance(s.expires_at - h.clock.now() + SECOND);
        expectError(await fetchReply("GET", urls.manifest), 401, "unauthorized");
        expectError(await fetchReply("GET", mediaUrl), 401, "unauthorized");
        expectUnauthorized(await entitle(urls.entitlement ?? "", token));
        expectError(
          await license(licenceUrl, entitlement.license_headers, { kids: [kid] }),
          401,
          "unauthorized",
        );
        const late = await beacon(urls.telemetry, { token, events: [heartbeat(1)] });
        expect(late.status).toBe(204);
        expect(late.headers.get("x-telemetry-accepted")).toBe("1");

        h.clock.advance(TELEMETRY_GRACE_MS - 3 * SECOND);
        expect((await beacon(urls.telemetry, { token, events: [heartbeat(2)] })).status).toBe(204);
        h.clock.advance(4 * SECOND);
        expectError(await beacon(urls.telemetry, { token, events: [heartbeat(3)] }), 401, "unauthorized");
        expect((await h.telemetryEvents(s.id)).map((e) => e.ts_ms)).toEqual([1_001, 1_002]);
      });
    });

    describe("POST /v1/drm/entitlement", () => {
      it("entitles a protected session: expires_at min(session, now + 300 s), one licence header, the key systems", async () => {
        const h = subject();
        const c = await catalog(h);
        const { token, urls } = await session(h, c.drm);
        const reply = await entitle(urls.entitlement ?? "", token);
        expect(reply.status).toBe(200);
        expect(reply.headers.get("content-type")).toMatch(/^application\/json\b/);
        expect(reply.headers.get("cache-control")).toBe("no-store");
        const drmBase = (urls.entitlement ?? "").slice(0, -"/v1/drm/entitlement".length);
        expect(reply.body).toStrictEqual({
          expires_at: h.clock.now() + ENTITLEMENT_TTL_MS,
          license_headers: { "x-vod-license-token": expect.any(String) },
          key_systems: {
            "org.w3.clearkey": { license_url: `${drmBase}/v1/drm/clearkey/license` },
            "com.widevine.alpha": { license_url: KEY_SYSTEM_ENV.VOD_DRM_WIDEVINE_LICENSE_URL },
            "com.microsoft.playready": { license_url: KEY_SYSTEM_ENV.VOD_DRM_PLAYREADY_LICENSE_URL },
            "com.apple.fps": {
              license_url: KEY_SYSTEM_ENV.VOD_DRM_FAIRPLAY_LICENSE_URL,
              certificate_url: KEY_SYSTEM_ENV.VOD_DRM_FAIRPLAY_CERTIFICATE_URL,
            },
          },
        });
        expect(reply.body.license_headers["x-vod-license-token"]?.length).toBeGreaterThan(0);
      });

      it("answers 409 conflict for a session without protection, 401 without or with a forged token, 403 for an access token", async () => {
        const h = subject();
        const c = await catalog(h);
        const { urls } = await session(h, c.drm);
        const url = urls.entitlement ?? "";
        const clear = await session(h, c.clear);
        expectError(await entitle(url, clear.token), 409, "conflict");
        expectUnauthorized(await entitle(url, undefined));
        expectUnauthorized(await entitle(url, "v1.forged.token.value"));
        expectUnauthorized(await entitle(url, forge((await session(h, c.drm)).token)));
        const owner = await signUp(h.api);
        expectError(await entitle(url, owner.access_token), 403, "forbidden");
      });

      it("answers the CORS preflight, allowing Authorization", async () => {
        const h = subject();
        const c = await catalog(h);
        const { urls } = await session(h, c.drm);
        const preflight = await corsPreflight(urls.entitlement ?? "", "POST", "authorization");
        expect(preflight.headers.get("access-control-allow-headers")).toMatch(/\bauthorization\b/i);
      });
    });

    describe("POST /v1/drm/clearkey/license", () => {
      /** A protected session, its entitlement and the key id its media playlist declares. */
      const entitled = async (h: Harness) => {
        const c = await catalog(h);
        const { token, urls } = await session(h, c.drm);
        const entitlement = expectStatus(await entitle(urls.entitlement ?? "", token), 200).body;
        const { playlist } = await walk(urls.manifest);
        return {
          c,
          token,
          playlist,
          headers: entitlement.license_headers,
          licenceUrl: entitlement.key_systems["org.w3.clearkey"]?.license_url ?? "",
          kid: clearKeyKidOf(playlist),
        };
      };

      it("answers the W3C request with the key, base64url without padding; the stored key is wrapped", async () => {
        const h = subject();
        const { c, playlist, headers, licenceUrl, kid } = await entitled(h);
        expect(playlist).toMatch(/^#EXT-X-KEY:METHOD=SAMPLE-AES-CTR,/m);
        expect(playlist).toContain('KEYFORMAT="org.w3.clearkey"');
        expect(playlist).toContain('KEYFORMATVERSIONS="1"');
        const reply = await license(licenceUrl, headers, { kids: [kid], type: "temporary" });
        expect(reply.status).toBe(200);
        expect(reply.headers.get("content-type")).toMatch(/^application\/json\b/);
        expect(reply.headers.get("cache-control")).toBe("no-store");
        expect(reply.body.keys).toStrictEqual([{ kty: "oct", kid, k: expect.stringMatching(/^[\w-]{22}$/) }]);
        expect(reply.text).not.toContain("=");
        const key = reply.body.keys[0]?.k ?? "";
        const stored = await h.backdoor.contentKey(c.drm.id);
        expect(stored).toMatchObject({
          tenant_id: c.tenantId,
          asset_id: c.drm.id,
          kid: Buffer.from(kid, "base64url").toString("hex"),
        });
        // Wrapped bound to its tenant and asset (DECISIONS "Account security").
        expect(stored?.wrapped_key).toMatch(/^v2:/);
        const raw = Buffer.from(key, "base64url");
        const row = JSON.stringify(stored);
        for (const form of [key, raw.toString("hex"), raw.toString("base64")])
          expect(row).not.toContain(form);
        // Whatever the content type an EME player sends, the body is read as JSON.
        const typed = await license(
          licenceUrl,
          { ...headers, "content-type": "application/octet-stream" },
          { kids: [kid] },
        );
        expect(typed.status).toBe(200);
        expect(typed.body.keys).toStrictEqual(reply.body.keys);
      });

      it("gives no key for a key id the asset does not have", async () => {
        const h = subject();
        const { headers, licenceUrl } = await entitled(h);
        const reply = await license(licenceUrl, headers, {
          kids: ["AAAAAAAAAAAAAAAAAAAAAA"],
          type: "temporary",
        });
        expect(reply.status).toBe(200);
        expect(reply.body.keys).toStrictEqual([]);
      });

      it("refuses without, with a forged or with an expired licence token (401), and a malformed request (400)", async () => {
        const h = subject();
        const { token, headers, licenceUrl, kid } = await entitled(h);
        const request = { kids: [kid], type: "temporary" };
        expectError(await license(licenceUrl, {}, request), 401, "unauthorized");
        const licenceToken = headers["x-vod-license-token"] ?? "";
        expectError(
          await license(licenceUrl, { "x-vod-license-token": forge(licenceToken) }, request),
          401,
          "unauthorized",
        );
        // The playback token is not a licence token.
        expectError(
          await license(licenceUrl, { "x-vod-license-token": token }, request),
          401,
          "unauthorized",
        );
        expectError(await license(licenceUrl, headers, "not json"), 400, "invalid_request");
        expectError(await license(licenceUrl, headers, { kids: [] }), 400, "invalid_request");
        expectError(await license(licenceUrl, headers, { type: "temporary" }), 400, "invalid_request");
        // DECISIONS "Hostile input": an unknown field is named, not ignored.
        expectInvalidFields(await license(licenceUrl, headers, { ...request, extra: 1 }), [["extra"]]);
        h.clock.advance(ENTITLEMENT_TTL_MS + SECOND);
        expectError(await license(licenceUrl, headers, request), 401, "unauthorized");
      });

      it("answers the CORS preflight, allowing the licence header", async () => {
        const h = subject();
        const { licenceUrl } = await entitled(h);
        const preflight = await corsPreflight(licenceUrl, "POST", "content-type,x-vod-license-token");
        const allowed = (preflight.headers.get("access-control-allow-headers") ?? "")
          .split(",")
          .map((name) => name.trim().toLowerCase());
        expect(allowed).toEqual(expect.arrayContaining(["x-vod-license-token", "content-type"]));
      });
    });

    describe("POST /v1/telemetry", () => {
      it("stores a text/plain batch (204, x-telemetry-accepted) with every field, extra keys kept", async () => {
        const h = subject();
        const c = await catalog(h);
        const { session: s, token, urls } = await session(h, c.clear);
        const reply = await beacon(urls.telemetry, {
          token,
          player_version: "test-player/1.0",
          events: [
            heartbeat(1),
            { event: "first_frame", ts_ms: 1_002, playhead_ms: 0, startup_ms: 812.5 },
            { event: "error", ts_ms: 1_003, playhead_ms: 20, error_code: "E_NET", stall_ms: 40 },
            { event: "a_kind_from_the_future", ts_ms: 1_004, playhead_ms: 30, nested: { a: [1, "b"] } },
          ],
        });
        expectNoContent(reply);
        expect(reply.headers.get("x-telemetry-accepted")).toBe("4");
        const received = h.clock.now();
        const common = {
          tenant_id: c.tenantId,
          session_id: s.id,
          asset_id: c.clear.id,
          received_at: received,
          player_version: "test-player/1.0",
        };
        const none = {
          rendition: null,
          error_code: null,
          startup_ms: null,
          stall_ms: null,
          bitrate_kbps: null,
        };
        expect(await h.telemetryEvents(s.id)).toStrictEqual([
          {
            ...common,
            ...none,
            event: "heartbeat",
            ts_ms: 1_001,
            playhead_ms: 10,
            rendition: "360p",
            bitrate_kbps: 800,
            extra: { custom: { n: 1 } },
          },
          {
            ...common,
            ...none,
            event: "first_frame",
            ts_ms: 1_002,
            playhead_ms: 0,
            startup_ms: 812.5,
            extra: {},
          },
          {
            ...common,
            ...none,
            event: "error",
            ts_ms: 1_003,
            playhead_ms: 20,
            error_code: "E_NET",
            stall_ms: 40,
            extra: {},
          },
          {
            ...common,
            ...none,
            event: "a_kind_from_the_future",
            ts_ms: 1_004,
            playhead_ms: 30,
            extra: { nested: { a: [1, "b"] } },
          },
        ]);
      });

      it("accepts application/json, and a batch of 0 events (204, accepted 0)", async () => {
        const h = subject();
        const c = await catalog(h);
        const { session: s, token, urls } = await session(h, c.clear);
        const json = await beacon(urls.telemetry, { token, events: [heartbeat(1)] }, "application/json");
        expectNoContent(json);
        expect(json.headers.get("x-telemetry-accepted")).toBe("1");
        const empty = await beacon(urls.telemetry, { token, events: [] });
        expectNoContent(empty);
        expect(empty.headers.get("x-telemetry-accepted")).toBe("0");
        expect(await h.telemetryEvents(s.id)).toHaveLength(1);
        expect((await h.telemetryEvents(s.id))[0]?.player_version).toBeNull();
      });

      it("drops invalid events, stores the rest, and counts what it stored", async () => {
        const h = subject();
        const c = await catalog(h);
        const { session: s, token, urls } = await session(h, c.clear);
        const reply = await beacon(urls.telemetry, {
          token,
          events: [
            heartbeat(1),
            { event: "play", playhead_ms: 0 },
            { event: "play", ts_ms: 5 },
            { ts_ms: 5, playhead_ms: 0 },
            { event: 7, ts_ms: 5, playhead_ms: 0 },
            { event: "play", ts_ms: "5", playhead_ms: 0 },
            { event: "play", ts_ms: 5, playhead_ms: 0, rendition: 360 },
            { event: "", ts_ms: 5, playhead_ms: 0 },
            { ...heartbeat(98), note: "a\u0000b" },
            42,
            null,
            "heartbeat",
            [heartbeat(99)],
            heartbeat(2),
          ],
        });
        expectNoContent(reply);
        expect(reply.headers.get("x-telemetry-accepted")).toBe("2");
        expect((await h.telemetryEvents(s.id)).map((e) => e.ts_ms)).toEqual([1_001, 1_002]);
      });

      it("takes 50 events; refuses 51 (400) and a body over 32 KiB (413) without storing any", async () => {
        const h = subject();
        const c = await catalog(h);
        const { session: s, token, urls } = await session(h, c.clear);
        const fifty = await beacon(urls.telemetry, {
          token,
          events: Array.from({ length: 50 }, (_, i) => heartbeat(i)),
        });
        expectNoContent(fifty);
        expect(fifty.headers.get("x-telemetry-accepted")).toBe("50");
        const over = await beacon(urls.telemetry, {
          token,
          events: Array.from({ length: 51 }, (_, i) => heartbeat(100 + i)),
        });
        expectError(over, 400, "invalid_request");
        const big = JSON.stringify({ token, events: [{ ...heartbeat(200), pad: "x".repeat(32 * 1024) }] });
        expect(Buffer.byteLength(big)).toBeGreaterThan(32 * 1024);
        expectError(await beacon(urls.telemetry, big), 413, "payload_too_large");
        const justUnder = JSON.stringify({ token, events: [heartbeat(300)] });
        const padded = JSON.stringify({
          token,
          events: [{ ...heartbeat(300), pad: "x".repeat(32 * 1024 - justUnder.length - 20) }],
        });
        expect(Buffer.byteLength(padded)).toBeLessThanOrEqual(32 * 1024);
        const under = await beacon(urls.telemetry, padded);
        expectNoContent(under);
        expect(under.headers.get("x-telemetry-accepted")).toBe("1");
        const stored = await h.telemetryEvents(s.id);
        expect(stored).toHaveLength(51);
        expect(stored.some((e) => e.ts_ms >= 1_100 && e.ts_ms < 1_300)).toBe(false);
      });

      it("refuses a body that is not a batch: not JSON, no token, no events, events not a list (400)", async () => {
        const h = subject();
        const c = await catalog(h);
        const { token, urls } = await session(h, c.clear);
        for (const body of [
          "not json",
          "",
          JSON.stringify({ events: [heartbeat(1)] }),
          JSON.stringify({ token }),
          JSON.stringify({ token, events: { 0: heartbeat(1) } }),
          JSON.stringify({ token: "", events: [] }),
          JSON.stringify([token]),
        ])
          expectError(await beacon(urls.telemetry, body), 400, "invalid_request");
      });

      it("refuses an unknown field of the batch (400 naming it), while events keep theirs", async () => {
        const h = subject();
        const c = await catalog(h);
        const { session: created, token, urls } = await session(h, c.clear);
        expectInvalidFields(await beacon(urls.telemetry, { token, events: [heartbeat(1)], extra: 1 }), [
          ["extra"],
        ]);
        expectInvalidFields(await beacon(urls.telemetry, { token, events: [], titel: "x", n: 2 }), [
          ["titel"],
          ["n"],
        ]);
        expect(await h.telemetryEvents(created.id)).toEqual([]);
        const taken = await beacon(urls.telemetry, { token, events: [heartbeat(2)] });
        expect(taken.status).toBe(204);
        expect((await h.telemetryEvents(created.id)).map((e) => e.extra)).toStrictEqual([
          { custom: { n: 2 } },
        ]);
      });

      it("refuses a forged token (401) and an access token (403)", async () => {
        const h = subject();
        const c = await catalog(h);
        const { session: s, token, urls } = await session(h, c.clear);
        expectError(
          await beacon(urls.telemetry, { token: forge(token), events: [heartbeat(1)] }),
          401,
          "unauthorized",
        );
        const owner = await signUp(h.api);
        expectError(
          await beacon(urls.telemetry, { token: owner.access_token, events: [heartbeat(1)] }),
          403,
          "forbidden",
        );
        expect(await h.telemetryEvents(s.id)).toEqual([]);
      });

      it("limits batches per session (429 with Retry-After), other sessions unaffected, again after a minute", async () => {
        const h = subject();
        const c = await catalog(h);
        const { session: s, token, urls } = await session(h, c.clear);
        for (let i = 0; i < TELEMETRY_PER_MINUTE; i++)
          expect((await beacon(urls.telemetry, { token, events: [heartbeat(i)] })).status).toBe(204);
        const limited = await beacon(urls.telemetry, { token, events: [heartbeat(99)] });
        expectRateLimited(limited, 60);
        const other = await session(h, c.clear);
        expect((await beacon(urls.telemetry, { token: other.token, events: [heartbeat(1)] })).status).toBe(
          204,
        );
        h.clock.advance(MINUTE);
        expect((await beacon(urls.telemetry, { token, events: [heartbeat(100)] })).status).toBe(204);
        expect(await h.telemetryEvents(s.id)).toHaveLength(TELEMETRY_PER_MINUTE + 1);
      });

      it("answers the CORS preflight of a beacon and exposes x-telemetry-accepted", async () => {
        const h = subject();
        const c = await catalog(h);
        const { token, urls } = await session(h, c.clear);
        const preflight = await corsPreflight(urls.telemetry, "POST", "content-type");
        expect(preflight.headers.get("access-control-allow-headers")).toMatch(/\bcontent-type\b/i);
        const sent = await fetch(urls.telemetry, {
          method: "POST",
          headers: { origin: "https://player.example", "content-type": "text/plain" },
          body: JSON.stringify({ token, events: [heartbeat(1)] }),
        });
        expect(sent.status).toBe(204);
        expect(sent.headers.get("access-control-expose-headers")).toMatch(/\bx-telemetry-accepted\b/i);
      });
    });
  });
};

import { checkConformance, type Exchange } from "@vod/contract-tests";
import { openApiDocument, operations } from "@vod/http";
import { describe, expect, it } from "vitest";

type Document = Parameters<typeof checkConformance>[0];
const doc = openApiDocument(operations, { title: "t", version: "1" }) as unknown as Document;

const bytes = (value: unknown) =>
  new TextEncoder().encode(typeof value === "string" ? value : JSON.stringify(value));

const exchange = (e: Partial<Exchange> & Pick<Exchange, "method" | "target" | "status">): Exchange => ({
  requestHeaders: {},
  requestBody: undefined,
  headers: {},
  body: new Uint8Array(),
  ...e,
});

const json = { "content-type": "application/json; charset=utf-8" };
const asset = {
  id: "ast_1",
  title: "t",
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
  drm_enabled: false,
  visibility: "private",
  published_at: null,
  renditions: [],
  ready_at: null,
  mp4_support: "none",
  static_renditions: [],
  created_at: 1,
};
const notFound = { error: "not_found", code: "not_found", message: "no such route" };
const token = "v1.a.b";

/** The check of `describeDocumentConformance` is no rubber stamp: each kind of lie is caught. */
describe("checkConformance", () => {
  it("passes exchanges the document describes", () => {
    const result = checkConformance(doc, [
      exchange({
        method: "GET",
        target: "/v1/assets/ast_1",
        status: 200,
        headers: json,
        body: bytes({ asset }),
      }),
      exchange({ method: "GET", target: "/v1/nope", status: 404, headers: json, body: bytes(notFound) }),
      exchange({
        method: "GET",
        target: `/v1/play/${token}/720p/3.m4s`,
        status: 206,
        headers: { "content-type": "video/iso.segment", "content-range": "bytes 0-0/10" },
        body: bytes("x"),
      }),
      exchange({
        method: "POST",
        target: "/v1/telemetry",
        status: 204,
        requestHeaders: { "content-type": "text/plain;charset=UTF-8" },
        requestBody: bytes({ token, events: [{ event: "e", any: 1 }] }),
        headers: { "x-telemetry-accepted": "1" },
      }),
    ]);
    expect(result.disagreements).toEqual([]);
    expect(result.byOperation).toEqual({ getAsset: 1, playFile: 1, telemetry: 1 });
    expect(result.unknownRoutes).toBe(1);
  });

  it("names a body off its schema, an undocumented status or type, an error code of another status, a missing header, a refused request that succeeded", () => {
    const { title: _, ...untitled } = asset;
    const result = checkConformance(doc, [
      exchange({
        method: "GET",
        target: "/v1/assets/ast_1",
        status: 200,
        headers: json,
        body: bytes({ asset: untitled }),
      }),
      exchange({
        method: "GET",
        target: "/v1/assets/ast_1",
        status: 418,
        headers: json,
        body: bytes(notFound),
      }),
      exchange({
        method: "GET",
        target: `/v1/play/${token}/master.m3u8`,
        status: 200,
        headers: { "content-type": "application/octet-stream" },
        body: bytes("#EXTM3U"),
      }),
      exchange({
        method: "GET",
        target: `/v1/play/${token}/720p/3.m4s`,
        status: 416,
        headers: { "content-range": "bytes */10" },
      }),
      exchange({
        method: "GET",
        target: "/v1/auth/me",
        status: 429,
        headers: json,
        body: bytes({ error: "rate_limited", code: "rate_limited", message: "slow down" }),
      }),
      exchange({ method: "GET", target: "/v1/auth/me", status: 401, headers: json, body: bytes(notFound) }),
      exchange({
        method: "POST",
        target: "/v1/telemetry",
        status: 204,
        requestHeaders: { "content-type": "text/plain" },
        requestBody: bytes({ token, events: [], extra: 1 }),
        headers: { "x-telemetry-accepted": "0" },
      }),
      exchange({
        method: "GET",
        target: "/v1/nope",
        status: 404,
        headers: { "content-type": "text/html" },
        body: bytes("<p>"),
      }),
    ]);
    expect(result.disagreements).toEqual([
      expect.stringMatching(
        /^GET \/v1\/assets\/\{id\} → 200: getAsset: .*must have required property 'title'/,
      ),
      expect.stringMatching(/^GET \/v1\/assets\/\{id\} → 418: getAsset documents no 418/),
      expect.stringMatching(
        /^GET \/v1\/play\/\{token\}\/\{path\} → 200: playFile: content type application\/octet-stream/,
      ),
      expect.stringMatching(/^GET \/v1\/play\/\{token\}\/\{path\} → 416: playFile: content type \(none\)/),
      expect.stringMatching(/^GET \/v1\/auth\/me → 429: me: the required header Retry-After is missing/),
      expect.stringMatching(
        /^GET \/v1\/auth\/me → 401: me: .*code must be equal to one of the allowed values/,
      ),
      expect.stringMatching(/^POST \/v1\/telemetry → 204: telemetry took a body the document refuses/),
      expect.stringMatching(/^GET \/v1\/nope → 404: no documented operation, and not the error body/),
    ]);
  });
});

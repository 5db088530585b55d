import { describe, expect, it } from "vitest";
import { cueAt, parseStoryboard } from "../src/storyboard.js";
import { readToken, renewalDelayMs, withToken } from "../src/token.js";

const base64Url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
/** A playback token's shape (`v1.` and a compact JWS); the player reads it, never verifies it. */
const tokenOf = (claims: Record<string, unknown>) =>
  `v1.${base64Url({ alg: "EdDSA", typ: "vod-playback+jwt" })}.${base64Url(claims)}.c2lnbmF0dXJl`;

describe("what the player reads of a playback token", () => {
  it("reads the session, asset, expiry and DRM flag; anything else is no token", () => {
    expect(readToken(tokenOf({ sid: "pbs_1", aid: "ast_1", exp: 1_800_000_000, drm: true }))).toEqual({
      sessionId: "pbs_1",
      assetId: "ast_1",
      expiresAt: 1_800_000_000_000,
      drm: true,
    });
    expect(readToken(tokenOf({ sid: "pbs_1", aid: "ast_1", exp: 1 }))?.drm).toBe(false);
    expect(readToken(tokenOf({ sid: "pbs_1", exp: 1 }))).toBeUndefined();
    expect(readToken("v1.not.a.token")).toBeUndefined();
    expect(readToken("eyJ.eyJ.sig")).toBeUndefined();
  });

  it("asks for the next token a quarter of the life left before expiry, 10 to 60 s ahead", () => {
    const claims = (seconds: number) => ({
      sessionId: "s",
      assetId: "a",
      drm: false,
      expiresAt: seconds * 1000,
    });
    expect(renewalDelayMs(claims(60), 0)).toBe(45_000);
    expect(renewalDelayMs(claims(3_600), 0)).toBe(3_540_000);
    expect(renewalDelayMs(claims(20), 0)).toBe(10_000);
    expect(renewalDelayMs(claims(5), 0)).toBe(0);
  });

  it("puts the current token into any URL under /v1/play/{token}/, and leaves others alone", () => {
    expect(withToken("https://m.example/v1/play/v1.old/240p/3.m4s", "v1.new")).toBe(
      "https://m.example/v1/play/v1.new/240p/3.m4s",
    );
    expect(withToken("https://m.example/v1/telemetry", "v1.new")).toBe("https://m.example/v1/telemetry");
  });
});

describe("storyboard.vtt", () => {
  const vtt = `WEBVTT

00:00:00.000 --> 00:00:02.000
storyboard.jpg#xywh=0,0,160,90

00:00:02.000 --> 00:00:04.000
storyboard.jpg#xywh=160,0,160,90

01:00:04.000 --> 01:00:06.500
storyboard.jpg#xywh=320,90,160,90
`;
  const cues = parseStoryboard(vtt, "https://m.example/v1/play/v1.t/storyboard.vtt");

  it("reads each cue's times and tile, the sprite resolved against the WebVTT's URL", () => {
    expect(cues).toEqual([
      {
        start: 0,
        end: 2,
        image: "https://m.example/v1/play/v1.t/storyboard.jpg",
        x: 0,
        y: 0,
        width: 160,
        height: 90,
      },
      {
        start: 2,
        end: 4,
        image: "https://m.example/v1/play/v1.t/storyboard.jpg",
        x: 160,
        y: 0,
        width: 160,
        height: 90,
      },
      {
        start: 3604,
        end: 3606.5,
        image: "https://m.example/v1/play/v1.t/storyboard.jpg",
        x: 320,
        y: 90,
        width: 160,
        height: 90,
      },
    ]);
  });

  it("finds the tile of a time", () => {
    expect(cueAt(cues, 0)?.x).toBe(0);
    expect(cueAt(cues, 3.9)?.x).toBe(160);
    expect(cueAt(cues, 5000)?.x).toBe(320);
  });
});

import {
  type Asset,
  type AssetRendition,
  assetDetailsChange,
  newAssetDraft,
  staticRenditionsDue,
  staticSources,
} from "@vod/core";
import { describe, expect, it } from "vitest";
import { AssetId, TenantId } from "../src/domain/ids.js";

const NOW = Date.UTC(2026, 5, 1);

const rung = (name: string, height: number, status: AssetRendition["status"] = "ready"): AssetRendition => ({
  name,
  width: Math.round((height * 16) / 9 / 2) * 2,
  height,
  bitrate_kbps: height * 4,
  status,
});

describe("static renditions: what they are made of", () => {
  it("makes high.mp4 of the tallest ready rendition up to 1080p and low.mp4 of the shortest", () => {
    const ladder = [rung("2160p", 2160), rung("1080p", 1080), rung("720p", 720), rung("240p", 240)];
    expect(staticSources(ladder)).toEqual({ high: ladder[1], low: ladder[3] });
  });

  it("leaves out renditions that are not ready", () => {
    const ladder = [
      rung("1080p", 1080, "failed"),
      rung("720p", 720),
      rung("360p", 360),
      rung("240p", 240, "failed"),
    ];
    expect(staticSources(ladder)).toEqual({ high: ladder[1], low: ladder[2] });
  });

  it("makes both of the one rendition there is, and none of an asset with no ready rendition", () => {
    const one = [rung("480p", 480)];
    expect(staticSources(one)).toEqual({ high: one[0], low: one[0] });
    expect(staticSources([rung("480p", 480, "pending")])).toBeUndefined();
    expect(staticSources([])).toBeUndefined();
  });

  it("falls back to the shortest when every ready rendition is above 1080p", () => {
    const tall = [rung("2160p", 2160), rung("1440p", 1440)];
    expect(staticSources(tall)).toEqual({ high: tall[1], low: tall[1] });
  });
});

describe("static renditions: when they are due, and what a PATCH writes", () => {
  const draft = newAssetDraft({
    id: AssetId("ast_1"),
    tenant_id: TenantId("tnt_1"),
    mp4_support: "standard",
    now: NOW,
  });
  const ready: Asset = { ...draft, status: "ready", renditions: [rung("360p", 360), rung("240p", 240)] };

  it("is due once the asked-for asset is ready with no rendition pending", () => {
    expect(draft).toMatchObject({ mp4_support: "standard", static_renditions: [] });
    expect(staticRenditionsDue(draft)).toBe(false);
    expect(staticRenditionsDue(ready)).toBe(true);
    expect(
      staticRenditionsDue({ ...ready, renditions: [rung("360p", 360), rung("240p", 240, "pending")] }),
    ).toBe(false);
    expect(staticRenditionsDue({ ...ready, mp4_support: "none" })).toBe(false);
  });

  it("empties the list when turned off, and writes nothing of it when unchanged", () => {
    const made: Asset = {
      ...ready,
      static_renditions: [{ name: "high.mp4", status: "ready", size_bytes: 10 }],
    };
    expect(assetDetailsChange(made, { mp4_support: "none" }, NOW)).toEqual({
      mp4_support: "none",
      static_renditions: [],
    });
    expect(assetDetailsChange(made, { mp4_support: "standard" }, NOW)).toEqual({});
    expect(assetDetailsChange({ ...made, mp4_support: "none" }, { mp4_support: "standard" }, NOW)).toEqual({
      mp4_support: "standard",
    });
  });
});

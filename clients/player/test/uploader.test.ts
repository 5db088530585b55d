import { stat } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { playerBundle } from "@vod/player/files";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, type KitPages, startKitPages } from "../../../hosts/express/test/support.js";

interface UploaderRun {
  readonly events: Array<{ type: string; detail: Record<string, unknown> }>;
  readonly state: string;
  readonly dataState: string | null;
  readonly shown: string;
  readonly shownAsError: boolean;
  readonly percentShown: number;
}

// Plain browser JavaScript (the test has no DOM types): makes an uploader with `attributes`,
// gives it the page's video by a drop (a DataTransfer, as a dragged file arrives) and answers what
// it dispatched and shows once it ends.
const page = `<!doctype html><script type="module" src="/player.js"></script>
<script type="module">
window.dropVideo = async (attributes) => {
  await customElements.whenDefined("vod-uploader");
  const uploader = document.createElement("vod-uploader");
  for (const [name, value] of Object.entries(attributes)) uploader.setAttribute(name, value);
  document.body.replaceChildren(uploader);
  const events = [];
  const ended = new Promise((resolve) => {
    for (const type of ["upload-progress", "upload-complete", "upload-error"])
      document.addEventListener(type, (e) => {
        events.push({ type, detail: JSON.parse(JSON.stringify({ ...e.detail, error: undefined })) });
        if (type !== "upload-progress") resolve();
      });
  });
  const bytes = await (await fetch("/video.mp4")).blob();
  const transfer = new DataTransfer();
  transfer.items.add(new File([bytes], "video.mp4", { type: "video/mp4" }));
  uploader.dispatchEvent(new DragEvent("drop", { dataTransfer: transfer, bubbles: true, cancelable: true }));
  await ended;
  const status = uploader.shadowRoot.querySelector(".status");
  return {
    events,
    state: uploader.state,
    dataState: uploader.getAttribute("data-state"),
    shown: status.textContent,
    shownAsError: status.hasAttribute("data-error"),
    percentShown: uploader.shadowRoot.querySelector("progress").value,
  };
};
window.ready = true;
</script>`;

describe("<vod-uploader> in headless Chromium (the player's bundle, a host on memory storage)", () => {
  let kit: KitPages;
  let size: number;

  beforeAll(async () => {
    kit = await startKitPages({
      prefix: "vod-uploader-",
      videoMiB: 12,
      routes: (video) => ({
        "/": { text: page },
        "/player.js": { file: fileURLToPath(playerBundle) },
        "/video.mp4": { file: video },
      }),
      scope: "write",
    });
    size = (await stat(kit.video)).size;
  }, 120_000);

  afterAll(() => kit?.close());

  const drop = async (attributes: Record<string, string>) => {
    const opened = await kit.browser.open(`${kit.pages.url}/`);
    await opened.page.waitForFunction(() => (globalThis as unknown as { ready?: boolean }).ready === true);
    const run = (await opened.page.evaluate(
      (a) =>
        (globalThis as unknown as { dropVideo: (a: Record<string, string>) => Promise<unknown> }).dropVideo(
          a,
        ),
      attributes,
    )) as UploaderRun;
    return { run, problems: opened.problems };
  };

  it("with api-url and api-key, a dropped file is uploaded in parts: progress to 100%, upload-complete with the asset, now uploaded", async () => {
    const { run, problems } = await drop({ "api-url": kit.host.url, "api-key": kit.apiKey, parallel: "2" });

    expect(run.events.filter((e) => e.type === "upload-error")).toEqual([]);
    const percents = run.events.filter((e) => e.type === "upload-progress").map((e) => e.detail.percent);
    // One report as it starts, one per part stored (two parts of at most 8 MiB), in whole percents.
    expect(percents).toHaveLength(3);
    expect(percents[0]).toBe(0);
    expect(percents[1]).toBeGreaterThan(0);
    expect(percents[1]).toBeLessThan(100);
    expect(percents[2]).toBe(100);
    const complete = run.events.find((e) => e.type === "upload-complete")?.detail as {
      assetId: string;
      upload: { status: string; part_count: number; size_bytes: number };
      asset: { id: string; title: string; status: string };
    };
    expect(complete.upload).toMatchObject({ status: "completed", part_count: 2, size_bytes: size });
    expect(complete.asset).toMatchObject({ id: complete.assetId, title: "video.mp4", status: "uploaded" });
    expect(run).toMatchObject({
      state: "complete",
      dataState: "complete",
      shown: "video.mp4: uploaded",
      shownAsError: false,
      percentShown: 100,
    });
    const stored = await call(kit.host.url, `/v1/assets/${complete.assetId}`, {
      headers: { "x-api-key": kit.apiKey },
    });
    expect(stored.body.asset).toMatchObject({ status: "uploaded", origin_size_bytes: size });
    // The page server's 404 for the favicon aside.
    expect(problems().filter((p) => !p.includes("status of 404"))).toEqual([]);
  }, 60_000);

  it("a refused key, an endpoint that refuses and no attributes at all end in upload-error, shown in the widget", async () => {
    const badKey = await drop({ "api-url": kit.host.url, "api-key": "vod_not_a_key" });
    expect(badKey.run.events.map((e) => e.type)).toEqual(["upload-error"]);
    expect(badKey.run.events[0]?.detail).toMatchObject({ status: 401, code: "unauthorized" });
    expect(badKey.run).toMatchObject({ state: "error", dataState: "error", shownAsError: true });
    expect(badKey.run.shown).toMatch(/^video\.mp4: /);

    // The page server has no such route: 404 and not the API's JSON, so the code is the status's.
    const refused = await drop({ endpoint: "/no-such-endpoint" });
    expect(refused.run.events.map((e) => e.type)).toEqual(["upload-error"]);
    expect(refused.run.events[0]?.detail).toMatchObject({ status: 404, code: "http_404" });
    expect(refused.run.state).toBe("error");

    const bare = await drop({});
    expect(bare.run.events[0]?.detail.message).toBe(
      "<vod-uploader> needs an endpoint attribute (or api-url and api-key)",
    );
    expect(bare.run.state).toBe("error");
  }, 60_000);
});

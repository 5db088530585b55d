#!/usr/bin/env node
// Issue 28: player startup, load to first frame, in headless Chromium on the embedded default:
// the embed page (`{media_url}/v1/embed/{token}`, <vod-player> from /v1/player.js) against a page
// with hls.js alone (hls.min.js, `new Hls()`, `loadSource`, `attachMedia`, muted `play()`) on the
// same asset's manifest, each round on a new session and a new browser context (no cache),
// alternating which goes first. Times are the page's own clock:
// - navigation → first frame: from the start of the page's navigation to the first frame shown
//   (requestVideoFrameCallback), scripts' download and parse included;
// - player → first frame: from the player starting (the element given its token; `new Hls()`)
//   to that frame: the player's own `startup_ms`, as its telemetry reports it.
//
//   node bench/player-startup.mjs            # 10 s 1280x720 source, 4 renditions; ~2 min
//   options: --rounds N (9), --video-seconds N (10)
import { stat } from "node:fs/promises";
import { join } from "node:path";
import {
  benchArgs,
  benchScratch,
  callJson,
  cli,
  describeBuild,
  expectStatus,
  fmt,
  fromRepo,
  loadAverage,
  median,
  sleep,
  spread,
  startVodHost,
  table,
} from "./lib.mjs";
import { makeVideo } from "./processing.mjs";

const args = benchArgs({
  rounds: { type: "string", default: "9" },
  "video-seconds": { type: "string", default: "10" },
});
const rounds = Number(args.rounds);
const videoSeconds = Number(args["video-seconds"]);
const log = (message) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${message}\n`);

const { resolveTools } = await fromRepo("adapters/ffmpeg");
const { launchChromium, servePages, packageFile } = await fromRepo("test-services", "dist/browser.js");
const tools = resolveTools();
const { dir, track, cleanup } = await benchScratch({ dirPrefix: "vod-bench-player-", log });

/** hls.js alone, as its README starts a stream: the manifest in the page's fragment. */
const HLS_PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><script src="/hls.min.js"></script></head>
<body><video muted playsinline width="640" height="360"></video>
<script>
  const video = document.querySelector("video");
  const started = performance.now();
  video.requestVideoFrameCallback(() => {
    window.firstFrameTime = performance.now();
    window.startupMs = window.firstFrameTime - started;
  });
  const hls = new Hls();
  hls.on(Hls.Events.MANIFEST_PARSED, () => video.play());
  hls.loadSource(decodeURIComponent(location.hash.slice(1)));
  hls.attachMedia(video);
</script></body></html>`;

try {
  const source = join(dir, "source.mp4");
  log(`making a ${videoSeconds} s 1280x720 testsrc2 source`);
  await makeVideo(tools.ffmpeg, source, videoSeconds, { width: 1280, height: 720, fps: 30 });
  const vod = await startVodHost({
    cli,
    dataDir: join(dir, "host"),
    env: { VOD_FFMPEG_PATH: tools.ffmpeg, VOD_FFPROBE_PATH: tools.ffprobe },
    track,
  });
  const upload = await vod.begin((await stat(source)).size, "player startup bench");
  await vod.putParts(source, upload);
  await vod.complete(upload);
  let asset;
  for (;;) {
    asset = await vod.asset(upload.assetId);
    if (asset.status === "failed") throw new Error(`asset failed: ${asset.failure_code}`);
    if (asset.status === "ready" && asset.renditions.every((r) => r.status !== "pending")) break;
    await sleep(500);
  }
  log(`processed: ${asset.renditions.map((r) => r.name).join(", ")}`);
  const session = async () => {
    const reply = await callJson(vod.base, "/v1/playback/sessions", {
      body: { asset_id: upload.assetId },
      headers: vod.auth,
    });
    expectStatus("playback session", reply, 201);
    return reply.body;
  };

  const pages = await servePages({
    "/": { text: HLS_PAGE },
    "/hls.min.js": { file: packageFile("hls.js/dist/hls.min.js") },
  });
  const browser = await launchChromium();
  const bytes = {
    "vod-player": (await (await fetch(`${vod.base}/v1/player.js`)).arrayBuffer()).byteLength,
    "hls.js alone": (await stat(packageFile("hls.js/dist/hls.min.js"))).size,
  };
  const timed = { "vod-player": [], "hls.js alone": [] };
  const measure = async (which) => {
    const { token, urls } = await session();
    const url =
      which === "vod-player"
        ? `${vod.base}/v1/embed/${token}?autoplay=1`
        : `${pages.url}/#${encodeURIComponent(urls.manifest)}`;
    const { page } = await browser.open(url);
    try {
      const read =
        which === "vod-player"
          ? () => {
              const player = document.querySelector("vod-player");
              return player.startupMs === undefined
                ? undefined
                : { navigation: player.firstFrameTime, player: player.startupMs };
            }
          : () =>
              window.startupMs === undefined
                ? undefined
                : { navigation: window.firstFrameTime, player: window.startupMs };
      const handle = await page.waitForFunction(read, undefined, { timeout: 30_000, polling: 20 });
      timed[which].push(await handle.jsonValue());
    } finally {
      await page.context().close();
    }
  };
  try {
    // One of each first, not timed: Chromium's own first start.
    await measure("vod-player");
    await measure("hls.js alone");
    timed["vod-player"].length = 0;
    timed["hls.js alone"].length = 0;
    for (let i = 0; i < rounds; i++) {
      const order = i % 2 === 0 ? ["vod-player", "hls.js alone"] : ["hls.js alone", "vod-player"];
      for (const which of order) await measure(which);
      log(`round ${i + 1}/${rounds}`);
    }
  } finally {
    await browser.close();
    await pages.close();
  }

  const row = (which) => {
    const navigation = timed[which].map((t) => t.navigation);
    const player = timed[which].map((t) => t.player);
    return [
      which,
      `${fmt(median(navigation), 0)} ms${spread(navigation, 0)}`,
      `${fmt(median(player), 0)} ms${spread(player, 0)}`,
      `${fmt(bytes[which] / 1024, 0)} KiB`,
    ];
  };
  const ratio = (key) =>
    fmt(median(timed["vod-player"].map((t) => t[key])) / median(timed["hls.js alone"].map((t) => t[key])));
  console.log(
    `player startup, ${rounds} rounds each, ${videoSeconds} s 1280x720 source (${asset.renditions.length} renditions), ${describeBuild()}, ${loadAverage()}\n`,
  );
  console.log(
    table(
      [
        "player",
        "navigation → first frame: median (rounds)",
        "player → first frame: median (rounds)",
        "script",
      ],
      [
        row("vod-player"),
        row("hls.js alone"),
        [
          "vod-player / hls.js",
          ratio("navigation"),
          ratio("player"),
          fmt(bytes["vod-player"] / bytes["hls.js alone"]),
        ],
      ],
    ),
  );
} finally {
  await cleanup();
}

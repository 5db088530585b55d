import { execFile } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { ffmpegImageMaker, ffmpegMediaProcessor } from "@vod/adapter-ffmpeg";
import { memoryObjectStore, memoryRevocationStore } from "@vod/adapter-memory";
import type { ImageMaker } from "@vod/core";
import type { RunningHost } from "@vod/host-express";
import { Effect } from "effect";
import { beforeAll, describe, expect, it } from "vitest";
import { suiteScratch } from "./suites.js";
import { call, makeVideo, settledAsset, signUp, uploadAsset } from "./support.js";

const run = promisify(execFile);

const SECONDS = 20;
const WIDTH = 640;
const HEIGHT = 360;

interface Probed {
  readonly codec_name: string;
  readonly width: number;
  readonly height: number;
  readonly nb_read_frames?: string;
}

/** What ffprobe, an independent decoder, reads of an image file: its first video stream. */
const probe = async (file: string, countFrames = false): Promise<Probed> => {
  const { stdout } = await run("ffprobe", [
    "-v",
    "error",
    ...(countFrames ? ["-count_frames"] : []),
    "-select_streams",
    "v:0",
    "-show_entries",
    "stream=codec_name,width,height,nb_read_frames",
    "-of",
    "json",
    file,
  ]);
  const streams = JSON.parse(stdout).streams as Probed[];
  expect(streams).toHaveLength(1);
  return streams[0] as Probed;
};

/** PSNR (dB, the average over the planes) of two pictures of the same size, by ffmpeg's psnr filter. */
const psnr = async (a: string, b: string): Promise<number> => {
  const { stderr } = await run("ffmpeg", [
    "-v",
    "info",
    "-i",
    a,
    "-i",
    b,
    "-lavfi",
    "psnr",
    "-f",
    "null",
    "-",
  ]);
  const found = /average:(inf|[0-9.]+)/.exec(stderr)?.[1];
  if (found === undefined) throw new Error(`no PSNR in ffmpeg's output: ${stderr.slice(-500)}`);
  return found === "inf" ? Number.POSITIVE_INFINITY : Number(found);
};

/** The source's own frame at `seconds`, as ffmpeg extracts it from the file that was uploaded. */
const sourceFrame = async (source: string, seconds: number, out: string) => {
  await run("ffmpeg", ["-v", "error", "-y", "-ss", String(seconds), "-i", source, "-frames:v", "1", out]);
  return out;
};

/** How many images of `kind` this host has made (decoded and stored), from its /metrics. */
const imagesMade = async (url: string, kind: string) => {
  const text = await (await fetch(`${url}/metrics`)).text();
  const found = new RegExp(`^vod_images_made_total\\{kind="${kind}"\\} (\\d+)$`, "m").exec(text)?.[1];
  if (found === undefined) throw new Error(`no vod_images_made_total{kind="${kind}"} in /metrics`);
  return Number(found);
};

/** Width and height of an animated WebP's canvas (its VP8X chunk), and whether it has an ANIM chunk. */
const webpCanvas = (bytes: Buffer) => {
  expect(bytes.subarray(0, 4).toString("latin1")).toBe("RIFF");
  expect(bytes.subarray(8, 12).toString("latin1")).toBe("WEBP");
  expect(bytes.subarray(12, 16).toString("latin1")).toBe("VP8X");
  return {
    width: bytes.readUIntLE(24, 3) + 1,
    height: bytes.readUIntLE(27, 3) + 1,
    animated: bytes.includes(Buffer.from("ANIM", "latin1")),
    frames: bytes.toString("latin1").split("ANMF").length - 1,
  };
};

/**
 * ffmpeg's image maker with a gate a test may close: a call then waits at it (counted as
 * `entered`) until the test opens it. `maxAtOnce` is the most calls seen running together.
 */
const gatedMaker = (inner: ImageMaker) => {
  let open: Promise<void> = Promise.resolve();
  let release = () => {};
  let entered = 0;
  let running = 0;
  let maxAtOnce = 0;
  const gate = <A, E>(work: () => Effect.Effect<A, E>) =>
    Effect.acquireUseRelease(
      Effect.sync(() => {
        entered++;
        running++;
        maxAtOnce = Math.max(maxAtOnce, running);
      }),
      () =>
        Effect.zipRight(
          Effect.promise(() => open),
          work(),
        ),
      () => Effect.sync(() => running--),
    );
  const maker: ImageMaker = {
    frame: (source, request) => gate(() => inner.frame(source, request)),
    animated: (source, request) => gate(() => inner.animated(source, request)),
    sprite: (source, request) => gate(() => inner.sprite(source, request)),
  };
  return {
    maker,
    close: () => {
      open = new Promise((resolve) => {
        release = resolve;
      });
    },
    open: () => release(),
    entered: () => entered,
    maxAtOnce: () => maxAtOnce,
  };
};

interface Cue {
  readonly start: number;
  readonly end: number;
  readonly image: string;
  readonly x: number;
  readonly y: number;
  readonly w: number;
  readonly h: number;
}

const parseStamp = (stamp: string) => {
  const [h, m, s] = stamp.split(":");
  return Number(h) * 3600 + Number(m) * 60 + Number(s);
};

const parseVtt = (text: string): Cue[] => {
  expect(text.startsWith("WEBVTT\n")).toBe(true);
  return text
    .split("\n\n")
    .slice(1)
    .filter((block) => block.trim() !== "")
    .map((block) => {
      const [timing, target] = block.trim().split("\n");
      const times = /^(\S+) --> (\S+)$/.exec(timing ?? "");
      const xywh = /^(\S+)#xywh=(\d+),(\d+),(\d+),(\d+)$/.exec(target ?? "");
      if (!times || !xywh) throw new Error(`not a storyboard cue: ${block}`);
      return {
        start: parseStamp(times[1] as string),
        end: parseStamp(times[2] as string),
        image: xywh[1] as string,
        x: Number(xywh[2]),
        y: Number(xywh[3]),
        w: Number(xywh[4]),
        h: Number(xywh[5]),
      };
    });
};

describe("images made on request: thumbnails, animated previews, storyboards of real media", () => {
  const scratch = suiteScratch("vod-images-");
  let dir: string;
  let host: RunningHost;
  let auth: Record<string, string>;
  let source: string;
  let clearAsset: string;
  let drmAsset: string;
  const gated = gatedMaker(ffmpegImageMaker());

  beforeAll(async () => {
    dir = await scratch.dir();
    host = await scratch.memoryHost(
      // One image made at a time, one more waiting: the bound's test below fills both.
      { VOD_DATA_DIR: dir, VOD_LOG_LEVEL: "silent", VOD_IMAGE_CONCURRENCY: "1", VOD_IMAGE_MAX_WAITING: "1" },
      {
        objectStore: memoryObjectStore(),
        revocationStore: memoryRevocationStore(),
        mediaProcessor: ffmpegMediaProcessor(),
        imageMaker: gated.maker,
      },
      { retryDelayMs: 200 },
    );
    auth = await signUp(host.url, "images");
    source = join(dir, "source.mp4");
    await makeVideo(source, { width: WIDTH, height: HEIGHT, seconds: SECONDS, fps: 25 });
    const bytes = await readFile(source);
    clearAsset = (await uploadAsset(host.url, auth, bytes, "clear")).assetId;
    drmAsset = (await uploadAsset(host.url, auth, bytes, "protected", { drm: true })).assetId;
    expect((await settledAsset(host.url, auth, clearAsset)).status).toBe("ready");
    expect((await settledAsset(host.url, auth, drmAsset)).status).toBe("ready");
  }, 180_000);

  const session = async (assetId: string) => {
    const res = await call(host.url, "/v1/playback/sessions", { body: { asset_id: assetId }, headers: auth });
    expect(res.status).toBe(201);
    return res.body as { token: string; urls: Record<string, string> };
  };

  /** The file at `url`, saved as `name` in the suite's directory, with the answer's status and headers. */
  const save = async (url: string, name: string) => {
    const res = await fetch(url);
    const bytes = Buffer.from(await res.arrayBuffer());
    const path = join(dir, name);
    await writeFile(path, bytes);
    return { res, bytes, path };
  };

  it("names the thumbnail and the storyboard in the session's urls, under the token's path", async () => {
    const { token, urls } = await session(clearAsset);
    const base = urls.manifest?.replace(/master\.m3u8$/, "");
    expect(base).toContain(`/v1/play/${token}/`);
    expect(urls.thumbnail).toBe(`${base}thumbnail.jpg`);
    expect(urls.storyboard).toBe(`${base}storyboard.vtt`);

    const { res, path } = await save(urls.thumbnail as string, "default.jpg");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/jpeg");
    expect(res.headers.get("cache-control")).toMatch(/^private, max-age=\d+, immutable$/);
    expect(await probe(path)).toMatchObject({ codec_name: "mjpeg", width: WIDTH, height: HEIGHT });
  }, 60_000);

  it("makes the frame at time=12.5 that ffmpeg extracts from the source, and not another", async () => {
    const { urls } = await session(clearAsset);
    const base = urls.manifest?.replace(/master\.m3u8$/, "") as string;
    const { res, path } = await save(`${base}thumbnail.png?time=12.5`, "at-12.5.png");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/png");
    expect(await probe(path)).toMatchObject({ codec_name: "png", width: WIDTH, height: HEIGHT });

    const same = await psnr(path, await sourceFrame(source, 12.5, join(dir, "source-12.5.png")));
    const other = await psnr(path, await sourceFrame(source, 9, join(dir, "source-9.png")));
    const neighbour = await psnr(path, await sourceFrame(source, 12.54, join(dir, "source-12.54.png")));
    expect(same).toBeGreaterThanOrEqual(25);
    expect(other).toBeLessThan(same - 10);
    // The next frame (1/25 s later) is already further off: the match is of the very frame.
    expect(neighbour).toBeLessThan(same);
  }, 60_000);

  it("encodes jpg, png and webp that decode at the asked size, fitted as fit_mode says", async () => {
    const { urls } = await session(clearAsset);
    const base = urls.manifest?.replace(/master\.m3u8$/, "") as string;
    const cases = [
      { query: "thumbnail.jpg?time=3&width=320", codec: "mjpeg", width: 320, height: 180 },
      { query: "thumbnail.png?time=3&height=90", codec: "png", width: 160, height: 90 },
      { query: "thumbnail.webp?time=3&width=320", codec: "webp", width: 320, height: 180 },
      { query: "thumbnail.jpg?time=3&width=320&height=320", codec: "mjpeg", width: 320, height: 180 },
      {
        query: "thumbnail.jpg?time=3&width=320&height=320&fit_mode=preserve",
        codec: "mjpeg",
        width: 320,
        height: 180,
      },
      {
        query: "thumbnail.jpg?time=3&width=200&height=200&fit_mode=crop",
        codec: "mjpeg",
        width: 200,
        height: 200,
      },
      {
        query: "thumbnail.png?time=3&width=200&height=200&fit_mode=pad",
        codec: "png",
        width: 200,
        height: 200,
      },
    ];
    for (const [i, each] of cases.entries()) {
      const { res, path } = await save(
        `${base}${each.query}`,
        `fit-${i}.${each.query.split("?")[0]?.split(".")[1]}`,
      );
      expect(res.status, each.query).toBe(200);
      expect(await probe(path), each.query).toMatchObject({
        codec_name: each.codec,
        width: each.width,
        height: each.height,
      });
    }
    // Padded: the bands above and below the picture are black; cropped: the picture fills the box.
    const topRows = async (file: string) => {
      const { stdout } = await run(
        "ffmpeg",
        ["-v", "error", "-i", file, "-vf", "crop=200:10:0:0,format=gray", "-f", "rawvideo", "-"],
        { encoding: "buffer" },
      );
      return Math.max(...stdout);
    };
    expect(await topRows(join(dir, "fit-6.png"))).toBeLessThanOrEqual(20);
    expect(await topRows(join(dir, "fit-5.jpg"))).toBeGreaterThan(60);
  }, 120_000);

  it("serves a second identical request from the store: no decoder runs", async () => {
    const { urls } = await session(clearAsset);
    const base = urls.manifest?.replace(/master\.m3u8$/, "") as string;
    const before = await imagesMade(host.url, "thumbnail");
    const first = await save(`${base}thumbnail.jpg?time=7.25&width=480`, "cached-1.jpg");
    expect(first.res.status).toBe(200);
    expect(await imagesMade(host.url, "thumbnail")).toBe(before + 1);
    // The same image, its time written another way, by another session, and by HEAD.
    const again = (await session(clearAsset)).urls.manifest?.replace(/master\.m3u8$/, "") as string;
    const second = await save(`${again}thumbnail.jpg?width=480&time=7.250`, "cached-2.jpg");
    expect(second.res.status).toBe(200);
    expect(second.bytes.equals(first.bytes)).toBe(true);
    const head = await fetch(`${again}thumbnail.jpg?time=7.25&width=480`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-length")).toBe(String(first.bytes.length));
    expect(await imagesMade(host.url, "thumbnail")).toBe(before + 1);

    // Five identical requests at once for an image not yet made: one making, five answers.
    const burst = await Promise.all(
      Array.from({ length: 5 }, () => fetch(`${base}thumbnail.webp?time=15&width=256`)),
    );
    expect(burst.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    const bodies = await Promise.all(burst.map(async (r) => Buffer.from(await r.arrayBuffer())));
    expect(new Set(bodies.map((b) => b.toString("base64"))).size).toBe(1);
    expect(await imagesMade(host.url, "thumbnail")).toBe(before + 2);
  }, 60_000);

  it("answers bad parameters with 400 invalid_request naming each field", async () => {
    const { urls } = await session(clearAsset);
    const base = urls.manifest?.replace(/master\.m3u8$/, "") as string;
    const before = await imagesMade(host.url, "thumbnail");
    const cases: Array<[string, string]> = [
      ["thumbnail.jpg?time=abc", "time"],
      ["thumbnail.jpg?time=-1", "time"],
      ["thumbnail.jpg?time=20", "time"],
      ["thumbnail.jpg?time=999", "time"],
      ["thumbnail.jpg?width=5000", "width"],
      ["thumbnail.jpg?width=1000", "width"],
      ["thumbnail.jpg?height=361", "height"],
      ["thumbnail.jpg?width=2.5", "width"],
      ["thumbnail.jpg?fit_mode=zoom", "fit_mode"],
      ["animated.gif?start=0&end=11", "end"],
      ["animated.gif?start=5&end=4", "end"],
      ["animated.gif?start=15&end=21", "end"],
      ["animated.gif?start=25", "start"],
      ["animated.gif?fps=31", "fps"],
      ["animated.gif?width=700", "width"],
      ["animated.webp?fps=0", "fps"],
    ];
    for (const [query, name] of cases) {
      const res = await call(base.replace(/\/$/, ""), `/${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body.code, query).toBe("invalid_request");
      expect(
        (res.body.details.fields as Array<{ path: string[] }>).map((f) => f.path),
        query,
      ).toContainEqual([name]);
    }
    expect(await imagesMade(host.url, "thumbnail")).toBe(before);
  }, 60_000);

  it("makes a storyboard whose VTT covers the duration in order, each tile inside the sprite", async () => {
    const { urls } = await session(clearAsset);
    const vttRes = await fetch(urls.storyboard as string);
    expect(vttRes.status).toBe(200);
    expect(vttRes.headers.get("content-type")).toMatch(/^text\/vtt/);
    const cues = parseVtt(await vttRes.text());
    expect(cues.length).toBeGreaterThan(1);
    expect(cues.length).toBeLessThanOrEqual(100);
    expect(cues[0]?.start).toBe(0);
    expect(cues[cues.length - 1]?.end).toBe(SECONDS);
    for (const [i, cue] of cues.entries()) {
      expect(cue.end).toBeGreaterThan(cue.start);
      if (i > 0) expect(cue.start).toBe(cues[i - 1]?.end);
      expect(cue.image).toBe("storyboard.jpg");
    }
    const base = (urls.storyboard as string).replace(/storyboard\.vtt$/, "");
    for (const format of ["jpg", "webp"] as const) {
      const { res, path } = await save(`${base}storyboard.${format}`, `storyboard.${format}`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe(`image/${format === "jpg" ? "jpeg" : "webp"}`);
      const sprite = await probe(path);
      expect(sprite.codec_name).toBe(format === "jpg" ? "mjpeg" : "webp");
      for (const cue of cues) {
        expect(cue.x + cue.w).toBeLessThanOrEqual(sprite.width);
        expect(cue.y + cue.h).toBeLessThanOrEqual(sprite.height);
        expect(cue.w / cue.h).toBeCloseTo(WIDTH / HEIGHT, 1);
      }
      // Every tile is a picture of the video: the tile at 12 s is the source's frame there, near enough.
      const at12 = cues.find((c) => c.start <= 12 && 12 < c.end) as Cue;
      const tile = join(dir, `tile-${format}.png`);
      await run("ffmpeg", [
        "-v",
        "error",
        "-y",
        "-i",
        path,
        "-vf",
        `crop=${at12.w}:${at12.h}:${at12.x}:${at12.y}`,
        tile,
      ]);
      const reference = join(dir, `tile-ref-${format}.png`);
      await run("ffmpeg", [
        "-v",
        "error",
        "-y",
        "-ss",
        String(at12.start),
        "-i",
        source,
        "-frames:v",
        "1",
        "-vf",
        `scale=${at12.w}:${at12.h}`,
        reference,
      ]);
      expect(await psnr(tile, reference)).toBeGreaterThanOrEqual(20);
    }
  }, 120_000);

  it("makes animated previews that decode to the asked span, size and rate", async () => {
    const { urls } = await session(clearAsset);
    const base = urls.manifest?.replace(/master\.m3u8$/, "") as string;
    const gif = await save(`${base}animated.gif?start=2&end=5&width=320&fps=10`, "clip.gif");
    expect(gif.res.status).toBe(200);
    expect(gif.res.headers.get("content-type")).toBe("image/gif");
    const probed = await probe(gif.path, true);
    expect(probed).toMatchObject({ codec_name: "gif", width: 320, height: 180 });
    // 3 s at 10 frames a second.
    expect(Number(probed.nb_read_frames)).toBe(30);
    // Its first frame is the source's at 2 s: closer to it than to the frames a tenth of a second
    // either side (a GIF's 256 colours keep any match below a still's PSNR).
    const first = join(dir, "clip-first.png");
    await run("ffmpeg", ["-v", "error", "-y", "-i", gif.path, "-frames:v", "1", first]);
    const against = async (seconds: number) => {
      const reference = join(dir, `clip-ref-${seconds}.png`);
      await run("ffmpeg", [
        ...["-v", "error", "-y", "-ss", String(seconds), "-i", source],
        ...["-frames:v", "1", "-vf", "scale=320:180", reference],
      ]);
      return psnr(first, reference);
    };
    const atStart = await against(2);
    expect(atStart).toBeGreaterThanOrEqual(18);
    expect(atStart).toBeGreaterThan(await against(1.9));
    expect(atStart).toBeGreaterThan(await against(2.1));

    // Defaults: 0 to 5 s, 320 px, 15 frames a second.
    const webp = await save(`${base}animated.webp`, "clip.webp");
    expect(webp.res.status).toBe(200);
    expect(webp.res.headers.get("content-type")).toBe("image/webp");
    expect(webpCanvas(webp.bytes)).toEqual({ width: 320, height: 180, animated: true, frames: 75 });
  }, 120_000);

  it("makes a DRM asset's images from its origin: clear pictures, never its encrypted segments", async () => {
    const { urls } = await session(drmAsset);
    const base = urls.manifest?.replace(/master\.m3u8$/, "") as string;
    const { res, path } = await save(`${base}thumbnail.png?time=12.5`, "drm-12.5.png");
    expect(res.status).toBe(200);
    expect(await probe(path)).toMatchObject({ codec_name: "png", width: WIDTH, height: HEIGHT });
    expect(await psnr(path, join(dir, "source-12.5.png"))).toBeGreaterThanOrEqual(25);
    const vtt = parseVtt(await (await fetch(urls.storyboard as string)).text());
    const sprite = await save(`${base}storyboard.jpg`, "drm-storyboard.jpg");
    expect(sprite.res.status).toBe(200);
    const probed = await probe(sprite.path);
    for (const cue of vtt) expect(cue.x + cue.w).toBeLessThanOrEqual(probed.width);
  }, 60_000);

  it("makes one image at a time on this node, lets one more wait, and refuses the next with 429", async () => {
    const { urls } = await session(clearAsset);
    const base = urls.manifest?.replace(/master\.m3u8$/, "") as string;
    gated.close();
    const entered = gated.entered();
    const first = fetch(`${base}thumbnail.jpg?time=1.5`);
    while (gated.entered() === entered) await new Promise((resolve) => setTimeout(resolve, 10));
    // The first is being made; of two more, one waits for its turn and one is refused at once.
    const others = [fetch(`${base}thumbnail.jpg?time=2.5`), fetch(`${base}thumbnail.jpg?time=3.5`)];
    const refused = await Promise.race(others);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(((await refused.json()) as { code: string }).code).toBe("rate_limited");
    expect(gated.entered()).toBe(entered + 1);
    gated.open();
    expect((await first).status).toBe(200);
    const statuses = (await Promise.all(others)).map((r) => r.status).sort();
    expect(statuses).toEqual([200, 429]);
    expect(gated.entered()).toBe(entered + 2);
    expect(gated.maxAtOnce()).toBe(1);
  }, 60_000);

  it("refuses a forged or ended token with 401, before any image is made", async () => {
    const { urls } = await session(clearAsset);
    const forged = (urls.thumbnail as string).replace(
      /\/v1\/play\/([^/]+)\//,
      (_, t: string) => `/v1/play/${t.slice(0, -3)}AAA/`,
    );
    const before = await imagesMade(host.url, "thumbnail");
    const res = await fetch(`${forged}?time=1`);
    expect(res.status).toBe(401);
    expect(((await res.json()) as { code: string }).code).toBe("unauthorized");
    expect(await imagesMade(host.url, "thumbnail")).toBe(before);
  });
});

import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ffmpegMediaProcessor } from "@vod/adapter-ffmpeg";
import type { MediaInput, MediaProcessor } from "@vod/core";
import { Effect, Either } from "effect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ProbeJson, readDecodableCodecs, readProbe } from "../src/probe.js";
import { makeSources, type Sources } from "./fixtures.js";

let sources: Sources;
let scratchDir: string;
let processor: MediaProcessor;

beforeAll(async () => {
  sources = await makeSources();
  scratchDir = await mkdtemp(join(tmpdir(), "vod-ffmpeg-scratch-"));
  processor = ffmpegMediaProcessor({ scratchDir });
});

afterAll(async () => {
  await rm(sources.dir, { recursive: true, force: true });
  await rm(scratchDir, { recursive: true, force: true });
});

const probe = (input: MediaInput) => Effect.runPromise(Effect.either(processor.probe(input)));
const code = (result: Either.Either<unknown, { readonly code: string }>) =>
  Either.isLeft(result) ? result.left.code : "probed";

describe("probe", () => {
  it("fills every source_* field of a 640x360 H.264/AAC source", async () => {
    const result = await probe({ path: sources.withAudio });
    const source = Either.getOrThrow(result);
    expect(source).toMatchObject({
      source_width: 640,
      source_height: 360,
      source_fps: 30,
      source_codec: "h264",
      has_video: true,
      has_audio: true,
    });
    expect(Math.abs(source.source_duration_ms! - 4000)).toBeLessThanOrEqual(100);
    expect(Number.isInteger(source.source_duration_ms)).toBe(true);
    expect(source.source_bitrate_kbps).toBeGreaterThan(0);
    expect(Number.isInteger(source.source_bitrate_kbps)).toBe(true);
  });

  it("reports a source without audio, read from a stream copied to scratch space", async () => {
    const source = Either.getOrThrow(
      await probe({ open: () => Effect.succeed(createReadStream(sources.small)) }),
    );
    expect(source).toMatchObject({
      source_width: 320,
      source_height: 180,
      has_video: true,
      has_audio: false,
    });
    expect(await readdir(scratchDir)).toEqual([]);
  });

  it("checks the expected sha256 of a streamed source as it copies it: a difference is checksum_mismatch", async () => {
    const open = () => Effect.succeed(createReadStream(sources.small));
    const actual = createHash("sha256")
      .update(await readFile(sources.small))
      .digest("hex");
    const right = Either.getOrThrow(await probe({ open, expectedSha256: actual }));
    expect(right).toMatchObject({ source_width: 320, source_height: 180 });
    const wrong = await probe({ open, expectedSha256: "0".repeat(64) });
    expect(Either.isLeft(wrong) && wrong.left).toMatchObject({
      _tag: "MediaRejected",
      code: "checksum_mismatch",
    });
    expect(await readdir(scratchDir)).toEqual([]);
  });

  it("checks each declared part's sha256 over its byte range, chunks crossing part ends: the first that differs is named", async () => {
    const bytes = await readFile(sources.small);
    // Chunks of 1000 bytes against parts of 7777: most chunks hold the end of one part and the
    // start of the next; the last part is short.
    const open = () =>
      Effect.succeed(
        (async function* () {
          for (let at = 0; at < bytes.byteLength; at += 1000) yield bytes.subarray(at, at + 1000);
        })(),
      );
    const partSize = 7777;
    const count = Math.ceil(bytes.byteLength / partSize);
    expect(count).toBeGreaterThan(3);
    expect(bytes.byteLength % partSize).not.toBe(0);
    const sha = (n: number) =>
      createHash("sha256")
        .update(bytes.subarray((n - 1) * partSize, n * partSize))
        .digest("hex");
    const declared = (wrong: ReadonlyArray<number>, numbers: ReadonlyArray<number>) => ({
      partSize,
      sha256: new Map(numbers.map((n) => [n, wrong.includes(n) ? sha(n === 1 ? 2 : 1) : sha(n)])),
    });
    const all = Array.from({ length: count }, (_, i) => i + 1);
    expect(Either.isRight(await probe({ open, expectedPartSha256: declared([], all) }))).toBe(true);
    // Only some parts declared, the last among them.
    expect(Either.isRight(await probe({ open, expectedPartSha256: declared([], [2, count]) }))).toBe(true);
    for (const wrong of [[3, count], [count]]) {
      const failed = await probe({ open, expectedPartSha256: declared(wrong, all) });
      expect(Either.isLeft(failed) && failed.left).toMatchObject({
        _tag: "MediaRejected",
        code: "checksum_mismatch",
        message: expect.stringContaining(`part ${wrong[0]} of the upload`),
      });
    }
    expect(await readdir(scratchDir)).toEqual([]);
  });

  it("rejects random bytes as invalid_media", async () => {
    expect(code(await probe({ path: sources.noise }))).toBe("invalid_media");
  });

  it("rejects an audio-only file as invalid_media", async () => {
    expect(code(await probe({ path: sources.wav }))).toBe("invalid_media");
  });

  it("rejects a video stream of an unknown codec as unsupported_codec", async () => {
    expect(code(await probe({ path: sources.unknownCodec }))).toBe("unsupported_codec");
  });

  it("answers processing_error when a tool runs past its time limit", async () => {
    const hasty = ffmpegMediaProcessor({ scratchDir, probeTimeoutMs: 1 });
    const result = await Effect.runPromise(Effect.either(hasty.probe({ path: sources.withAudio })));
    expect(Either.isLeft(result) && result.left).toMatchObject({ code: "processing_error" });
    expect(Either.isLeft(result) && result.left.message).toMatch(/longer than 1 ms/);
  });

  it("answers processing_error when the source cannot be read from the store", async () => {
    const { StorageError } = await import("@vod/core");
    const result = await probe({ open: () => Effect.fail(new StorageError({ message: "bucket gone" })) });
    expect(code(result)).toBe("processing_error");
    expect(await readdir(scratchDir)).toEqual([]);
  });
});

describe("readProbe", () => {
  const h264 = new Set(["h264", "aac"]);
  const video = {
    codec_type: "video",
    codec_name: "h264",
    width: 1920,
    height: 1080,
    avg_frame_rate: "30000/1001",
    r_frame_rate: "30000/1001",
  };
  const read = (json: ProbeJson, decodable: ReadonlySet<string> = h264) => readProbe(json, decodable);

  it("rounds the frame rate to 3 decimals, falling back to r_frame_rate", () => {
    const ntsc = read({ streams: [video], format: { duration: "10.01", bit_rate: "5000499" } });
    expect(Either.getOrThrow(ntsc)).toMatchObject({
      source_fps: 29.97,
      source_duration_ms: 10010,
      source_bitrate_kbps: 5000,
    });
    const noAverage = read({ streams: [{ ...video, avg_frame_rate: "0/0", r_frame_rate: "25/1" }] });
    expect(Either.getOrThrow(noAverage).source_fps).toBe(25);
  });

  it("computes the bitrate from size and duration when the container gives none", () => {
    const result = read({ streams: [video], format: { duration: "8", size: "1000000" } });
    expect(Either.getOrThrow(result).source_bitrate_kbps).toBe(1000);
  });

  it("reports display dimensions: rotation swaps the sides, non-square pixels are stretched", () => {
    const rotated = read({ streams: [{ ...video, side_data_list: [{ rotation: -90 }] }] });
    expect(Either.getOrThrow(rotated)).toMatchObject({ source_width: 1080, source_height: 1920 });
    const tagged = read({ streams: [{ ...video, tags: { rotate: "270" } }] });
    expect(Either.getOrThrow(tagged)).toMatchObject({ source_width: 1080, source_height: 1920 });
    const anamorphic = read({
      streams: [{ ...video, width: 720, height: 576, sample_aspect_ratio: "16:15" }],
    });
    expect(Either.getOrThrow(anamorphic)).toMatchObject({ source_width: 768, source_height: 576 });
  });

  it("ignores cover art: an audio file with a picture is not a video", () => {
    const result = read({
      streams: [
        { codec_type: "audio", codec_name: "mp3" },
        {
          codec_type: "video",
          codec_name: "mjpeg",
          width: 500,
          height: 500,
          disposition: { attached_pic: 1 },
        },
      ],
    });
    expect(code(result)).toBe("invalid_media");
  });

  it("answers unsupported_codec for a codec this ffmpeg cannot decode", () => {
    expect(code(read({ streams: [{ ...video, codec_name: "avs2" }] }))).toBe("unsupported_codec");
    expect(code(read({ streams: [{ ...video, codec_name: undefined }] }))).toBe("unsupported_codec");
  });

  it("refuses playlists, which would make ffmpeg follow references", () => {
    const result = read({ streams: [video], format: { format_name: "hls" } });
    expect(code(result)).toBe("invalid_media");
  });

  it("reads the decodable codecs from ffmpeg -codecs", () => {
    const listing = [
      " DEV.LS h264                 H.264 / AVC",
      " ..V.L. avs2                 AVS2-P2/IEEE1857.4",
      " D.VI.S 012v                 Uncompressed 4:2:2 10-bit",
      " DEA.L. aac                  AAC",
    ].join("\n");
    expect([...readDecodableCodecs(listing)].sort()).toEqual(["012v", "aac", "h264"]);
  });
});

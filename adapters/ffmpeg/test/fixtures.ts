import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { defaultLadder, type FfmpegConfig, ffmpegMediaProcessor, resolveTools } from "@vod/adapter-ffmpeg";
import type { MediaInput, OutputFile, PackageOptions, Rendition } from "@vod/core";
import { Effect } from "effect";

export const run = promisify(execFile);
export const system = resolveTools();

const lavfi = (...args: string[]) =>
  run(system.ffmpeg, ["-hide_banner", "-v", "error", "-y", ...args], { encoding: "utf8" });

export interface Sources {
  readonly dir: string;
  /** 640x360, 30 fps, H.264 + AAC, 4 s. */
  readonly withAudio: string;
  /** 320x180, 30 fps, H.264, no audio, 2 s. */
  readonly small: string;
  readonly noise: string;
  /** PCM audio only. */
  readonly wav: string;
  /** A Matroska file whose video codec id is one nothing knows. */
  readonly unknownCodec: string;
}

/** Sources made with lavfi, in a fresh temporary directory. */
export const makeSources = async (): Promise<Sources> => {
  const dir = await mkdtemp(join(tmpdir(), "vod-ffmpeg-test-"));
  const x264 = ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"];
  const withAudio = join(dir, "with-audio.mp4");
  const small = join(dir, "small.mp4");
  const wav = join(dir, "tone.wav");
  const avc = join(dir, "avc.mkv");
  await Promise.all([
    lavfi(
      ...["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30", "-f", "lavfi", "-i", "sine=frequency=440"],
      ...["-t", "4", ...x264, "-c:a", "aac", withAudio],
    ),
    lavfi("-f", "lavfi", "-i", "testsrc2=size=320x180:rate=30", "-t", "2", ...x264, small),
    lavfi("-f", "lavfi", "-i", "sine=frequency=440", "-t", "2", wav),
    lavfi("-f", "lavfi", "-i", "testsrc2=size=320x180:rate=30", "-t", "1", ...x264, avc),
  ]);
  const noise = join(dir, "noise.mp4");
  await writeFile(noise, randomBytes(256 * 1024));
  const unknownCodec = join(dir, "unknown-codec.mkv");
  const mkv = await readFile(avc);
  const id = Buffer.from("V_MPEG4/ISO/AVC");
  const at = mkv.indexOf(id);
  if (at < 0) throw new Error("no codec id in the Matroska fixture");
  Buffer.from("V_MPEG4/ISO/XYZ").copy(mkv, at);
  await writeFile(unknownCodec, mkv);
  return { dir, withAudio, small, noise, wav, unknownCodec };
};

/**
 * Probes then packages `input` with an ultrafast processor of `config`, writing what it emits
 * under a fresh directory in `root`: the output, what was emitted in emission order, and where.
 */
export const packageInto = async (
  root: string,
  input: MediaInput,
  config: FfmpegConfig = {},
  options?: PackageOptions,
  /** The rungs to make, and the directory to add them to (a fresh one by default). */
  unit: { readonly ladder?: ReadonlyArray<Rendition>; readonly outDir?: string } = {},
) => {
  const scratchDir = await mkdtemp(join(root, "scratch-"));
  const outDir = unit.outDir ?? (await mkdtemp(join(root, "out-")));
  const processor = ffmpegMediaProcessor({ x264Preset: "ultrafast", ...config, scratchDir });
  const emitted: Array<{ path: string; contentType: string }> = [];
  const emit = (file: OutputFile) =>
    Effect.promise(async () => {
      const chunks: Uint8Array[] = [];
      for await (const chunk of file.body) chunks.push(chunk);
      await mkdir(dirname(join(outDir, file.path)), { recursive: true });
      await writeFile(join(outDir, file.path), Buffer.concat(chunks));
      emitted.push({ path: file.path, contentType: file.contentType });
    });
  const probed = await Effect.runPromise(processor.probe(input));
  const output = await Effect.runPromise(
    processor.package(input, probed, unit.ladder ?? defaultLadder, emit, options),
  );
  return { output, emitted, outDir, scratchDir };
};

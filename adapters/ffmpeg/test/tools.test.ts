import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { resolveTools } from "@vod/adapter-ffmpeg";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);

describe("resolveTools", () => {
  it("takes a configured path first", () => {
    const tools = resolveTools({
      ffmpegPath: "/usr/bin/ffmpeg",
      ffprobePath: "ffprobe",
      searchPath: "/usr/bin",
    });
    expect(tools).toMatchObject({
      ffmpeg: "/usr/bin/ffmpeg",
      ffprobe: "/usr/bin/ffprobe",
      source: { ffmpeg: "config", ffprobe: "config" },
    });
  });

  it("then the system's, found on PATH", () => {
    const tools = resolveTools({ searchPath: "/nonexistent:/usr/bin" });
    expect(tools).toMatchObject({
      ffmpeg: "/usr/bin/ffmpeg",
      ffprobe: "/usr/bin/ffprobe",
      source: { ffmpeg: "system", ffprobe: "system" },
      warning: undefined,
    });
  });

  it("then the binaries shipped by npm packages, which run", async () => {
    const tools = resolveTools({ searchPath: "" });
    expect(tools.source).toEqual({ ffmpeg: "npm", ffprobe: "npm", packager: "npm" });
    expect(tools.ffmpeg).toMatch(/node_modules\/@ffmpeg-installer\/[^/]+\/ffmpeg$/);
    // Never silently: the old build is named, with how to install a maintained one.
    expect(tools.warning).toMatch(
      /^ffmpeg 20181210-\w+ and ffprobe \S+ are the builds shipped by an npm package/,
    );
    expect(tools.warning).toContain("untrusted uploads are decoded by an old ffmpeg build");
    expect(tools.warning).toContain("apt-get install ffmpeg");
    const ffmpeg = await run(tools.ffmpeg, ["-hide_banner", "-version"]);
    expect(ffmpeg.stdout).toMatch(/^ffmpeg version/);
    const ffprobe = await run(tools.ffprobe, ["-hide_banner", "-version"]);
    expect(ffprobe.stdout).toMatch(/^ffprobe version/);
  });

  it("uses the packager binary of the pinned shaka-packager package", async () => {
    const { packager } = resolveTools();
    expect(packager).toMatch(/node_modules\/shaka-packager\/bin\/packager-/);
    expect((await run(packager, ["--version"])).stdout).toMatch(/v3\.4\.2/);
  });

  it("fails naming the setting when a configured path is not an executable", () => {
    expect(() => resolveTools({ ffmpegPath: "/nonexistent/ffmpeg" })).toThrow(
      /ffmpegPath is set to "\/nonexistent\/ffmpeg"/,
    );
    const notExecutable = fileURLToPath(import.meta.url);
    expect(() => resolveTools({ packagerPath: notExecutable })).toThrow(/packagerPath/);
  });
});

import { accessSync, chmodSync, constants, statSync } from "node:fs";
import { createRequire } from "node:module";
import { delimiter, dirname, isAbsolute, join, resolve } from "node:path";

export interface ToolConfig {
  /** ffmpeg to run (the host passes `VOD_FFMPEG_PATH`): a path, or a command name looked up on PATH. */
  readonly ffmpegPath?: string | undefined;
  /** ffprobe to run (the host passes `VOD_FFPROBE_PATH`). */
  readonly ffprobePath?: string | undefined;
  /** Shaka Packager to run instead of the one shipped by the `shaka-packager` package. */
  readonly packagerPath?: string | undefined;
  /** The directories searched for system binaries; default `process.env.PATH`. */
  readonly searchPath?: string | undefined;
}

export type ToolSource = "config" | "system" | "npm";

export interface ResolvedTools {
  readonly ffmpeg: string;
  readonly ffprobe: string;
  readonly packager: string;
  readonly source: {
    readonly ffmpeg: ToolSource;
    readonly ffprobe: ToolSource;
    readonly packager: ToolSource;
  };
  /**
   * Set when ffmpeg or ffprobe is the old build an npm package ships: what to tell the operator at
   * start, at warn, naming the versions and how to install the system's.
   */
  readonly warning: string | undefined;
}

const require = createRequire(import.meta.url);
const exe = process.platform === "win32" ? ".exe" : "";

const isExecutable = (path: string): boolean => {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

const onSearchPath = (name: string, searchPath: string): string | undefined => {
  for (const dir of searchPath.split(delimiter)) {
    if (dir === "") continue;
    const candidate = join(dir, name + exe);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
};

// The installer packages mark their binary executable in a postinstall script, which an install
// with scripts disabled skips; doing the same here is all that script would have done.
const shipped = (path: string | undefined): string | undefined => {
  if (path === undefined) return undefined;
  if (isExecutable(path)) return path;
  try {
    chmodSync(path, statSync(path).mode | 0o100);
  } catch {
    return undefined;
  }
  return isExecutable(path) ? path : undefined;
};

interface Shipped {
  readonly path: string;
  /** The build the package names (`20181210-g0e8eb07980` for @ffmpeg-installer's ffmpeg). */
  readonly version: string;
}

const fromPackage = (name: string): Shipped | undefined => {
  try {
    const loaded = require(name) as { path?: unknown; version?: unknown };
    if (typeof loaded.path !== "string") return undefined;
    return { path: loaded.path, version: typeof loaded.version === "string" ? loaded.version : "unknown" };
  } catch {
    // Not installed (optional dependency) or no binary for this platform.
    return undefined;
  }
};

const shippedByPackage = (name: string): Shipped | undefined => {
  const found = fromPackage(name);
  const path = shipped(found?.path);
  return found && path ? { ...found, path } : undefined;
};

/**
 * The installer packages ship static builds that are never updated (ffmpeg's is from 2018):
 * decoding untrusted uploads with them exposes every demuxer and decoder bug fixed since. Kept as
 * a last resort for a machine without ffmpeg, never silently.
 */
export const oldBuildWarning = (builds: ReadonlyArray<{ tool: string; version: string }>): string =>
  `${builds.map((b) => `${b.tool} ${b.version}`).join(" and ")} ${builds.length > 1 ? "are the builds" : "is the build"} ` +
  "shipped by an npm package (@ffmpeg-installer / @ffprobe-installer), found because the system has none: " +
  "untrusted uploads are decoded by an old ffmpeg build without years of security fixes. " +
  "Install ffmpeg (Debian/Ubuntu: apt-get install ffmpeg; macOS: brew install ffmpeg) " +
  "or set VOD_FFMPEG_PATH and VOD_FFPROBE_PATH to a maintained build.";

const packagerBinaries: Partial<Record<NodeJS.Platform, Partial<Record<NodeJS.Architecture, string>>>> = {
  linux: { x64: "packager-linux-x64", arm64: "packager-linux-arm64" },
  darwin: { x64: "packager-osx-x64", arm64: "packager-osx-arm64" },
  win32: { x64: "packager-win-x64.exe" },
};

const shippedPackager = (): string | undefined => {
  const binary = packagerBinaries[process.platform]?.[process.arch];
  if (binary === undefined) return undefined;
  try {
    return join(dirname(require.resolve("shaka-packager/package.json")), "bin", binary);
  } catch {
    return undefined;
  }
};

/** A tool configured by path (`ffmpegPath`, `ffprobePath`, `packagerPath`) that is not there. */
export class ToolNotFound extends Error {
  override readonly name = "ToolNotFound";
  constructor(
    readonly setting: string,
    readonly value: string,
  ) {
    super(`${setting} is set to "${value}", which is not an executable file`);
  }
}

const explicit = (setting: string, value: string, searchPath: string): string => {
  const found =
    isAbsolute(value) || /[/\\]/.test(value)
      ? isExecutable(resolve(value))
        ? resolve(value)
        : undefined
      : onSearchPath(value, searchPath);
  if (found === undefined) throw new ToolNotFound(setting, value);
  return found;
};

const resolveOne = (
  tool: "ffmpeg" | "ffprobe" | "packager",
  configured: string | undefined,
  searchPath: string,
  order: ReadonlyArray<readonly [ToolSource, () => string | undefined]>,
): readonly [string, ToolSource] => {
  if (configured !== undefined && configured !== "") {
    return [explicit(`${tool}Path`, configured, searchPath), "config"];
  }
  for (const [source, find] of order) {
    const found = find();
    if (found !== undefined) return [found, source];
  }
  throw new Error(
    `No ${tool} found: set ${tool}Path${tool === "packager" ? "" : ` (VOD_${tool.toUpperCase()}_PATH)`}, ` +
      `install ${tool === "packager" ? "the shaka-packager package" : `${tool} on PATH`}, or install the npm package that ships it`,
  );
};

/**
 * Finds each tool: the configured path first, else ffmpeg/ffprobe on the system's PATH, else the
 * binaries shipped by npm packages (`@ffmpeg-installer/ffmpeg`, `@ffprobe-installer/ffprobe`),
 * which sets `warning`.
 * The packager: the configured path, else the binary of the pinned `shaka-packager` package, else
 * `packager` on PATH. Throws, naming the setting, when a tool cannot be found.
 */
export const resolveTools = (config: ToolConfig = {}): ResolvedTools => {
  const searchPath = config.searchPath ?? process.env.PATH ?? "";
  const builds: { tool: string; version: string }[] = [];
  const npmBuild = (tool: string, name: string) => () => {
    const found = shippedByPackage(name);
    if (found) builds.push({ tool, version: found.version });
    return found?.path;
  };
  const [ffmpeg, ffmpegSource] = resolveOne("ffmpeg", config.ffmpegPath, searchPath, [
    ["system", () => onSearchPath("ffmpeg", searchPath)],
    ["npm", npmBuild("ffmpeg", "@ffmpeg-installer/ffmpeg")],
  ]);
  const [ffprobe, ffprobeSource] = resolveOne("ffprobe", config.ffprobePath, searchPath, [
    ["system", () => onSearchPath("ffprobe", searchPath)],
    ["npm", npmBuild("ffprobe", "@ffprobe-installer/ffprobe")],
  ]);
  // The pinned package comes before PATH: its flags are the ones this adapter was written against,
  // and "packager" on PATH may be an unrelated program.
  const [packager, packagerSource] = resolveOne("packager", config.packagerPath, searchPath, [
    ["npm", () => shipped(shippedPackager())],
    ["system", () => onSearchPath("packager", searchPath)],
  ]);
  return {
    ffmpeg,
    ffprobe,
    packager,
    source: { ffmpeg: ffmpegSource, ffprobe: ffprobeSource, packager: packagerSource },
    warning: builds.length > 0 ? oldBuildWarning(builds) : undefined,
  };
};

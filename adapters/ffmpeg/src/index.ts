import { ContainerModule } from "inversify";
import { type FfmpegConfig, ffmpegMediaProcessor } from "./media-processor.js";

export { defaultLadder, type PlannedRendition, planRenditions } from "./ladder.js";
export { clearKeyLine, type FfmpegConfig, ffmpegMediaProcessor, signalClearKey } from "./media-processor.js";
export { type ResolvedTools, resolveTools, type ToolConfig, type ToolSource } from "./tools.js";

/**
 * Binds the MediaProcessor port to ffmpeg. The tools are looked for when the port is first asked
 * for, so a host that never processes media starts without them.
 */
export const ffmpegAdapters = (config: FfmpegConfig = {}): ContainerModule =>
  new ContainerModule(({ bind }) => {
    bind(Symbol.for("vod.MediaProcessor"))
      .toDynamicValue(() => ffmpegMediaProcessor(config))
      .inSingletonScope();
  });

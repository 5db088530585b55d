export { type FfmpegImageConfig, ffmpegImageMaker, fitFilter } from "./images.js";
export { defaultLadder, type PlannedRendition, planRenditions } from "./ladder.js";
export { clearKeyLine, type FfmpegConfig, ffmpegMediaProcessor, signalClearKey } from "./media-processor.js";
export {
  type ResolvedTools,
  resolveTools,
  type ToolConfig,
  ToolNotFound,
  type ToolSource,
} from "./tools.js";

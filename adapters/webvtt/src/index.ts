export { webVttTextTrackReader } from "./text-track-reader.js";

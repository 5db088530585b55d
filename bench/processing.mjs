// The processing baseline: the test video and the one plain ffmpeg command a user would run by hand.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";

export const VIDEO = { width: 1280, height: 720, fps: 30 };

/**
 * A test video made by ffmpeg: testsrc2 and a 440 Hz tone, H.264/AAC in MP4 (as the host's tests
 * make), of `VIDEO`'s size unless told another.
 */
export const makeVideo = async (ffmpeg, path, videoSeconds, { width, height, fps } = VIDEO) => {
  await promisify(execFile)(ffmpeg, [
    ...["-v", "error", "-y", "-f", "lavfi"],
    ...["-i", `testsrc2=size=${width}x${height}:rate=${fps}:duration=${videoSeconds}`],
    ...["-f", "lavfi", "-i", `sine=frequency=440:duration=${videoSeconds}`],
    ...["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac"],
    ...["-movflags", "+faststart", path],
  ]);
};

/**
 * What a user would run by hand for the same ladder: one ffmpeg, the picture split and scaled per
 * rung, x264 veryfast at CRF 23 capped at each rung's bitrate, keyframes every 2 s, AAC 128k, HLS
 * fMP4 in 6 s segments with a master playlist (var_stream_map, one shared audio group).
 */
export const plainFfmpegArgs = (source, out, planned) => {
  const n = planned.length;
  const split = `[0:v:0]split=${n}${planned.map((_, i) => `[s${i}]`).join("")}`;
  const scales = planned.map(({ width, height }, i) => `[s${i}]scale=${width}:${height},setsar=1[v${i}]`);
  const gop = String(VIDEO.fps * 2 * 2);
  return [
    ...["-hide_banner", "-nostdin", "-v", "error", "-y", "-i", source],
    ...["-filter_complex", [split, ...scales].join(";")],
    ...planned.flatMap((_, i) => ["-map", `[v${i}]`]),
    ...["-map", "0:a:0"],
    ...["-c:v", "libx264", "-preset", "veryfast", "-profile:v", "high", "-pix_fmt", "yuv420p", "-crf", "23"],
    ...planned.flatMap(({ rendition: r }, i) => [
      `-maxrate:v:${i}`,
      `${r.videoBitrateKbps}k`,
      `-bufsize:v:${i}`,
      `${r.videoBitrateKbps * 2}k`,
    ]),
    ...["-g", gop, "-sc_threshold", "0", "-force_key_frames", "expr:gte(t,n_forced*2)"],
    ...["-c:a", "aac", "-b:a", `${planned[0].rendition.audioBitrateKbps}k`, "-ac", "2", "-ar", "48000"],
    ...["-f", "hls", "-hls_time", "6", "-hls_playlist_type", "vod", "-hls_segment_type", "fmp4"],
    ...["-hls_segment_filename", join(out, "%v/%d.m4s"), "-master_pl_name", "master.m3u8"],
    ...["-var_stream_map", [...planned.map((_, i) => `v:${i},agroup:audio`), "a:0,agroup:audio"].join(" ")],
    join(out, "%v/playlist.m3u8"),
  ];
};

import type { TextTrack } from "../domain/text-track.js";
import type { TextTrackCue } from "../ports/text-track-reader.js";

/** Subtitle segments are as long as the renditions' (processing.ts SEGMENT_SECONDS). */
const TEXT_SEGMENT_MS = 6_000;

/** Where playback delivers the asset's text tracks: `text/{name}` under the session's files. */
export const TEXT_DIRECTORY = "text/";

/**
 * The names of a track's files (`textTrackKey` stores them, `TEXT_DIRECTORY` delivers them).
 * Ids hold no `-` or `.`, so the two prefixes of one track's names are no other track's.
 */
export const textTrackFiles = {
  /** The whole track as one WebVTT file: what the DASH manifest points at. */
  whole: (trackId: string) => `${trackId}.vtt`,
  /** The HLS media playlist of its segments. */
  playlist: (trackId: string) => `${trackId}.m3u8`,
  /** Its WebVTT segments one after the other, each a whole WebVTT file: the playlist's byte ranges. */
  segments: (trackId: string) => `${trackId}-segments.vtt`,
  /** Prefixes of every name of the track: what removing it deletes. */
  prefixes: (trackId: string) => [`${trackId}.`, `${trackId}-`],
};

/**
 * The segments' cue times are the media's presentation times, which start at 0 in the packaged
 * fMP4: the map says so, rather than leaving each player to assume a mapping.
 */
const TIMESTAMP_MAP = "X-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000";

const vttOf = (cues: ReadonlyArray<TextTrackCue>, header: ReadonlyArray<string> = []) =>
  `${["WEBVTT", ...header].join("\n")}\n\n${cues.map((c) => `${c.block}\n`).join("\n")}`;

/**
 * A track's files: the whole WebVTT, and segmented WebVTT with its HLS media playlist. The
 * segments cover `durationMs` (the asset's, when known) or up to the last cue's end, whichever is
 * longer; a cue crossing a segment boundary is in both segments, as RFC 8216 3.5 asks. They are
 * stored as one object, each segment a byte range of it (`EXT-X-BYTERANGE`): a track spanning
 * hours has thousands of segments, too many objects to write for one request.
 */
export const textTrackOutput = (
  trackId: string,
  cues: ReadonlyArray<TextTrackCue>,
  durationMs: number | null,
): ReadonlyArray<{ readonly name: string; readonly contentType: string; readonly text: string }> => {
  const end = cues.reduce((last, c) => Math.max(last, c.endMs), Math.max(durationMs ?? 0, 1));
  const count = Math.ceil(end / TEXT_SEGMENT_MS);
  // Each cue goes to the segments it overlaps: one pass, in file order, however many segments.
  const cuesOf = Array.from({ length: count }, (): TextTrackCue[] => []);
  for (const cue of cues) {
    const last = Math.min(count - 1, Math.ceil(cue.endMs / TEXT_SEGMENT_MS) - 1);
    for (let i = Math.floor(cue.startMs / TEXT_SEGMENT_MS); i <= last; i++) cuesOf[i]!.push(cue);
  }
  const encoder = new TextEncoder();
  const segmentsName = textTrackFiles.segments(trackId);
  let offset = 0;
  const segments = cuesOf.map((segmentCues, i) => {
    const from = i * TEXT_SEGMENT_MS;
    const to = Math.min(end, from + TEXT_SEGMENT_MS);
    const text = vttOf(segmentCues, [TIMESTAMP_MAP]);
    const bytes = encoder.encode(text).byteLength;
    const range = `${bytes}@${offset}`;
    offset += bytes;
    return { seconds: (to - from) / 1000, text, range };
  });
  const playlist = [
    "#EXTM3U",
    "#EXT-X-VERSION:4",
    `#EXT-X-TARGETDURATION:${TEXT_SEGMENT_MS / 1000}`,
    "#EXT-X-MEDIA-SEQUENCE:0",
    "#EXT-X-PLAYLIST-TYPE:VOD",
    ...segments.flatMap((s) => [
      `#EXTINF:${s.seconds.toFixed(3)},`,
      `#EXT-X-BYTERANGE:${s.range}`,
      segmentsName,
    ]),
    "#EXT-X-ENDLIST",
    "",
  ].join("\n");
  return [
    { name: segmentsName, contentType: "text/vtt", text: segments.map((s) => s.text).join("") },
    { name: textTrackFiles.whole(trackId), contentType: "text/vtt", text: vttOf(cues) },
    { name: textTrackFiles.playlist(trackId), contentType: "application/vnd.apple.mpegurl", text: playlist },
  ];
};

const SUBTITLES_GROUP = "subs";

/** A quoted-string of a playlist attribute holds no double quote and no line break (RFC 8216 4.2). */
const quoted = (value: string) => `"${value.replace(/["\r\n]/g, "'")}"`;

/** Names in a rendition group are unique (RFC 8216 4.3.4.1.1): a repeated one gets its number. */
const uniqueNames = (tracks: ReadonlyArray<TextTrack>) => {
  const seen = new Map<string, number>();
  return tracks.map((t) => {
    const n = (seen.get(t.name) ?? 0) + 1;
    seen.set(t.name, n);
    return n === 1 ? t.name : `${t.name} (${n})`;
  });
};

/**
 * The master playlist with the ready tracks as one subtitle group, which every variant names.
 * A closed-captions track is marked as transcribing dialogue and describing sound (SDH), the
 * characteristics Apple's players show as such.
 */
export const withSubtitles = (master: string, tracks: ReadonlyArray<TextTrack>): string => {
  if (tracks.length === 0) return master;
  const names = uniqueNames(tracks);
  const media = tracks.map(
    (t, i) =>
      `#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="${SUBTITLES_GROUP}",NAME=${quoted(names[i]!)},` +
      `LANGUAGE=${quoted(t.language_code)},DEFAULT=NO,AUTOSELECT=YES,FORCED=NO,` +
      (t.closed_captions
        ? 'CHARACTERISTICS="public.accessibility.transcribes-spoken-dialog,public.accessibility.describes-music-and-sound",'
        : "") +
      `URI=${quoted(`${TEXT_DIRECTORY}${textTrackFiles.playlist(t.id)}`)}`,
  );
  const lines = master.split("\n");
  const firstVariant = lines.findIndex((l) => l.startsWith("#EXT-X-STREAM-INF:"));
  const at = firstVariant < 0 ? lines.length : firstVariant;
  const variants = lines.map((l) =>
    l.startsWith("#EXT-X-STREAM-INF:") ? `${l},SUBTITLES="${SUBTITLES_GROUP}"` : l,
  );
  return [...variants.slice(0, at), ...media, "", ...variants.slice(at)].join("\n");
};

const xmlEscaped = (value: string) => value.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * The DASH manifest with a text AdaptationSet per ready track, each one sidecar WebVTT file
 * (`track.vtt`), its role `caption` for closed captions, else `subtitle`. Ids from 1000 on:
 * the packager numbers its own sets from 0.
 */
export const withTextAdaptationSets = (manifest: string, tracks: ReadonlyArray<TextTrack>): string => {
  const close = manifest.lastIndexOf("</Period>");
  if (tracks.length === 0 || close < 0) return manifest;
  const names = uniqueNames(tracks);
  const sets = tracks.map(
    (t, i) =>
      `    <AdaptationSet id="${1000 + i}" contentType="text" mimeType="text/vtt" lang="${xmlEscaped(t.language_code)}">\n` +
      `      <Role schemeIdUri="urn:mpeg:dash:role:2011" value="${t.closed_captions ? "caption" : "subtitle"}"/>\n` +
      `      <Label>${xmlEscaped(names[i]!)}</Label>\n` +
      `      <Representation id="${xmlEscaped(t.id)}" bandwidth="256">\n` +
      `        <BaseURL>${xmlEscaped(`${TEXT_DIRECTORY}${textTrackFiles.whole(t.id)}`)}</BaseURL>\n` +
      "      </Representation>\n" +
      "    </AdaptationSet>\n",
  );
  return `${manifest.slice(0, close)}${sets.join("")}  ${manifest.slice(close)}`;
};

import { XMLBuilder, XMLParser } from "fast-xml-parser";

/**
 * The DASH manifest of an asset whose renditions are packaged a few at a time: each packager run
 * writes an MPD of its own renditions, which is merged here into the one stored, as the HLS
 * master is (`mergeMasters`). Parsed and written with fast-xml-parser in its order-preserving
 * form, so that elements and attributes this code does not know (ContentProtection with its
 * `cenc:` names, AudioChannelConfiguration) pass through as they are.
 */

/** An element in fast-xml-parser's order-preserving form: `{ [tag]: children, ":@": attributes }`. */
type XmlNode = { [tag: string]: XmlNode[] } & { ":@"?: Record<string, string> };

const OPTIONS = {
  preserveOrder: true,
  ignoreAttributes: false,
  attributeNamePrefix: "",
  parseAttributeValue: false,
  parseTagValue: false,
  format: true,
  indentBy: "  ",
  suppressEmptyNode: true,
} as const;

const tagOf = (node: XmlNode) => Object.keys(node).find((k) => k !== ":@");
const childrenOf = (node: XmlNode, tag: string): XmlNode[] => (tagOf(node) === tag ? (node[tag] ?? []) : []);
const attrs = (node: XmlNode): Record<string, string> => {
  node[":@"] ??= {};
  return node[":@"];
};

const periodOf = (doc: XmlNode[]) => {
  const mpd = doc.find((n) => tagOf(n) === "MPD");
  const period = mpd && childrenOf(mpd, "MPD").find((n) => tagOf(n) === "Period");
  if (!period) throw new Error("the packager's MPD has no Period");
  return period;
};

const adaptationSets = (period: XmlNode) =>
  childrenOf(period, "Period").filter((n) => tagOf(n) === "AdaptationSet");

const videoSetOf = (period: XmlNode) => adaptationSets(period).find((s) => attrs(s).contentType === "video");

const representationsOf = (set: XmlNode) =>
  childrenOf(set, "AdaptationSet").filter((n) => tagOf(n) === "Representation");

/** A representation's rendition: the directory of its segments (`360p/init.mp4`: 360p). */
const renditionOf = (representation: XmlNode): string | undefined => {
  const template = childrenOf(representation, "Representation").find((n) => tagOf(n) === "SegmentTemplate");
  const init = template && attrs(template).initialization;
  return init?.includes("/") ? init.slice(0, init.indexOf("/")) : undefined;
};

/**
 * Ids by rendition name (the packager numbers them from 0 in each run, so two runs' would
 * collide), the picture size on each video representation (the packager puts it on the set when
 * it has one), and the set's sizes as bounds.
 */
const normalize = (period: XmlNode) => {
  for (const set of adaptationSets(period)) {
    const setAttrs = attrs(set);
    for (const r of representationsOf(set)) {
      const name = renditionOf(r);
      if (name !== undefined) attrs(r).id = name;
      if (setAttrs.contentType === "video") {
        for (const side of ["width", "height"] as const)
          if (attrs(r)[side] === undefined && setAttrs[side] !== undefined) attrs(r)[side] = setAttrs[side];
      }
    }
    if (setAttrs.contentType === "video") bound(set);
  }
};

/** The video set's maxWidth/maxHeight from its representations, none of its own width/height. */
const bound = (set: XmlNode) => {
  const setAttrs = attrs(set);
  delete setAttrs.width;
  delete setAttrs.height;
  const reps = representationsOf(set);
  setAttrs.maxWidth = String(Math.max(...reps.map((r) => Number(attrs(r).width ?? 0))));
  setAttrs.maxHeight = String(Math.max(...reps.map((r) => Number(attrs(r).height ?? 0))));
};

/**
 * The stored manifest (`previous`, absent for the first run) with this run's video
 * representations added, one of the same rendition replaced, highest bandwidth first. The rest of
 * the previous manifest (audio, protection, durations) stays: every run packages the same source
 * under the same key.
 */
export const mergeManifests = (previous: string | undefined, fresh: string): string => {
  const parser = new XMLParser(OPTIONS);
  const next = parser.parse(fresh) as XmlNode[];
  const nextPeriod = periodOf(next);
  normalize(nextPeriod);
  if (previous === undefined) return new XMLBuilder(OPTIONS).build(next) as string;
  const base = parser.parse(previous) as XmlNode[];
  const basePeriod = periodOf(base);
  normalize(basePeriod);
  const baseVideo = videoSetOf(basePeriod);
  const nextVideo = videoSetOf(nextPeriod);
  if (baseVideo && nextVideo) {
    const byId = new Map(representationsOf(baseVideo).map((r) => [attrs(r).id, r]));
    for (const r of representationsOf(nextVideo)) byId.set(attrs(r).id, r);
    const reps = [...byId.values()].sort((a, b) => Number(attrs(b).bandwidth) - Number(attrs(a).bandwidth));
    baseVideo.AdaptationSet = [
      ...childrenOf(baseVideo, "AdaptationSet").filter((n) => tagOf(n) !== "Representation"),
      ...reps,
    ];
    bound(baseVideo);
  }
  return new XMLBuilder(OPTIONS).build(base) as string;
};

import { type Links, Requests } from "@vod/core";
import { Schema } from "effect";
import type { App, Operation } from "./operation.js";
import {
  clearKeyLicense,
  entitlement,
  playFile,
  staticAudio,
  staticHigh,
  staticLow,
  storyboardVtt,
  telemetry,
  thumbnailJpg,
  uploadPart,
} from "./operations.js";

/** Where each app answers, as clients reach it (no trailing slash). */
export type AppUrls = Readonly<Record<Exclude<App, "api">, string>>;

/**
 * The path of `op` with its parameters filled in: a `:name` is one segment, encoded whole; a
 * `*name` is the rest of the path, its slashes kept and each segment encoded.
 */
const pathOf = (op: Operation, params: Readonly<Record<string, string>>): string =>
  op.path.replace(/([:*])(\w+)/g, (_, kind: string, name: string) => {
    const value = params[name] ?? "";
    return kind === ":" ? encodeURIComponent(value) : value.split("/").map(encodeURIComponent).join("/");
  });

const encodePartParams = Schema.encodeSync(Requests.PartParams);
const encodePartQuery = Schema.encodeSync(Requests.PartUrlQuery);

/**
 * The core's `Links`, made from the catalog: every address is its route's path, its parameters
 * and query encoded by the same schemas that decode them when the link is followed.
 */
export const catalogLinks = (urls: AppUrls): Links => {
  const at = (op: Operation, params: Readonly<Record<string, string>> = {}) =>
    `${urls[op.app as Exclude<App, "api">]}${pathOf(op, params)}`;
  return {
    partUpload: ({ uploadId, number, tenantId, expiresSec, signature }) => {
      const query = new URLSearchParams(encodePartQuery({ t: tenantId, e: expiresSec, s: signature }));
      return `${at(uploadPart, encodePartParams({ id: uploadId, number }))}?${query}`;
    },
    playFile: (token, file) => at(playFile, { token, path: file }),
    thumbnail: (token) => at(thumbnailJpg, { token }),
    storyboard: (token) => at(storyboardVtt, { token }),
    staticRendition: (token, name) =>
      at(name === "high.mp4" ? staticHigh : name === "low.mp4" ? staticLow : staticAudio, { token }),
    telemetry: () => at(telemetry),
    entitlement: () => at(entitlement),
    clearKeyLicense: () => at(clearKeyLicense),
  };
};

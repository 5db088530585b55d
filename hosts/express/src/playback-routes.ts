import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { InvalidRequest, PayloadTooLarge, type RequestedRange, type Vod, type VodError } from "@vod/core";
import { Effect, Exit } from "effect";
import express, { type Request, type RequestHandler, type Router } from "express";
import { cors, credentialsOf, isDisconnect, logDisconnect, loggedPath, sendFailure } from "./http.js";

/** DECISIONS: a telemetry batch is at most 32 KiB, refused before it is read whole. */
export const TELEMETRY_MAX_BYTES = 32 * 1024;
const LICENSE_MAX_BYTES = 16 * 1024;

/**
 * The Range header, read by Express's own parser (range-parser) once the core knows the size:
 * one range is served as such, a malformed header or several ranges serve the whole file (as
 * RFC 9110 allows), none that fits is 416. range-parser 1.x refuses a suffix longer than the file
 * (`bytes=-5000` of 1,000 bytes), which RFC 9110 14.1.2 serves whole; 2.x fixes it but needs
 * Node 22, so that one case is clamped here.
 */
const requestedRange =
  (req: Request): RequestedRange =>
  (size) => {
    const suffix = /^bytes=\s*-\s*(\d+)\s*$/.exec(req.get("range") ?? "");
    if (suffix && size > 0 && Number(suffix[1]) > size) return { start: 0, end: size - 1 };
    const ranges = req.range(size, { combine: true });
    if (ranges === -1) return "unsatisfiable";
    if (ranges === undefined || ranges === -2 || ranges.type !== "bytes" || ranges.length !== 1)
      return undefined;
    return ranges[0];
  };

/** Reads a body up to `limit` bytes; more is refused without reading the rest. */
const readLimited = (req: Request, limit: number) =>
  Effect.async<string, VodError>((resume) => {
    const declared = Number(req.headers["content-length"]);
    const tooLarge = () => new PayloadTooLarge({ message: `body exceeds ${limit} bytes` });
    if (Number.isFinite(declared) && declared > limit) return resume(Effect.fail(tooLarge()));
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.off("data", onData);
        req.pause();
        resume(Effect.fail(tooLarge()));
        return;
      }
      chunks.push(chunk);
    };
    req.on("data", onData);
    req.once("end", () => {
      if (size <= limit) resume(Effect.succeed(Buffer.concat(chunks).toString("utf8")));
    });
    req.once("error", () => resume(Effect.fail(tooLarge())));
  });

/**
 * Media delivery and telemetry ({media_url}). Lean on purpose: no body parser, no JSON
 * framework, the verified token cached by the core, bodies streamed.
 */
export const playbackRoutes = (vod: Vod): Router => {
  const router = express.Router();
  const media = cors("GET, HEAD, OPTIONS", "range", "content-length, content-range, accept-ranges");
  router.options("/v1/play/:token/*path", media);
  const serve: RequestHandler = async (req, res) => {
    const path = ([] as string[]).concat(req.params.path ?? []).join("/");
    const token = String(req.params.token);
    const exit = await Effect.runPromiseExit(vod.playback.open(token, path, requestedRange(req)));
    if (Exit.isFailure(exit)) return sendFailure(req, res, exit.cause);
    const file = exit.value;
    if (file.kind === "unsatisfiable") {
      res.status(416).setHeader("content-range", `bytes */${file.size}`).end();
      return;
    }
    if (file.kind === "redirect") {
      // The signed URL is short-lived: no cache may keep the redirect longer than it works.
      res.status(302).setHeader("location", file.url).setHeader("cache-control", "private, no-store").end();
      return;
    }
    const isPlaylist = path.endsWith(".m3u8") || path.endsWith(".mpd");
    // Private: the URL carries a credential. Segments never change; playlists are re-read.
    const maxAge = Math.max(0, Math.min(86_400, Math.floor((file.expiresAt - Date.now()) / 1000)));
    res.setHeader(
      "cache-control",
      isPlaylist ? "private, no-cache" : `private, max-age=${maxAge}, immutable`,
    );
    res.setHeader("content-type", file.contentType);
    res.setHeader("accept-ranges", "bytes");
    if (file.range) {
      res.status(206);
      res.setHeader("content-range", `bytes ${file.range.start}-${file.range.end}/${file.size}`);
      res.setHeader("content-length", String(file.range.end - file.range.start + 1));
    } else {
      res.status(200);
      res.setHeader("content-length", String(file.size));
    }
    if (req.method === "HEAD") {
      res.end();
      return;
    }
    await pipeline(Readable.from(file.body), res).catch((err: unknown) => {
      // A player that seeks or closes hangs up mid-segment all the time: nothing to act on.
      if (isDisconnect(err)) logDisconnect(req, err);
      else req.log.error({ err, path: loggedPath(req.path) }, "delivery failed");
    });
  };
  router.get("/v1/play/:token/*path", media, serve);
  router.head("/v1/play/:token/*path", media, serve);

  const beacons = cors("POST, OPTIONS", "content-type", "x-telemetry-accepted");
  router.options("/v1/telemetry", beacons);
  router.post("/v1/telemetry", beacons, async (req, res) => {
    const exit = await Effect.runPromiseExit(
      Effect.flatMap(readLimited(req, TELEMETRY_MAX_BYTES), (text) => vod.playback.telemetry(text)),
    );
    if (Exit.isFailure(exit)) return sendFailure(req, res, exit.cause);
    res.status(204).setHeader("x-telemetry-accepted", String(exit.value.accepted)).end();
  });
  return router;
};

/** The DRM app ({drm_url}): entitlements and the ClearKey licence endpoint. */
export const drmRoutes = (vod: Vod): Router => {
  const router = express.Router();
  const entitlementCors = cors("POST, OPTIONS", "authorization, content-type");
  router.options("/v1/drm/entitlement", entitlementCors);
  router.post("/v1/drm/entitlement", entitlementCors, async (req, res) => {
    const exit = await Effect.runPromiseExit(vod.playback.entitlement(credentialsOf(req).bearer));
    if (Exit.isFailure(exit)) return sendFailure(req, res, exit.cause);
    res.status(200).setHeader("cache-control", "no-store").json(exit.value);
  });
  // EME players post the licence request as raw bytes; whatever its content type, it is JSON.
  const licenseCors = cors("POST, OPTIONS", "content-type, x-vod-license-token");
  router.options("/v1/drm/clearkey/license", licenseCors);
  router.post("/v1/drm/clearkey/license", licenseCors, async (req, res) => {
    const exit = await Effect.runPromiseExit(
      Effect.flatMap(readLimited(req, LICENSE_MAX_BYTES), (text) =>
        Effect.flatMap(
          Effect.try({
            try: () => JSON.parse(text) as unknown,
            catch: () =>
              new InvalidRequest({
                message: "licence request is not JSON",
                details: { fields: [{ path: [], message: "not JSON" }] },
              }),
          }),
          (body) => vod.playback.clearKeyLicense(req.get("x-vod-license-token"), body),
        ),
      ),
    );
    if (Exit.isFailure(exit)) return sendFailure(req, res, exit.cause);
    res.status(200).setHeader("cache-control", "no-store").json(exit.value);
  });
  return router;
};

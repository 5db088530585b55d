import { decodeRequest, Requests, type Vod } from "@vod/core";
import { Effect, Exit, Schema } from "effect";
import express, { type Router } from "express";
import { cors, sendFailure } from "./http.js";

const PART_PATH = "/v1/uploads/:id/parts/:number";

/** Browsers upload parts straight from a page: allow the PUT and let the page read the ETag. */
const partCors = cors("PUT, OPTIONS", "content-type, content-md5, x-request-id", "ETag, x-request-id");

const PartInput = Schema.Struct({ params: Requests.PartParams, query: Requests.PartUrlQuery });

/**
 * The media app's routes ({media_url}). Part PUTs stream the request body to the object store
 * through the core; nothing buffers a whole part.
 */
export const mediaRoutes = (vod: Vod): Router => {
  const router = express.Router();
  router.options(PART_PATH, partCors);
  router.put(PART_PATH, partCors, async (req, res) => {
    const exit = await Effect.runPromiseExit(
      Effect.flatMap(
        decodeRequest(PartInput, { params: req.params, query: req.query }),
        ({ params, query }) =>
          vod.uploads.receivePart(
            {
              uploadId: params.id,
              number: params.number,
              tenantId: query.t,
              expiresSec: query.e,
              signature: query.s,
            },
            req,
          ),
      ),
    );
    if (Exit.isSuccess(exit)) {
      res.status(200).setHeader("etag", `"${exit.value.etag}"`).end();
      return;
    }
    sendFailure(req, res, exit.cause);
  });
  return router;
};

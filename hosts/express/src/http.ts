import { randomUUID } from "node:crypto";
import {
  type Credentials,
  InvalidRequest,
  NotFound,
  type Operation,
  PayloadTooLarge,
  type Vod,
  type VodError,
} from "@vod/core";
import { type Cause, Effect, Exit } from "effect";
import type { ErrorRequestHandler, Request, RequestHandler, Response } from "express";
import { type ErrorReply, errorReply, replyForCause } from "./errors.js";
import type { Logger } from "./logger.js";

declare module "express-serve-static-core" {
  interface Request {
    id: string;
    log: Logger;
  }
}

export const sendError = (res: Response, reply: ErrorReply) => {
  res.status(reply.status).set(reply.headers).json(reply.body);
};

/** The path as logged: playback URLs carry their token in the path, and it never reaches a log. */
export const loggedPath = (path: string) => path.replace(/^\/v1\/play\/[^/]+/, "/v1/play/[token]");

/** Gives every request an id (the caller's X-Request-Id when sane) and logs it once on finish. */
export const requestLog =
  (logger: Logger): RequestHandler =>
  (req, res, next) => {
    const given = req.get("x-request-id");
    req.id = given && /^[\w.-]{1,128}$/.test(given) ? given : randomUUID();
    req.log = logger.child({ req_id: req.id });
    res.setHeader("x-request-id", req.id);
    const started = process.hrtime.bigint();
    res.on("finish", () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      // The path only: query strings may hold cursors, and later, tokens.
      req.log.info(
        {
          method: req.method,
          path: loggedPath(req.path),
          status: res.statusCode,
          ms: Math.round(ms * 10) / 10,
        },
        "request",
      );
    });
    next();
  };

export const credentialsOf = (req: Request): Credentials => {
  const authorization = req.get("authorization");
  const apiKey = req.get("x-api-key");
  const match = authorization === undefined ? null : /^Bearer[ ]+(\S+)\s*$/i.exec(authorization);
  return {
    // A malformed Authorization header is a credential that fails, not an absent one.
    bearer: authorization === undefined ? undefined : (match?.[1] ?? ""),
    apiKey: apiKey === undefined ? undefined : apiKey.trim(),
  };
};

/** The one handler every route runs: the operation does the rest. */
export const handle =
  (vod: Vod, operation: Operation): RequestHandler =>
  async (req, res) => {
    const exit = await Effect.runPromiseExit(
      operation.execute(vod, {
        params: req.params as Record<string, string>,
        query: req.query,
        body: req.body,
        credentials: credentialsOf(req),
        clientIp: req.ip ?? req.socket.remoteAddress ?? "unknown",
        requestId: req.id,
      }),
    );
    if (Exit.isSuccess(exit)) {
      const { status, body } = exit.value;
      if (body === undefined) res.status(status).end();
      else res.status(status).json(body);
      return;
    }
    sendFailure(req, res, exit.cause, { operation: operation.id });
  };

/**
 * The spec's error reply for a failed core Effect; defects and 5xx are logged with their cause.
 * A body the client is still sending is not wanted: the connection closes rather than read it.
 */
export const sendFailure = (
  req: Request,
  res: Response,
  cause: Cause.Cause<VodError>,
  context: Record<string, unknown> = {},
) => {
  const { reply, defect } = replyForCause(cause);
  // A dependency that refuses (storage_error) is expected: its adapter says so once per outage,
  // at warn, and the request line has the 503; an error line per request would drown the log.
  if (defect !== undefined || (reply.status >= 500 && reply.body.code !== "storage_error"))
    req.log.error({ ...context, err: defect ?? cause.toString() }, "request failed");
  if (!req.readableEnded) res.setHeader("connection", "close");
  sendError(res, reply);
};

/**
 * CORS for the routes browsers call from players and pages on other origins: the origin is
 * echoed (or `*`), preflights answer 204 at once.
 */
export const cors =
  (methods: string, headers: string, expose = ""): RequestHandler =>
  (req, res, next) => {
    res.setHeader("access-control-allow-origin", req.get("origin") ?? "*");
    res.setHeader("vary", "origin");
    res.setHeader("access-control-allow-methods", methods);
    res.setHeader("access-control-allow-headers", headers);
    if (expose) res.setHeader("access-control-expose-headers", expose);
    res.setHeader("access-control-max-age", "600");
    if (req.method === "OPTIONS") {
      res.status(204).end();
      return;
    }
    next();
  };

/**
 * Bodies must be JSON objects sent as JSON. A body of another type would otherwise reach the
 * schema as "missing" and produce a misleading message.
 */
export const requireJsonBody: RequestHandler = (req, res, next) => {
  const hasBody =
    req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"] ?? 0) > 0;
  if (!hasBody || req.is(["application/json", "application/*+json"])) return next();
  sendError(
    res,
    errorReply(
      new InvalidRequest({
        message: "request body must be JSON (Content-Type: application/json)",
        details: {
          fields: [{ path: [], message: `unsupported content type ${req.get("content-type") ?? "(none)"}` }],
        },
      }),
    ),
  );
};

/** Turns body-parser failures into the spec's errors. */
export const bodyErrors: ErrorRequestHandler = (err: { type?: string; message?: string }, req, res, next) => {
  if (err.type === "entity.parse.failed")
    return sendError(
      res,
      errorReply(
        new InvalidRequest({
          message: "request body is not valid JSON",
          details: { fields: [{ path: [], message: err.message ?? "malformed JSON" }] },
        }),
      ),
    );
  if (err.type === "entity.too.large")
    return sendError(res, errorReply(new PayloadTooLarge({ message: "request body is too large" })));
  if (err.type?.startsWith("encoding.") || err.type === "charset.unsupported")
    return sendError(
      res,
      errorReply(new InvalidRequest({ message: err.message ?? "unsupported body encoding" })),
    );
  req.log.error({ err }, "unexpected error");
  return next(err);
};

export const notFound: RequestHandler = (req, res) =>
  sendError(res, errorReply(new NotFound({ message: `no route for ${req.method} ${req.path}` })));

/** Last resort: never a stack trace or SQL in a body. */
export const internalError: ErrorRequestHandler = (err, req, res, _next) => {
  req.log?.error({ err }, "unhandled error");
  if (res.headersSent) return res.destroy();
  sendError(res, errorReply({ _tag: "InternalError", message: "internal error" } as never));
};

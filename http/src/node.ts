import { randomUUID } from "node:crypto";
import { type IncomingMessage, type ServerResponse, STATUS_CODES } from "node:http";
import { parse as parseQuery } from "node:querystring";
import { type Duplex, Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import {
  type Credentials,
  NotFound,
  PayloadTooLarge,
  type RequestedRange,
  type Vod,
  type VodError,
} from "@vod/core";
import { Cause, Effect, Exit, Option } from "effect";
import parseurl from "parseurl";
import proxyaddr from "proxy-addr";
import parseRange from "range-parser";
import typeis from "type-is";
import { type ErrorReply, errorReply, replyForCause, requestErrorOf, wholeRequest } from "./errors.js";
import type { Operation } from "./operation.js";
import { playFile } from "./operations.js";
import type { HostContext } from "./request.js";

/** The logger the handler writes to: pino's shape, or anything with its methods. */
export interface HttpLogger {
  isLevelEnabled(level: string): boolean;
  child(bindings: Record<string, unknown>): HttpLogger;
  debug(fields: object, message?: string): void;
  info(fields: object, message?: string): void;
  warn(fields: object, message?: string): void;
  error(fields: object, message?: string): void;
}
type Logger = HttpLogger;

/** Which proxies' X-Forwarded-For entries are believed: hops next to the server, or their addresses. */
export type TrustProxy = { readonly hops: number } | { readonly cidrs: ReadonlyArray<string> };

/**
 * A request as the handler reads it: node's own, with what the request prelude (`id`) and the
 * router (`params`, `body`) add. No framework wraps it: a framework's own request prototypes
 * are work per request that the catalog's routes never need.
 */
export interface HttpRequest extends IncomingMessage {
  id: string;
  params: Record<string, string>;
  body?: unknown;
}
export type HttpResponse = ServerResponse;

/** A step of a request's handling, in the shape body-parser's middleware has. */
export type Next = (error?: unknown) => void;
export type Handler = (req: HttpRequest, res: HttpResponse, next: Next) => void;

/**
 * The path of the request's URL, as Express's `req.path` reads it (parsed once per request).
 * Throws (ERR_INVALID_URL) for an absolute-form target that node's URL parser refuses
 * (`GET http://[::1/x HTTP/1.1`): the router asks it first and answers such a request 400;
 * everything after reads `pathOf`.
 */
export const targetPathOf = (req: IncomingMessage): string => parseurl(req)?.pathname ?? "/";

/** `targetPathOf` for logs and messages, which must not throw: a target it refuses, as sent. */
export const pathOf = (req: IncomingMessage): string => {
  try {
    return targetPathOf(req);
  } catch {
    return req.url ?? "/";
  }
};

/** The request's query string, parsed as Express's default ("simple") query parser does. */
export const queryOf = (req: IncomingMessage) => {
  const query = parseurl(req)?.query;
  return parseQuery(typeof query === "string" ? query : "");
};

/** A header sent once (names in lower case), as Express's `req.get` reads it. */
export const headerOf = (req: IncomingMessage, name: string): string | undefined => {
  const value = req.headers[name];
  return typeof value === "string" ? value : undefined;
};

/**
 * Whether the address at `hop` (0: the socket's peer, then X-Forwarded-For from the right) is a
 * trusted proxy's; undefined when none is trusted. Express's "trust proxy" takes it as it is.
 */
export type ProxyTrust = ((address: string, hop: number) => boolean) | undefined;

/** VOD_TRUST_PROXY, compiled once: hops next to the host, or the addresses proxies call from. */
export const proxyTrust = (trust: TrustProxy): ProxyTrust => {
  if ("cidrs" in trust) return proxyaddr.compile([...trust.cidrs]);
  const { hops } = trust;
  return hops === 0 ? undefined : (_address, hop) => hop < hops;
};

/**
 * The client's address, the one every per-IP limit counts: the first address from the right
 * (the socket's peer, then X-Forwarded-For backwards) that is not a trusted proxy's. What lies
 * left of it was written by the client and is never read. Express's `req.ip` is the same, given
 * the same `trust`.
 */
export const clientIpOf = (req: IncomingMessage, trust: ProxyTrust): string =>
  (trust === undefined ? req.socket.remoteAddress : proxyaddr(req, trust)) ?? "unknown";

/** A reply's status and headers, as every answer here sets them. */
const setHead = (
  res: HttpResponse,
  status: number,
  headers: Readonly<Record<string, string>> | undefined,
) => {
  res.statusCode = status;
  if (headers !== undefined) for (const name in headers) res.setHeader(name, headers[name] as string);
};

export const sendError = (res: HttpResponse, reply: ErrorReply) => {
  setHead(res, reply.status, reply.headers);
  sendJson(res.req, res, reply.body);
};

const ROUTE = Symbol("vod.route");
type Routed = HttpResponse & { [ROUTE]?: string };

/** Records the template of the catalog's route that answers, for the request metrics' label. */
export const answeredBy = (res: HttpResponse, route: string) => {
  (res as Routed)[ROUTE] = route;
};
/** The catalog's route that answered, if one did. */
export const catalogRouteOf = (res: HttpResponse): string | undefined => (res as Routed)[ROUTE];

/** The path of the playback files up to their token (`/v1/play/`), as the catalog has it. */
const PLAY_PREFIX = playFile.path.slice(0, playFile.path.indexOf(":token"));
const PLAY_TOKEN = new RegExp(`^${PLAY_PREFIX.replaceAll("/", "\\/")}[^/]+`);

/** The path as logged: playback URLs carry their token in the path, and it never reaches a log. */
export const loggedPath = (path: string) => path.replace(PLAY_TOKEN, `${PLAY_PREFIX}[token]`);

const LOGGER = Symbol("vod.logger");
const CHILD = Symbol("vod.log");
type Logged = IncomingMessage & { id?: string; [LOGGER]?: Logger; [CHILD]?: Logger };

/**
 * The request's logger, its id on every line; made on first use: most requests log nothing but
 * their request line (and at `warn`, not even that), and a child logger per request was work for
 * nothing.
 */
export const logOf = (req: IncomingMessage): Logger => {
  const logged = req as Logged;
  let child = logged[CHILD];
  if (child === undefined) {
    const root = logged[LOGGER];
    if (root === undefined) throw new Error("a request logged before requestLog ran");
    child = root.child({ req_id: logged.id });
    logged[CHILD] = child;
  }
  return child;
};

/**
 * Gives every request an id (the caller's X-Request-Id when sane) and logs it once on finish;
 * `finished`, if given, hears of every request at the same moment (the metrics), with its
 * duration in seconds.
 */
export const requestLog =
  (logger: Logger, finished?: (req: HttpRequest, res: HttpResponse, seconds: number) => void): Handler =>
  (req, res, next) => {
    const given = req.headers["x-request-id"];
    req.id = typeof given === "string" && /^[\w.-]{1,128}$/.test(given) ? given : randomUUID();
    (req as Logged)[LOGGER] = logger;
    res.setHeader("x-request-id", req.id);
    const started = process.hrtime.bigint();
    res.on("finish", () => {
      const ns = Number(process.hrtime.bigint() - started);
      finished?.(req, res, ns / 1e9);
      if (!logger.isLevelEnabled("info")) return;
      // The path only: query strings may hold cursors, and later, tokens.
      logger.info(
        {
          req_id: req.id,
          method: req.method,
          path: loggedPath(pathOf(req)),
          status: res.statusCode,
          ms: Math.round(ns / 1e5) / 10,
        },
        "request",
      );
    });
    next();
  };

export const credentialsOf = (req: IncomingMessage): Credentials => {
  const authorization = headerOf(req, "authorization");
  const apiKey = headerOf(req, "x-api-key");
  const match = authorization === undefined ? null : /^Bearer[ ]+(\S+)\s*$/i.exec(authorization);
  return {
    // A malformed Authorization header is a credential that fails, not an absent one.
    bearer: authorization === undefined ? undefined : (match?.[1] ?? ""),
    apiKey: apiKey === undefined ? undefined : apiKey.trim(),
  };
};

/**
 * The Range header, read by Express's own parser (range-parser, as `req.range` would) once the
 * core knows the size: one range is served as such, a malformed header or several ranges serve
 * the whole file (as RFC 9110 allows), none that fits is 416. range-parser 1.x refuses a suffix longer than the file
 * (`bytes=-5000` of 1,000 bytes), which RFC 9110 14.1.2 serves whole; 2.x fixes it but needs
 * Node 22, so that one case is clamped here.
 */
const requestedRange =
  (req: IncomingMessage): RequestedRange =>
  (size) => {
    const header = headerOf(req, "range");
    if (header === undefined) return undefined;
    const suffix = /^bytes=\s*-\s*(\d+)\s*$/.exec(header);
    if (suffix && size > 0 && Number(suffix[1]) > size) return { start: 0, end: size - 1 };
    const ranges = parseRange(size, header, { combine: true });
    if (ranges === -1) return "unsatisfiable";
    if (ranges === undefined || ranges === -2 || ranges.type !== "bytes" || ranges.length !== 1)
      return undefined;
    return ranges[0];
  };

/** Sends a streamed body; a player that seeks or closes hangs up mid-file all the time. */
const sendStream = (req: HttpRequest, res: HttpResponse, stream: AsyncIterable<Uint8Array>) =>
  pipeline(Readable.from(stream), res).catch((err: unknown) => {
    if (isDisconnect(err)) logDisconnect(req, err);
    else logOf(req).error({ err, path: loggedPath(pathOf(req)) }, "delivery failed");
  });

/** The one handler every route runs: the operation does the rest. */
export const handle = (
  vod: Vod,
  operation: Operation,
  trust: ProxyTrust,
  host?: HostContext,
): ((req: HttpRequest, res: HttpResponse) => Promise<void>) => {
  const streamed = operation.body.kind === "stream";
  const ranged = operation.reply.kind === "file";
  return async (req, res) => {
    // The reply is written inside the fiber, which ends with nothing (or the stream still to
    // send) rather than with the reply: a completed fiber outlives its request until a full GC
    // (measured with --trace-gc-nvp, in the host and in a bare node:http server running one
    // async Effect), and whatever its exit holds is copied by every scavenge and promoted. With
    // the reply as its exit, ~17 KB of each 18.5 KB page did so; without it, ~1.5 KB.
    const exit = await Effect.runPromiseExit(
      Effect.map(
        operation.execute(vod, {
          method: req.method,
          path: pathOf(req),
          params: req.params,
          query: queryOf(req),
          body: req.body,
          credentials: credentialsOf(req),
          clientIp: clientIpOf(req, trust),
          requestId: req.id,
          headers: req.headers,
          // One shape for every operation's request, whatever it reads.
          stream: streamed ? req : undefined,
          range: ranged ? requestedRange(req) : undefined,
          host,
        }),
        ({ status, body, headers, stream }) => {
          setHead(res, status, headers);
          if (stream !== undefined && req.method !== "HEAD") return stream;
          if (body === undefined) res.end();
          else sendJson(req, res, body);
          return undefined;
        },
      ),
    );
    if (Exit.isFailure(exit)) return sendFailure(req, res, exit.cause, { operation: operation.id });
    if (exit.value !== undefined) await sendStream(req, res, exit.value);
  };
};

/**
 * A JSON body as `res.json` sends it (same bytes, type and length; HEAD gets the headers alone),
 * without the work of `res.send` this API never needs: no ETag (disabled), no freshness check
 * (no reply here carries a validator; `If-None-Match: *` no longer turns a reply into a bodiless
 * 304), no content negotiation of the charset.
 */
export const sendJson = (req: IncomingMessage, res: HttpResponse, body: unknown) => {
  const text = JSON.stringify(body);
  if (!res.hasHeader("content-type")) res.setHeader("content-type", "application/json; charset=utf-8");
  res.setHeader("content-length", Buffer.byteLength(text));
  if (req.method === "HEAD") res.end();
  else res.end(text);
};

/**
 * A text body of at most `limit` bytes into `req.body`, whatever its content type; more is
 * refused with 413 without reading the rest.
 */
export const readText =
  (limit: number): Handler =>
  (req, res, next) => {
    const declared = Number(req.headers["content-length"]);
    const refuse = () =>
      sendFailure(req, res, Cause.fail(new PayloadTooLarge({ message: `body exceeds ${limit} bytes` })));
    if (Number.isFinite(declared) && declared > limit) return refuse();
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.off("data", onData);
        req.pause();
        refuse();
        return;
      }
      chunks.push(chunk);
    };
    req.on("data", onData);
    req.once("end", () => {
      if (size > limit) return;
      req.body = Buffer.concat(chunks).toString("utf8");
      next();
    });
    req.once("error", () => {
      if (size <= limit) refuse();
    });
  };

/** Whether the client is gone: the exchange's socket closed (a request read in part may have let go of it). */
const clientGone = (req: IncomingMessage, res: HttpResponse) =>
  res.destroyed || (res.socket ?? req.socket)?.destroyed === true;

/** Errors of a socket whose peer went away: a player seeking or closing, a page unloading. */
const DISCONNECTS = new Set([
  "ERR_STREAM_PREMATURE_CLOSE",
  "ERR_STREAM_DESTROYED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
]);

/** Whether `err` only says the client hung up: normal for players, logged at debug. */
export const isDisconnect = (err: unknown) => {
  if (typeof err !== "object" || err === null) return false;
  const { code, message } = err as { code?: unknown; message?: unknown };
  return (typeof code === "string" && DISCONNECTS.has(code)) || message === "aborted";
};

/** Logs that the client went away mid-request: no stack, nothing anyone needs to act on. */
export const logDisconnect = (req: IncomingMessage, err?: unknown) =>
  logOf(req).debug(
    { path: loggedPath(pathOf(req)), code: (err as { code?: unknown } | undefined)?.code },
    "client went away",
  );

/** When each standing dependency refusal was last logged, and how many went unlogged since. */
const refusals = new Map<string, { at: number; unlogged: number }>();
const REFUSAL_LOG_EVERY_MS = 60_000;

/**
 * An expected refusal of a dependency (storage_error, playback_unavailable) is logged at warn
 * without a stack, and not once per request: without a cause it is a standing condition (Google
 * sign-in not configured), logged once per process; with one (a database or a certificate URL
 * failing), at most once a minute per message, with the count of those left unlogged.
 */
const logRefusal = (req: IncomingMessage, error: VodError & { cause?: unknown }, reply: ErrorReply) => {
  const key = `${reply.body.code}:${error.message}`;
  const now = Date.now();
  const last = refusals.get(key);
  if (last && (error.cause === undefined || now - last.at < REFUSAL_LOG_EVERY_MS)) {
    last.unlogged++;
    return;
  }
  refusals.set(key, { at: now, unlogged: 0 });
  const cause = error.cause as { message?: unknown; code?: unknown } | undefined;
  logOf(req).warn(
    {
      code: reply.body.code,
      ...(cause === undefined ? {} : { cause: String(cause.message ?? cause), cause_code: cause.code }),
      ...(last ? { unlogged: last.unlogged } : {}),
    },
    error.message,
  );
};

/**
 * The spec's error reply for a failed core Effect. Defects are logged with their stack, expected
 * dependency refusals at warn (`logRefusal`), a client that went away at debug; the rest is the
 * client's doing and its request line says enough. A body the client is still sending is not
 * wanted: the connection closes rather than read it.
 */
export const sendFailure = (
  req: IncomingMessage,
  res: HttpResponse,
  cause: Cause.Cause<VodError>,
  context: Record<string, unknown> = {},
) => {
  const { reply, defect } = replyForCause(cause);
  const failure = Cause.failureOption(cause);
  const gone = clientGone(req, res);
  // A defect is ours whether or not the client stayed to hear of it.
  if (defect !== undefined) logOf(req).error({ ...context, err: defect }, "request failed");
  else if (Option.isSome(failure) && failure.value._tag === "InternalError")
    logOf(req).error({ ...context, err: failure.value.cause ?? failure.value.message }, "request failed");
  else if (gone) logDisconnect(req);
  else if (Option.isSome(failure) && reply.status >= 500) logRefusal(req, failure.value, reply);
  if (gone) return;
  if (!req.readableEnded) res.setHeader("connection", "close");
  sendError(res, reply);
};

/**
 * CORS for the routes browsers call from players and pages on other origins: the origin is
 * echoed (or `*`), preflights answer 204 at once.
 */
export const cors =
  (methods: string, headers: string, expose = ""): Handler =>
  (req, res, next) => {
    res.setHeader("access-control-allow-origin", headerOf(req, "origin") ?? "*");
    res.setHeader("vary", "origin");
    res.setHeader("access-control-allow-methods", methods);
    res.setHeader("access-control-allow-headers", headers);
    if (expose) res.setHeader("access-control-expose-headers", expose);
    res.setHeader("access-control-max-age", "600");
    if (req.method === "OPTIONS") {
      res.statusCode = 204;
      res.end();
      return;
    }
    next();
  };

/**
 * Bodies must be JSON objects sent as JSON. A body of another type would otherwise reach the
 * schema as "missing" and produce a misleading message.
 */
export const requireJsonBody: Handler = (req, res, next) => {
  const hasBody =
    req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"] ?? 0) > 0;
  if (!hasBody || typeis(req, ["application/json", "application/*+json"])) return next();
  sendError(
    res,
    errorReply(
      wholeRequest(
        "request body must be JSON (Content-Type: application/json)",
        `unsupported content type ${headerOf(req, "content-type") ?? "(none)"}`,
      ),
    ),
  );
};

export const notFound = (req: IncomingMessage, res: HttpResponse) =>
  sendError(res, errorReply(new NotFound({ message: `no route for ${req.method} ${pathOf(req)}` })));

/**
 * The one handler of errors thrown outside the operations (a path parameter's decoding, a
 * request target that is no URL, the body parser): the spec's error when the request caused it,
 * else 500 with the error logged. Never a
 * stack trace or SQL in a body.
 */
export const internalError = (err: unknown, req: IncomingMessage, res: HttpResponse, _next?: Next) => {
  try {
    const caused = requestErrorOf(err);
    if (res.headersSent || clientGone(req, res)) {
      if (caused || isDisconnect(err)) logDisconnect(req, err);
      else logOf(req).error({ err }, "unhandled error");
      res.destroy();
      return;
    }
    if (caused) {
      if (!req.readableEnded) res.setHeader("connection", "close");
      return sendError(res, errorReply(caused));
    }
    logOf(req).error({ err }, "unhandled error");
    sendError(res, errorReply({ _tag: "InternalError", message: "internal error" } as never));
  } catch (failure) {
    // Nothing may reach a framework's fallback, which may print the stack in the body.
    (req as Logged)[LOGGER]?.error({ err: failure, cause: err }, "error handler failed");
    res.destroy();
  }
};

/**
 * Node's `clientError`: a request its HTTP parser refuses (bad Content-Length, bad chunking, a
 * malformed header line) never reaches the handler. It gets the spec's JSON body all the same, as
 * Node's default handler would answer, but in our format: only when no response has begun on the
 * socket, and the connection closes after it.
 */
export const answerClientError =
  (logger: Logger) =>
  (err: Error & { code?: string }, socket: Duplex): void => {
    const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (err.code === "ECONNRESET" || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const reply = errorReply(
      requestErrorOf(err) ?? wholeRequest("malformed HTTP request", "the request is not valid HTTP/1.1"),
    );
    const body = JSON.stringify(reply.body);
    const head = [
      `HTTP/1.1 ${reply.status} ${STATUS_CODES[reply.status] ?? ""}`,
      "content-type: application/json; charset=utf-8",
      `content-length: ${Buffer.byteLength(body)}`,
      "cache-control: no-store",
      "connection: close",
      ...Object.entries(reply.headers).map(([name, value]) => `${name}: ${value}`),
    ];
    socket.end(`${head.join("\r\n")}\r\n\r\n${body}`);
    logger.debug({ code: err.code }, "malformed HTTP request");
  };

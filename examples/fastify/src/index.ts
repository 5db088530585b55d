import { createServer, type IncomingMessage, type RequestListener, type ServerResponse } from "node:http";
import type { Vod } from "@vod/core";
import { createHttpHandler, type HttpHandlerOptions } from "@vod/http";
import Fastify, { type FastifyReply, type FastifyRequest, type HTTPMethods } from "fastify";

const METHODS: HTTPMethods[] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/**
 * A Fastify app that serves the platform's API (`createHttpHandler` of `@vod/http`) beside its
 * own routes, as a node listener for whatever server the embedder runs (`startHost`'s `mount`,
 * or `createServer(listener).listen(port)`). Fastify routes its own paths first; every other
 * request goes to the API whole: Fastify parses no body (each operation reads its own, as it
 * says) and sends no answer of its own, so errors keep the spec's JSON.
 */
export const inFastify = async (api: RequestListener): Promise<RequestListener> => {
  let listener: RequestListener | undefined;
  const toApi = (request: FastifyRequest, reply: FastifyReply) => {
    reply.hijack();
    api(request.raw, reply.raw);
  };
  const app = Fastify({
    // The embedder's server listens; Fastify only hands over its request listener.
    serverFactory: (handler) => {
      listener = handler as RequestListener;
      return createServer();
    },
    // A path Fastify's router cannot decode is the API's to refuse (400 in the spec's words).
    frameworkErrors: (_error, request, reply) => toApi(request, reply),
  });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", (_request: FastifyRequest, _body: IncomingMessage, done) => done(null));

  // The embedder's own route, routed by Fastify.
  app.get("/app/hello", async () => ({ hello: "from Fastify" }));

  // Everything else is the API's, whatever its method or path.
  app.route({ method: METHODS, url: "/", exposeHeadRoute: false, handler: toApi });
  app.route({ method: METHODS, url: "/*", exposeHeadRoute: false, handler: toApi });

  await app.ready();
  if (listener === undefined) throw new Error("Fastify gave no request listener");
  const fastify = listener;
  return (req: IncomingMessage, res: ServerResponse) => fastify(req, res);
};

/** The whole platform in a Fastify app, on a server of the embedder's: `createServer(listener)`. */
export const vodInFastify = (vod: Vod, options: HttpHandlerOptions) =>
  inFastify(createHttpHandler(vod, options));

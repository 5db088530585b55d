// Where the host's part PUT time goes: node:http servers that each add one thing the host does
// to the bare pipe. Usage: node variants.mjs <variant> <dir>; prints "listening <port>".
//   pipe          PUT body piped to a file (the limit)
//   fsync         ... opened with { flush: true }: fsync before close, as the store does
//   sha256        ... hashed on the way through an async generator, as the store's writeBody does
//   sha256+fsync  both
//   pipe-1m       the pipe with the store's 1 MiB write buffer (fs.createWriteStream)
//   handle-1m     ... through a FileHandle's write stream, as the store opens its temp file
//   express-store the store's receivePart behind an Express 5 route, as the host's media app is
//   store         the filesystem store's receivePart itself (temp file with a 1 MiB write buffer,
//                 rename), without Express, the core, the database or the URL check
import { createHash } from "node:crypto";
import { createWriteStream } from "node:fs";
import { open } from "node:fs/promises";
import { createServer } from "node:http";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { Effect } from "effect";
import { fromRepo } from "../lib.mjs";

const [variant, dir] = process.argv.slice(2);
const variants = [
  "pipe",
  "fsync",
  "sha256",
  "sha256+fsync",
  "pipe-1m",
  "handle-1m",
  "express-store",
  "store",
];
if (!variants.includes(variant) || !dir) throw new Error(`usage: variants.mjs <${variants.join("|")}> <dir>`);

const { filesystemObjectStore } = await fromRepo("adapters/filesystem");
const store = filesystemObjectStore({ root: dir });
const ref = { uploadId: "upload", key: "origin" };
await Effect.runPromise(store.createMultipart(ref));

const hashed = (hash) =>
  async function* (source) {
    for await (const chunk of source) {
      hash.update(chunk);
      yield chunk;
    }
  };

const receive = async (req, number, as = variant) => {
  const length = Number(req.headers["content-length"]);
  if (as === "store") {
    await Effect.runPromise(store.receivePart(ref, { number, expectedSize: length }, req));
    return;
  }
  const path = join(dir, `part-${number}`);
  if (variant === "pipe-1m") {
    await pipeline(req, createWriteStream(path, { highWaterMark: 1024 * 1024 }));
    return;
  }
  if (variant === "handle-1m") {
    const handle = await open(path, "w");
    await pipeline(req, handle.createWriteStream({ highWaterMark: 1024 * 1024 }));
    return;
  }
  const file = createWriteStream(path, { flush: variant.endsWith("fsync") });
  if (variant.startsWith("sha256")) {
    const hash = createHash("sha256");
    await pipeline(req, hashed(hash), file);
    hash.digest("hex");
  } else await pipeline(req, file);
};

const expressApp = async () => {
  const { default: express } = await import("express");
  const app = express();
  app.put("/part/:number", (req, res) => {
    receive(req, Number(req.params.number), "store").then(
      () => res.status(200).end(),
      (error) => res.status(500).set("connection", "close").end(String(error)),
    );
  });
  return app;
};
const app = variant === "express-store" ? await expressApp() : undefined;

const server = createServer((req, res) => {
  if (app) {
    app(req, res);
    return;
  }
  const match = /^\/part\/(\d+)$/.exec(req.url ?? "");
  if (req.method !== "PUT" || !match) {
    res.writeHead(404).end();
    return;
  }
  receive(req, Number(match[1])).then(
    () => res.writeHead(200).end(),
    (error) => res.writeHead(500, { connection: "close" }).end(String(error)),
  );
});
// As the host does: idle keep-alive sockets outlive the gaps between a benchmark's rounds, so no
// request races the server closing its socket.
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;
server.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
process.on("SIGTERM", () => server.close(() => process.exit(0)));

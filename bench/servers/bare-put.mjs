// The limit: a bare node:http server that pipes each PUT body to a file and answers 200.
// Usage: node bare-put.mjs <dir>; prints "listening <port>" once it serves on 127.0.0.1.
import { createWriteStream } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";

const dir = process.argv[2];
if (!dir) throw new Error("usage: bare-put.mjs <dir>");

const server = createServer((req, res) => {
  const match = /^\/part\/(\d+)$/.exec(req.url ?? "");
  if (req.method !== "PUT" || !match) {
    res.writeHead(404).end();
    return;
  }
  pipeline(req, createWriteStream(join(dir, `part-${match[1]}`))).then(
    () => res.writeHead(200).end(),
    (error) => {
      res.writeHead(500, { connection: "close" }).end(String(error));
    },
  );
});
// As the host does: idle keep-alive sockets outlive the gaps between a benchmark's rounds, so no
// request races the server closing its socket.
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;
server.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
process.on("SIGTERM", () => server.close(() => process.exit(0)));

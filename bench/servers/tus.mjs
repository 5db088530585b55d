// The peer: @tus/server with its FileStore, as its README sets it up, on node:http.
// Usage: node tus.mjs <dir>; prints its version, the store's extensions and "listening <port>".
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { FileStore } from "@tus/file-store";
import { Server } from "@tus/server";

const dir = process.argv[2];
if (!dir) throw new Error("usage: tus.mjs <dir>");

const manifest = new URL("../package.json", import.meta.resolve("@tus/server"));
console.log(`version ${JSON.parse(readFileSync(manifest, "utf8")).version}`);

const datastore = new FileStore({ directory: dir });
const tus = new Server({ path: "/files", datastore });
const server = createServer((req, res) => tus.handle(req, res));
// As the host does: idle keep-alive sockets outlive the gaps between a benchmark's rounds, so no
// request races the server closing its socket.
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;
server.listen(0, "127.0.0.1", () => {
  console.log(`extensions ${datastore.extensions.join(",")}`);
  console.log(`listening ${server.address().port}`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));

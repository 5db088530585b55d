// Node only: the browser build maps this module away (package.json "browser"), and the client
// imports it only when given a path, which only Node callers do.
import { createReadStream, openAsBlob } from "node:fs";
import { stat } from "node:fs/promises";
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";

/**
 * A file on disk as a Blob whose slices are read from the file when sent, never held whole in
 * memory; reading one after the file changed fails rather than sending other bytes.
 */
export const openFile = (path: string): Promise<Blob> => openAsBlob(path);

/** Sends bytes `start`..`start + length` of the file as one PUT; answers as fetch would. */
export type PartSender = (
  url: string,
  start: number,
  length: number,
  signal: AbortSignal,
) => Promise<Response>;

/**
 * Part PUTs of a file path over node:http(s), streamed from disk: about a third of the CPU per
 * byte of fetch sending a file Blob (bench/cli-upload.mjs), which on a busy machine is the
 * difference between keeping up with curl and not. `unchanged` compares the file's size and
 * mtime with the first look: the upload checks it before each part, so a file changed midway
 * fails it rather than sending other bytes.
 */
export const filePartSender = async (path: string, sockets: number) => {
  const first = await stat(path);
  const agents = {
    "http:": new HttpAgent({ keepAlive: true, maxSockets: sockets }),
    "https:": new HttpsAgent({ keepAlive: true, maxSockets: sockets }),
  };
  /** Throws if the file is no longer the one the upload started with. */
  const unchanged = async () => {
    const now = await stat(path);
    if (now.size !== first.size || now.mtimeMs !== first.mtimeMs)
      throw new Error(`${path} changed during the upload`);
  };
  const send: PartSender = async (url, start, length, signal) => {
    const target = new URL(url);
    const secure = target.protocol === "https:";
    return new Promise<Response>((resolve, reject) => {
      const req = (secure ? httpsRequest : httpRequest)(
        target,
        {
          method: "PUT",
          agent: secure ? agents["https:"] : agents["http:"],
          headers: { "content-length": String(length) },
          signal,
        },
        (res: IncomingMessage) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("error", reject);
          res.on("end", () => {
            const headers = new Headers();
            for (const [name, value] of Object.entries(res.headers))
              if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(", ") : value);
            const status = res.statusCode ?? 0;
            const body = status === 204 || status === 304 ? null : Buffer.concat(chunks);
            resolve(new Response(body, { status, statusText: res.statusMessage, headers }));
          });
        },
      );
      req.on("error", reject);
      const source = createReadStream(path, { start, end: start + length - 1, highWaterMark: 1024 * 1024 });
      source.on("error", (error) => req.destroy(error));
      source.pipe(req);
    });
  };
  return {
    send,
    unchanged,
    close: () => {
      agents["http:"].destroy();
      agents["https:"].destroy();
    },
  };
};

import { Agent, type IncomingHttpHeaders, request } from "node:http";
import { connect } from "node:net";

/**
 * A request exactly as it goes on the wire. `fetch` cannot send some of what the fuzz needs: it
 * resolves `..` and `%2e%2e` in paths and refuses some headers, so requests go out through
 * node:http, which sends the path and headers as they are.
 */
export interface WireRequest {
  readonly method: string;
  /** When given, these bytes go on a socket of their own instead (see `sendRawBytes`). */
  readonly raw?: Buffer;
  /** Sent verbatim (already percent-encoded where it should be, and sometimes where it should not). */
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string | Uint8Array;
}

export interface WireReply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
}

/** One keep-alive agent per host under test, a few sockets. */
export const wireAgent = () => new Agent({ keepAlive: true, maxSockets: 8 });

const clip = (text: string, max: number) =>
  text.length <= max ? text : `${text.slice(0, max)}…(${text.length} chars)`;

const bodyText = (body: string | Uint8Array | undefined) =>
  body === undefined ? "" : typeof body === "string" ? body : Buffer.from(body).toString("latin1");

/** One line per request, short enough to read in a failure message. */
export const describeRequest = (req: WireRequest): string => {
  if (req.raw) return `raw ${clip(JSON.stringify(req.raw.toString("latin1")), 400)}`;
  const headers = Object.entries(req.headers)
    .map(([k, v]) => `${k}: ${clip(JSON.stringify(v), 60)}`)
    .join("; ");
  const body = req.body === undefined ? "" : ` body=${clip(JSON.stringify(bodyText(req.body)), 240)}`;
  return `${req.method} ${clip(req.path, 200)} [${headers}]${body}`;
};

export const describeReply = (reply: WireReply): string =>
  `${reply.status} ${reply.headers["content-type"] ?? "(no content-type)"} ${clip(reply.text, 300)}`;

/**
 * Sends `req` to `baseUrl` and reads the whole answer. A reply the server sent before it had read
 * the body (413, 400 on a bad encoding) still counts; a connection that ends without an answer, or
 * no answer within `timeoutMs`, rejects.
 */
export const sendWire = (
  baseUrl: string,
  agent: Agent,
  req: WireRequest,
  timeoutMs = 15_000,
): Promise<WireReply> =>
  req.raw
    ? sendRawBytes(baseUrl, req.raw, timeoutMs)
    : new Promise((resolve, reject) => {
        const url = new URL(baseUrl);
        const body =
          req.body === undefined
            ? undefined
            : typeof req.body === "string"
              ? Buffer.from(req.body)
              : req.body;
        let answered = false;
        const outgoing = request(
          {
            host: url.hostname,
            port: url.port,
            method: req.method,
            path: req.path,
            agent,
            // A request that asks for chunked framing gets it; the others say their length.
            headers:
              body === undefined || "transfer-encoding" in req.headers
                ? req.headers
                : { ...req.headers, "content-length": String(body.byteLength) },
          },
          (res) => {
            answered = true;
            const chunks: Buffer[] = [];
            res.on("data", (c: Buffer) => chunks.push(c));
            res.on("end", () =>
              resolve({
                status: res.statusCode ?? 0,
                headers: res.headers,
                text: Buffer.concat(chunks).toString("utf8"),
              }),
            );
            res.on("error", reject);
          },
        );
        outgoing.setTimeout(timeoutMs, () => outgoing.destroy(new Error(`no answer within ${timeoutMs} ms`)));
        outgoing.on("error", (error) => {
          // Writing a body the server refused to read may fail after its answer arrived.
          if (!answered) reject(error);
        });
        outgoing.end(body);
      });

/**
 * Sends bytes as they are on a socket of their own and reads the first answer: for framing the
 * HTTP client will not produce (bad Content-Length, broken chunking, NUL or bare LF in the head).
 * The answer ends with its Content-Length or with the connection.
 */
export const sendRawBytes = (baseUrl: string, bytes: Buffer, timeoutMs = 10_000): Promise<WireReply> =>
  new Promise((resolve, reject) => {
    const url = new URL(baseUrl);
    const socket = connect({ host: url.hostname, port: Number(url.port) });
    let received = Buffer.alloc(0);
    let done = false;
    const finish = () => {
      if (done) return;
      const text = received.toString("latin1");
      const end = text.indexOf("\r\n\r\n");
      if (end < 0) {
        done = true;
        socket.destroy();
        reject(
          new Error(
            received.length === 0 ? "connection closed without an answer" : `not HTTP: ${text.slice(0, 200)}`,
          ),
        );
        return;
      }
      const [statusLine = "", ...lines] = text.slice(0, end).split("\r\n");
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(":");
        if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const body = received.subarray(Buffer.byteLength(text.slice(0, end + 4), "latin1"));
      const length = headers["content-length"] === undefined ? undefined : Number(headers["content-length"]);
      if (length !== undefined && body.length < length && !socket.destroyed) return;
      done = true;
      socket.destroy();
      resolve({
        status: Number(statusLine.split(" ")[1] ?? 0),
        headers,
        text: body.subarray(0, length ?? body.length).toString("utf8"),
      });
    };
    socket.setTimeout(timeoutMs, () => {
      socket.destroy();
      if (!done) {
        done = true;
        reject(new Error(`no answer within ${timeoutMs} ms`));
      }
    });
    socket.on("data", (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      finish();
    });
    socket.on("end", finish);
    socket.on("close", finish);
    socket.on("error", (error) => {
      if (received.length > 0) finish();
      else if (!done) {
        done = true;
        reject(error);
      }
    });
    socket.write(bytes);
  });

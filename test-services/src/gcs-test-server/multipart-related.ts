// The JSON API's `uploadType=multipart` body: a multipart/related of exactly two parts, the object's
// metadata as JSON, then its bytes. The bytes are streamed out, never held whole: only the head (up
// to the second part's headers) and the closing delimiter's length are buffered.

const MAX_HEAD = 1024 * 1024;

export class MalformedMultipart extends Error {}

export interface RelatedUpload {
  readonly metadata: unknown;
  /** The second part's Content-Type. */
  readonly contentType: string;
  /** The object's bytes, then a check that the body closed with the final delimiter. */
  readonly data: AsyncIterable<Buffer>;
}

export const boundaryOf = (contentType: string | undefined): string | undefined => {
  const m = /^multipart\/related\s*;(?:.*;)?\s*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType ?? "");
  return m ? (m[1] ?? m[2]) : undefined;
};

const headersOf = (block: string): Map<string, string> => {
  const headers = new Map<string, string>();
  for (const line of block.split("\r\n")) {
    const at = line.indexOf(":");
    if (at <= 0) throw new MalformedMultipart(`malformed part header line: ${JSON.stringify(line)}`);
    headers.set(line.slice(0, at).trim().toLowerCase(), line.slice(at + 1).trim());
  }
  return headers;
};

export const readRelated = async (body: AsyncIterable<Buffer>, boundary: string): Promise<RelatedUpload> => {
  const iterator = body[Symbol.asyncIterator]();
  const opening = Buffer.from(`--${boundary}\r\n`);
  const between = Buffer.from(`\r\n--${boundary}\r\n`);
  const closing = `\r\n--${boundary}--`;
  let head = Buffer.alloc(0);
  let parsed: { metadata: unknown; contentType: string; rest: Buffer } | undefined;
  while (!parsed) {
    const next = await iterator.next();
    if (next.done) throw new MalformedMultipart("body ended before the object's data began");
    head = Buffer.concat([head, next.value]);
    if (head.length > MAX_HEAD + next.value.length) {
      throw new MalformedMultipart("metadata part larger than 1 MiB or no second part");
    }
    if (head.length < opening.length) continue;
    if (!head.subarray(0, opening.length).equals(opening)) {
      throw new MalformedMultipart("body does not start with the boundary");
    }
    const metaHeadersEnd = head.indexOf("\r\n\r\n", opening.length);
    if (metaHeadersEnd < 0) continue;
    const metaEnd = head.indexOf(between, metaHeadersEnd + 4);
    if (metaEnd < 0) continue;
    const dataHeadersEnd = head.indexOf("\r\n\r\n", metaEnd + between.length);
    if (dataHeadersEnd < 0) continue;
    const metaHeaders = headersOf(head.subarray(opening.length, metaHeadersEnd).toString("utf8"));
    if (!/^application\/json\b/i.test(metaHeaders.get("content-type") ?? "")) {
      throw new MalformedMultipart("the first part must be application/json metadata");
    }
    let metadata: unknown;
    try {
      metadata = JSON.parse(head.subarray(metaHeadersEnd + 4, metaEnd).toString("utf8"));
    } catch {
      throw new MalformedMultipart("the metadata part is not JSON");
    }
    const dataHeaders = headersOf(head.subarray(metaEnd + between.length, dataHeadersEnd).toString("utf8"));
    parsed = {
      metadata,
      contentType: dataHeaders.get("content-type") ?? "application/octet-stream",
      rest: head.subarray(dataHeadersEnd + 4),
    };
  }
  const { rest } = parsed;
  // The body ends with the closing delimiter, maybe followed by CRLF: hold that many bytes back.
  const holdBack = closing.length + 2;
  async function* data(): AsyncGenerator<Buffer> {
    let tail = rest;
    for (;;) {
      const next = await iterator.next();
      if (next.done) break;
      tail = tail.length === 0 ? next.value : Buffer.concat([tail, next.value]);
      if (tail.length > holdBack) {
        yield tail.subarray(0, tail.length - holdBack);
        tail = tail.subarray(tail.length - holdBack);
      }
    }
    const text = tail.toString("latin1");
    const cut = text.endsWith(`${closing}\r\n`)
      ? tail.length - closing.length - 2
      : text.endsWith(closing)
        ? tail.length - closing.length
        : -1;
    if (cut < 0) throw new MalformedMultipart("body does not end with the closing boundary");
    if (cut > 0) yield tail.subarray(0, cut);
  }
  return { metadata: parsed.metadata, contentType: parsed.contentType, data: data() };
};

/**
 * The few XML documents of the multipart upload API (initiate, list parts, complete, errors):
 * flat elements read by name, so no XML library for them.
 */

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

const decode = (text: string) =>
  text.replace(/&(#x[0-9a-fA-F]+|#\d+|amp|lt|gt|quot|apos);/g, (_, e: string) =>
    e.startsWith("#x")
      ? String.fromCodePoint(Number.parseInt(e.slice(2), 16))
      : e.startsWith("#")
        ? String.fromCodePoint(Number.parseInt(e.slice(1), 10))
        : ENTITIES[e]!,
  );

const escapeXml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => `&${Object.entries(ENTITIES).find(([, v]) => v === c)![0]};`);

/** The text of every `<name>` element in `xml`, in order. */
export const elements = (xml: string, name: string): string[] =>
  [...xml.matchAll(new RegExp(`<${name}(?:\\s[^>]*)?>([\\s\\S]*?)</${name}>`, "g"))].map((m) => m[1]!);

/** The decoded text of the first `<name>` element, if any. */
export const text = (xml: string, name: string): string | undefined => {
  const found = elements(xml, name)[0];
  return found === undefined ? undefined : decode(found.trim());
};

/** The body of a complete-multipart-upload request: the parts in order, with their ETags. */
export const completeBody = (parts: ReadonlyArray<{ readonly number: number; readonly etag: string }>) =>
  `<CompleteMultipartUpload>${parts
    .map((p) => `<Part><PartNumber>${p.number}</PartNumber><ETag>${escapeXml(`"${p.etag}"`)}</ETag></Part>`)
    .join("")}</CompleteMultipartUpload>`;

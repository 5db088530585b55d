// The few XML documents of the XML API, written and read by hand: their shapes are fixed and small,
// and a strict reader is the point (a body GCS would refuse is refused here too).

const escapeXml = (text: string): string =>
  text.replace(
    /[<>&'"]/g,
    (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", "'": "&apos;", '"': "&quot;" })[c]!,
  );

const unescapeXml = (text: string): string =>
  text.replace(/&(lt|gt|amp|apos|quot|#\d+|#x[0-9a-fA-F]+);/g, (_, entity: string) => {
    if (entity.startsWith("#x")) return String.fromCodePoint(Number.parseInt(entity.slice(2), 16));
    if (entity.startsWith("#")) return String.fromCodePoint(Number.parseInt(entity.slice(1), 10));
    return ({ lt: "<", gt: ">", amp: "&", apos: "'", quot: '"' } as Record<string, string>)[entity]!;
  });

export type XmlValue = string | number | boolean | ReadonlyArray<XmlElement> | undefined;
export type XmlElement = readonly [name: string, value: XmlValue];

const render = ([name, value]: XmlElement): string => {
  if (value === undefined) return "";
  const inner = Array.isArray(value)
    ? (value as ReadonlyArray<XmlElement>).map(render).join("")
    : escapeXml(String(value));
  return `<${name}>${inner}</${name}>`;
};

const S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/";

/** `<?xml…?><Root xmlns="…">children</Root>`, as GCS answers its S3-compatible calls. */
export const xmlDocument = (root: string, children: ReadonlyArray<XmlElement>, namespace = true): string =>
  `<?xml version='1.0' encoding='UTF-8'?><${root}${namespace ? ` xmlns="${S3_NS}"` : ""}>${children
    .map(render)
    .join("")}</${root}>`;

export const xmlError = (code: string, message: string, extra: ReadonlyArray<XmlElement> = []): string =>
  xmlDocument("Error", [["Code", code], ["Message", message], ...extra], false);

export class MalformedXml extends Error {}

/**
 * The part list of a CompleteMultipartUpload body, in the order given. Each `<Part>` holds one
 * `<PartNumber>` and one `<ETag>`, in either order; anything else is malformed.
 */
export const parseCompleteBody = (
  body: string,
): ReadonlyArray<{ readonly partNumber: number; readonly etag: string }> => {
  const document = body.replace(/^\uFEFF?\s*(<\?xml[^?]*\?>)?\s*/, "").trimEnd();
  const outer =
    /^<CompleteMultipartUpload(?:\s+xmlns="[^"]*")?\s*>([\s\S]*)<\/CompleteMultipartUpload>$/.exec(document);
  if (!outer) throw new MalformedXml("the body is not a <CompleteMultipartUpload> document");
  const parts: Array<{ partNumber: number; etag: string }> = [];
  let rest = outer[1]!.trim();
  while (rest !== "") {
    const part = /^<Part>([\s\S]*?)<\/Part>\s*/.exec(rest);
    if (!part) throw new MalformedXml(`unexpected content: ${rest.slice(0, 60)}`);
    const fields = new Map<string, string>();
    let inner = part[1]!.trim();
    while (inner !== "") {
      const field = /^<(PartNumber|ETag)>([^<]*)<\/\1>\s*/.exec(inner);
      if (!field || fields.has(field[1]!))
        throw new MalformedXml(`unexpected content in <Part>: ${inner.slice(0, 60)}`);
      fields.set(field[1]!, unescapeXml(field[2]!.trim()));
      inner = inner.slice(field[0].length);
    }
    const number = fields.get("PartNumber");
    const etag = fields.get("ETag");
    if (number === undefined || etag === undefined || !/^\d{1,5}$/.test(number)) {
      throw new MalformedXml("each <Part> needs a <PartNumber> and an <ETag>");
    }
    parts.push({ partNumber: Number(number), etag });
    rest = rest.slice(part[0].length);
  }
  if (parts.length === 0) throw new MalformedXml("the part list is empty");
  return parts;
};

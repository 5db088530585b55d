import { createHash, randomBytes } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import { crc32cCombine, crc32cUpdate } from "./crc32c.js";

/**
 * One file of bytes on disk. An object is a list of segments, so completing a multipart upload
 * or composing objects joins files without copying them; a segment is deleted with its last user.
 */
export interface Segment {
  readonly path: string;
  readonly size: number;
  refs: number;
  /** Computed on first need: hashing every part body as it arrives would slow uploads down. */
  crc32c?: number;
}

export interface StoredObject {
  readonly name: string;
  readonly size: number;
  readonly contentType: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly generation: string;
  /** Absent for objects assembled from parts or components, as in GCS. */
  readonly md5?: Buffer;
  /** Set for objects assembled from parts or components: their number. */
  readonly componentCount?: number;
  readonly segments: ReadonlyArray<Segment>;
  readonly created: Date;
}

export interface StoredPart {
  readonly number: number;
  readonly size: number;
  readonly md5: Buffer;
  readonly segment: Segment;
  readonly lastModified: Date;
}

/** `"<md5 hex>"`, the ETag GCS gives a part. */
export const partEtag = (part: Pick<StoredPart, "md5">): string => `"${part.md5.toString("hex")}"`;

export interface MultipartUpload {
  readonly id: string;
  readonly name: string;
  readonly contentType: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly initiated: Date;
  readonly parts: Map<number, StoredPart>;
}

export interface ResumableSession {
  readonly id: string;
  readonly name: string;
  readonly contentType: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly ifGenerationMatch?: string;
  /** Segments received so far, in order; each PUT appends one. */
  readonly received: Segment[];
  size: number;
  /** md5 over every byte so far; node's Hash cannot be copied cheaply, so it is fed as bytes arrive. */
  readonly md5: ReturnType<typeof createHash>;
  /** The declared total, once a Content-Range gave one. */
  total?: number;
}

/** What a body written to disk turned out to be. */
export interface Written {
  readonly segment: Segment;
  readonly md5: Buffer;
}

export class BodyTooLarge extends Error {}

/** Hashes what passes and refuses to pass more than `limit` bytes. */
class Hashing extends Transform {
  readonly md5 = createHash("md5");
  size = 0;
  crc: number | undefined;
  constructor(
    private readonly limit: number,
    withCrc: boolean,
    private readonly also?: (chunk: Buffer) => void,
  ) {
    super();
    this.crc = withCrc ? 0 : undefined;
  }
  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.size += chunk.length;
    if (this.size > this.limit) {
      done(new BodyTooLarge(`body larger than ${this.limit} bytes`));
      return;
    }
    this.md5.update(chunk);
    if (this.crc !== undefined) this.crc = crc32cUpdate(this.crc, chunk);
    this.also?.(chunk);
    done(null, chunk);
  }
}

/** The bucket's state: objects and multipart uploads in maps, their bytes in files under `dir`. */
export class Bucket {
  readonly objects = new Map<string, StoredObject>();
  readonly uploads = new Map<string, MultipartUpload>();
  readonly sessions = new Map<string, ResumableSession>();
  private readonly files = new Set<string>();
  private generation = BigInt(Date.now()) * 1000n;

  constructor(
    readonly name: string,
    private readonly dir: string,
  ) {}

  nextGeneration(): string {
    this.generation += 1n;
    return this.generation.toString();
  }

  /**
   * Streams `body` into a new segment, refusing more than `limit` bytes. `crc`: also compute the
   * CRC32C now (whole objects, read often) rather than on first need (part bodies).
   */
  async write(
    body: AsyncIterable<Uint8Array> | NodeJS.ReadableStream,
    options: {
      readonly limit?: number;
      readonly crc?: boolean;
      readonly also?: (chunk: Buffer) => void;
    } = {},
  ): Promise<Written> {
    const path = join(this.dir, randomBytes(12).toString("hex"));
    this.files.add(path);
    const hashing = new Hashing(options.limit ?? Number.MAX_SAFE_INTEGER, options.crc ?? true, options.also);
    try {
      await pipeline(body, hashing, createWriteStream(path));
    } catch (error) {
      this.files.delete(path);
      await rm(path, { force: true });
      throw error;
    }
    return {
      segment: {
        path,
        size: hashing.size,
        refs: 1,
        ...(hashing.crc !== undefined ? { crc32c: hashing.crc } : {}),
      },
      md5: hashing.md5.digest(),
    };
  }

  async release(segments: Iterable<Segment>): Promise<void> {
    for (const segment of segments) {
      segment.refs -= 1;
      if (segment.refs <= 0 && this.files.delete(segment.path)) await rm(segment.path, { force: true });
    }
  }

  /** Stores `object`, releasing whatever was at its name. */
  async put(object: StoredObject): Promise<void> {
    const previous = this.objects.get(object.name);
    this.objects.set(object.name, object);
    if (previous) await this.release(previous.segments);
  }

  async delete(name: string): Promise<boolean> {
    const previous = this.objects.get(name);
    if (!previous) return false;
    this.objects.delete(name);
    await this.release(previous.segments);
    return true;
  }

  /** The object made of `pieces` in order, as a multipart complete or a compose makes it. */
  assemble(
    name: string,
    pieces: ReadonlyArray<{
      readonly segments: ReadonlyArray<Segment>;
      readonly size: number;
    }>,
    meta: { readonly contentType: string; readonly metadata: Readonly<Record<string, string>> },
    now: Date,
  ): StoredObject {
    let size = 0;
    const segments: Segment[] = [];
    for (const piece of pieces) {
      size += piece.size;
      for (const segment of piece.segments) {
        segment.refs += 1;
        segments.push(segment);
      }
    }
    return {
      name,
      size,
      contentType: meta.contentType,
      metadata: meta.metadata,
      generation: this.nextGeneration(),
      componentCount: pieces.length,
      segments,
      created: now,
    };
  }

  /** Bytes `start..end` (inclusive) of the object, read segment by segment from disk. */
  async *read(
    object: Pick<StoredObject, "segments" | "size">,
    start = 0,
    end = object.size - 1,
  ): AsyncGenerator<Buffer> {
    let offset = 0;
    for (const segment of object.segments) {
      const segmentEnd = offset + segment.size - 1;
      if (segment.size > 0 && segmentEnd >= start && offset <= end) {
        const from = Math.max(start, offset) - offset;
        const to = Math.min(end, segmentEnd) - offset;
        for await (const chunk of createReadStream(segment.path, { start: from, end: to }))
          yield chunk as Buffer;
      }
      offset += segment.size;
      if (offset > end) return;
    }
  }

  async readAll(object: Pick<StoredObject, "segments" | "size">): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const chunk of this.read(object)) chunks.push(chunk);
    return Buffer.concat(chunks);
  }

  /** The CRC32C of the segments joined, from each segment's (read from disk once, then kept). */
  async crc32c(object: Pick<StoredObject, "segments">): Promise<number> {
    let crc = 0;
    let first = true;
    for (const segment of object.segments) {
      if (segment.crc32c === undefined) {
        let own = 0;
        for await (const chunk of createReadStream(segment.path)) own = crc32cUpdate(own, chunk as Buffer);
        segment.crc32c = own;
      }
      crc = first ? segment.crc32c : crc32cCombine(crc, segment.crc32c, segment.size);
      first = false;
    }
    return crc;
  }

  /** Files on disk and their bytes: what a test checks to see that nothing leaked. */
  diskUsage(): { readonly files: number } {
    return { files: this.files.size };
  }

  async close(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
    this.files.clear();
  }
}

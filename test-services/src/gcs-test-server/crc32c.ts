// CRC32C (Castagnoli), as GCS reports it in `crc32c` and `x-goog-hash`: the big-endian 4 bytes in
// base64. Node has no CRC32C of its own. Slicing by 8 keeps hashing a large part quick enough for
// tests; `combine` gives a multipart object its checksum from its parts' without reading them again.

const POLY = 0x82f63b78;

const TABLES: Uint32Array[] = (() => {
  const tables = Array.from({ length: 8 }, () => new Uint32Array(256));
  const first = tables[0]!;
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLY : c >>> 1;
    first[n] = c >>> 0;
  }
  for (let n = 0; n < 256; n++) {
    let c = first[n]!;
    for (let t = 1; t < 8; t++) {
      c = (first[c & 0xff]! ^ (c >>> 8)) >>> 0;
      tables[t]![n] = c;
    }
  }
  return tables;
})();

const [T0, T1, T2, T3, T4, T5, T6, T7] = TABLES as [
  Uint32Array,
  Uint32Array,
  Uint32Array,
  Uint32Array,
  Uint32Array,
  Uint32Array,
  Uint32Array,
  Uint32Array,
];

/** Extends `crc` (0 for none yet) over `bytes`. */
export const crc32cUpdate = (crc: number, bytes: Uint8Array): number => {
  let c = ~crc >>> 0;
  let i = 0;
  const end8 = bytes.length - (bytes.length % 8);
  while (i < end8) {
    const a = (c ^ (bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24))) >>> 0;
    c =
      T7[a & 0xff]! ^
      T6[(a >>> 8) & 0xff]! ^
      T5[(a >>> 16) & 0xff]! ^
      T4[a >>> 24]! ^
      T3[bytes[i + 4]!]! ^
      T2[bytes[i + 5]!]! ^
      T1[bytes[i + 6]!]! ^
      T0[bytes[i + 7]!]!;
    i += 8;
  }
  while (i < bytes.length) c = T0[(c ^ bytes[i++]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
};

const gf2Times = (matrix: Uint32Array, vector: number): number => {
  let sum = 0;
  let v = vector;
  for (let i = 0; v !== 0; i++, v >>>= 1) if (v & 1) sum ^= matrix[i]!;
  return sum >>> 0;
};

const gf2Square = (square: Uint32Array, matrix: Uint32Array): void => {
  for (let n = 0; n < 32; n++) square[n] = gf2Times(matrix, matrix[n]!);
};

/** The CRC of A followed by B, from crc(A), crc(B) and B's length (zlib's crc32_combine). */
export const crc32cCombine = (crcA: number, crcB: number, lengthB: number): number => {
  if (lengthB <= 0) return crcA;
  const even = new Uint32Array(32);
  const odd = new Uint32Array(32);
  odd[0] = POLY;
  for (let n = 1, row = 1; n < 32; n++, row <<= 1) odd[n] = row >>> 0;
  gf2Square(even, odd);
  gf2Square(odd, even);
  let crc = crcA;
  let len = lengthB;
  do {
    gf2Square(even, odd);
    if (len % 2) crc = gf2Times(even, crc);
    len = Math.floor(len / 2);
    if (len === 0) break;
    gf2Square(odd, even);
    if (len % 2) crc = gf2Times(odd, crc);
    len = Math.floor(len / 2);
  } while (len !== 0);
  return (crc ^ crcB) >>> 0;
};

export const crc32cBase64 = (crc: number): string => {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(crc >>> 0);
  return out.toString("base64");
};

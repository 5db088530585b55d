import { randomBytes } from "node:crypto";
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaultLadder, ffmpegMediaProcessor } from "@vod/adapter-ffmpeg";
import type { Encryption } from "@vod/core";
import { Effect, Either } from "effect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clearKeyLine, signalClearKey } from "../src/media-processor.js";
import { packageInto, run, system } from "./fixtures.js";

type Packaged = Awaited<ReturnType<typeof packageInto>>;

const encryption: Encryption = {
  keyId: randomBytes(16).toString("hex"),
  key: randomBytes(16).toString("hex"),
};
const keyBytes = Buffer.from(encryption.key, "hex");
const kidBytes = Buffer.from(encryption.keyId, "hex");

let root: string;
let source: string;
let clear: Packaged;
let drm: Packaged;
/** What the packager was started with in the encrypted run, one argument per line. */
let packagerArgv: string;

/** What was emitted, in emission order. */
const paths = (p: Packaged) => p.emitted.map((file) => file.path);

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "vod-ffmpeg-drm-"));
  source = join(root, "source.mp4");
  // 7 s: two segments (6 s + 1 s), so "every segment" is more than the first.
  await run(system.ffmpeg, [
    ...["-hide_banner", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30"],
    ...["-f", "lavfi", "-i", "sine=frequency=440", "-t", "7"],
    ...["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac", source],
  ]);
  // The real packager behind a script that records its arguments, to show the key is not among them.
  const argvFile = join(root, "packager-argv.txt");
  const wrapper = join(root, "packager.sh");
  await writeFile(
    wrapper,
    `#!/bin/sh\nprintf '%s\\n' "$@" > '${argvFile}'\nexec '${system.packager}' "$@"\n`,
  );
  await chmod(wrapper, 0o755);
  // One x264 thread: the encode is then the same in both runs, so their frames can be compared.
  const input = { path: source };
  [clear, drm] = await Promise.all([
    packageInto(root, input, { x264Threads: 1 }),
    packageInto(
      root,
      input,
      { x264Threads: 1, ...(process.platform === "win32" ? {} : { packagerPath: wrapper }) },
      { encryption },
    ),
  ]);
  packagerArgv = process.platform === "win32" ? "" : await readFile(argvFile, "utf8");
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const text = (p: Packaged, path: string) => readFile(join(p.outDir, path), "utf8");

/** The media segments a playlist lists, in order. */
const segments = async (p: Packaged, dir: string) =>
  (await text(p, `${dir}/playlist.m3u8`))
    .split("\n")
    .filter((line) => line !== "" && !line.startsWith("#"))
    .map((line) => `${dir}/${line}`);

/** The init segment and the first media segment of `dir`, joined into one playable file. */
const joinFirst = async (p: Packaged, dir: string, name: string) => {
  const [first] = await segments(p, dir);
  const joined = join(root, name);
  const parts = await Promise.all([
    readFile(join(p.outDir, `${dir}/init.mp4`)),
    readFile(join(p.outDir, first!)),
  ]);
  await writeFile(joined, Buffer.concat(parts));
  return joined;
};

/** ffmpeg's checksums of what it decodes, or how it failed. */
const decode = async (file: string, args: ReadonlyArray<string>, key?: string) => {
  try {
    const { stdout } = await run(system.ffmpeg, [
      ...["-hide_banner", "-nostdin", "-v", "error"],
      ...(key === undefined ? [] : ["-decryption_key", key]),
      ...["-i", file, ...args, "-"],
    ]);
    return { ok: true, sums: stdout.split("\n").filter((line) => line !== "" && !line.startsWith("#")) };
  } catch (error) {
    return { ok: false, sums: [], error: String(error) };
  }
};

/** ISO BMFF box types found anywhere in the file (a byte search, enough for these four-letter codes). */
const hasBox = (bytes: Buffer, type: string) => bytes.includes(Buffer.from(type, "latin1"));

const expectBoxes = async (p: Packaged, path: string, boxes: ReadonlyArray<string>) => {
  const bytes = await readFile(join(p.outDir, path));
  for (const box of boxes) expect(hasBox(bytes, box), `${box} in ${path}`).toBe(true);
};

/** Whether every media segment of the renditions `dirs` carries sample encryption (senc). */
const expectEncrypted = async (p: Packaged, dirs: ReadonlyArray<string>, encrypted: boolean) => {
  for (const dir of dirs)
    for (const path of await segments(p, dir))
      expect(hasBox(await readFile(join(p.outDir, path)), "senc"), path).toBe(encrypted);
};

/** The first segment of rendition `dir` decoded (`args`): clear, and encrypted with the key, without one and with a wrong one. */
const decodeFirst = async (dir: string, args: ReadonlyArray<string>) => {
  const reference = await decode(await joinFirst(clear, dir, `clear-${dir}.mp4`), args);
  const joined = await joinFirst(drm, dir, `drm-${dir}.mp4`);
  return {
    reference,
    withKey: await decode(joined, args, encryption.key),
    withoutKey: await decode(joined, args),
    wrongKey: await decode(joined, args, randomBytes(16).toString("hex")),
  };
};

describe("content protection", () => {
  it("declares the key for ClearKey in every media playlist, with the KID and without the key", async () => {
    const expected =
      `#EXT-X-KEY:METHOD=SAMPLE-AES-CTR,URI="data:text/plain;base64,${kidBytes.toString("base64")}",` +
      `KEYFORMAT="org.w3.clearkey",KEYFORMATVERSIONS="1"`;
    for (const dir of ["360p", "240p", "audio"]) {
      const lines = (await text(drm, `${dir}/playlist.m3u8`)).split("\n");
      const keys = lines.filter((line) => line.startsWith("#EXT-X-KEY:"));
      expect(keys).toEqual([expected]);
      // Before the init section, so that it covers it too; Shaka's identity line is gone.
      expect(lines.indexOf(expected)).toBeLessThan(lines.findIndex((l) => l.startsWith("#EXT-X-MAP:")));
      expect(lines.join("\n")).not.toContain("identity");
      // The URI read as hls.js reads a ClearKey `data:` URI: one colon, the payload after the last
      // `;`, base64 after "base64,", its first 16 bytes the key ID.
      const uri = /URI="([^"]*)"/.exec(keys[0]!)![1]!;
      const parts = uri.split(":");
      expect(parts).toHaveLength(2);
      expect(parts[0]).toBe("data");
      const [encoding, payload] = parts[1]!.split(";").at(-1)!.split(",");
      expect(encoding).toBe("base64");
      expect(Buffer.from(payload!, "base64").subarray(0, 16).equals(kidBytes)).toBe(true);
    }
    const master = await text(drm, "master.m3u8");
    expect(master).not.toMatch(/#EXT-X-(SESSION-)?KEY/);
    for (const dir of ["360p", "240p", "audio"]) {
      expect(await text(clear, `${dir}/playlist.m3u8`)).not.toContain("#EXT-X-KEY");
    }
    expect(paths(drm).at(-1)).toBe("master.m3u8");
  });

  it("puts the content key in no emitted file, and never on the packager's command line", async () => {
    const b64 = keyBytes.toString("base64");
    const forms = [
      keyBytes,
      Buffer.from(encryption.key.toLowerCase()),
      Buffer.from(encryption.key.toUpperCase()),
      Buffer.from(b64),
      Buffer.from(b64.replace(/=+$/, "")),
      Buffer.from(keyBytes.toString("base64url")),
    ];
    let kidSeen = 0;
    expect(paths(drm).length).toBeGreaterThan(8);
    for (const path of paths(drm)) {
      const bytes = await readFile(join(drm.outDir, path));
      for (const form of forms) expect(bytes.includes(form), `${path} holds the key`).toBe(false);
      if (bytes.includes(kidBytes)) kidSeen++;
    }
    // The same search finds the KID (in each init segment's tenc and pssh boxes): the scan works.
    expect(kidSeen).toBeGreaterThanOrEqual(3);
    expect(await readdir(drm.scratchDir)).toEqual([]);
    if (process.platform !== "win32") {
      expect(packagerArgv).toContain("--enable_raw_key_encryption");
      expect(packagerArgv).toContain("--fromenv=keys");
      for (const form of forms.slice(1)) expect(packagerArgv).not.toContain(form.toString());
    }
  });

  it("encrypts every video segment, the first included, decodable only with the key", async () => {
    await expectBoxes(drm, "360p/init.mp4", ["encv", "tenc", "pssh", "cenc"]);
    expect(await segments(drm, "360p")).toHaveLength(2);
    await expectEncrypted(drm, ["360p", "240p"], true);
    await expectEncrypted(clear, ["360p"], false);

    const { reference, withKey, withoutKey, wrongKey } = await decodeFirst("360p", [
      "-map",
      "0:v",
      "-f",
      "framemd5",
    ]);

    expect(reference.ok).toBe(true);
    expect(reference.sums.length).toBe(180); // the first 6 s at 30 fps
    expect(withKey).toEqual(reference);
    for (const attempt of [withoutKey, wrongKey]) {
      expect(attempt.ok && attempt.sums.join("\n") === reference.sums.join("\n")).toBe(false);
      // No frame of the first segment comes out right: none is in the clear.
      const right = new Set(reference.sums.map((line) => line.split(",").at(-1)));
      expect(attempt.sums.filter((line) => right.has(line.split(",").at(-1))).length).toBeLessThan(5);
    }
  });

  it("encrypts the audio segments too", async () => {
    await expectBoxes(drm, "audio/init.mp4", ["enca", "tenc", "pssh"]);
    await expectEncrypted(drm, ["audio"], true);
    const { reference, withKey, withoutKey } = await decodeFirst("audio", ["-map", "0:a", "-f", "md5"]);

    expect(reference.ok).toBe(true);
    expect(reference.sums).toHaveLength(1);
    expect(reference.sums[0]).not.toBe("MD5=d41d8cd98f00b204e9800998ecf8427e"); // not nothing
    expect(withKey).toEqual(reference);
    expect(withoutKey.ok && withoutKey.sums[0] === reference.sums[0]).toBe(false);
  });

  it("rejects a key that is not 16 bytes in hex, without echoing it", async () => {
    const processor = ffmpegMediaProcessor({ scratchDir: root });
    const input = { path: source };
    const probed = await Effect.runPromise(processor.probe(input));
    const secret = "not-a-key-0123456789abcdef";
    for (const bad of [
      { keyId: encryption.keyId, key: secret },
      { keyId: "00", key: encryption.key },
    ]) {
      const result = await Effect.runPromise(
        Effect.either(
          processor.package(input, probed, defaultLadder, () => Effect.void, { encryption: bad }),
        ),
      );
      expect(Either.isLeft(result) && result.left).toMatchObject({
        _tag: "MediaRejected",
        code: "processing_error",
      });
      expect(JSON.stringify(Either.isLeft(result) && result.left.message)).not.toContain(secret);
    }
  });
});

describe("signalClearKey", () => {
  const kid = "00112233445566778899aabbccddeeff";
  const shaka = [
    "#EXTM3U",
    "#EXT-X-VERSION:6",
    "#EXT-X-TARGETDURATION:6",
    "#EXT-X-PLAYLIST-TYPE:VOD",
    '#EXT-X-MAP:URI="init.mp4"',
    '#EXT-X-KEY:METHOD=SAMPLE-AES-CTR,URI="data:text/plain;base64,ABEiM0RVZneImaq7zN3u/w==",KEYFORMAT="identity"',
    "#EXTINF:6.000,",
    "1.m4s",
    "#EXT-X-ENDLIST",
    "",
  ].join("\n");

  it("replaces Shaka's identity line with the ClearKey line, before EXT-X-MAP", () => {
    expect(clearKeyLine(kid)).toBe(
      '#EXT-X-KEY:METHOD=SAMPLE-AES-CTR,URI="data:text/plain;base64,ABEiM0RVZneImaq7zN3u/w==",' +
        'KEYFORMAT="org.w3.clearkey",KEYFORMATVERSIONS="1"',
    );
    expect(signalClearKey(shaka, kid)?.split("\n").slice(3, 7)).toEqual([
      "#EXT-X-PLAYLIST-TYPE:VOD",
      clearKeyLine(kid),
      '#EXT-X-MAP:URI="init.mp4"',
      "#EXTINF:6.000,",
    ]);
  });

  it("refuses a playlist without a SAMPLE-AES-CTR key for that KID", () => {
    expect(signalClearKey(shaka.replace(/^#EXT-X-KEY.*\n/m, ""), kid)).toBeUndefined();
    expect(signalClearKey(shaka, "ffeeddccbbaa99887766554433221100")).toBeUndefined();
    expect(signalClearKey(shaka.replace("SAMPLE-AES-CTR", "AES-128"), kid)).toBeUndefined();
  });
});

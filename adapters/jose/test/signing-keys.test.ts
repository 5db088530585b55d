import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  generateSigningKeys,
  joseTokenSigner,
  loadOrCreateSigningKeys,
  parseSigningKeys,
} from "@vod/adapter-jose";
import { Effect, Either } from "effect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

describe("signing keys", () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), "vod-jose-"));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("generates one Ed25519 key per purpose, each with its own kid, that parse back unchanged", async () => {
    const keys = await generateSigningKeys();
    const all = [...keys.access, ...keys.playback, ...keys.license];
    expect(all).toHaveLength(3);
    for (const key of all)
      expect(key).toMatchObject({ kty: "OKP", crv: "Ed25519", alg: "EdDSA", use: "sig" });
    expect(new Set(all.map((key) => key.kid)).size).toBe(3);
    expect(parseSigningKeys(JSON.stringify(keys))).toEqual(keys);
  });

  it("explains what is wrong with configured keys, and never quotes a secret", async () => {
    const { access } = await generateSigningKeys();
    const secret = access[0]!.d;
    expect(() => parseSigningKeys(`{"access": [${secret}`)).toThrow("Invalid signing keys: not valid JSON");
    expect(() => parseSigningKeys(JSON.stringify({ access }))).toThrow(
      /playback: is missing.*license: is missing/,
    );
    for (const bad of [secret, [secret], { access: [secret], playback: access, license: access }]) {
      let message = "";
      try {
        parseSigningKeys(JSON.stringify(bad));
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).toMatch(/^Invalid signing keys: /);
      expect(message).not.toContain(secret);
    }
  });

  it("creates the key file once, private to its owner, and reads it back after a restart", async () => {
    const dir = join(root, "nested", "data");
    const first = await loadOrCreateSigningKeys(dir);
    const path = join(dir, "signing-keys.json");
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(path, "utf8"))).toEqual(first);

    const second = await loadOrCreateSigningKeys(dir);
    expect(second).toEqual(first);
    const config = { issuer: "https://vod.test", audience: "vod" };
    const times = { issuedAt: 1_700_000_000_000, expiresAt: 1_700_000_900_000 };
    const token = await Effect.runPromise(
      joseTokenSigner({ ...config, keys: first }).sign("access", { sub: "u" }, times),
    );
    const verified = await Effect.runPromise(
      Effect.either(
        joseTokenSigner({ ...config, keys: second }).verify("access", token, { now: times.issuedAt }),
      ),
    );
    expect(Either.isRight(verified)).toBe(true);
  });

  it("gives every concurrent starter the same keys, and leaves no temporary file behind", async () => {
    const results = await Promise.all(Array.from({ length: 8 }, () => loadOrCreateSigningKeys(root)));
    const onDisk = parseSigningKeys(await readFile(join(root, "signing-keys.json"), "utf8"));
    for (const keys of results) expect(keys).toEqual(onDisk);
    expect(await readdir(root)).toEqual(["signing-keys.json"]);
  });

  it("refuses a damaged key file rather than replacing it", async () => {
    const path = join(root, "signing-keys.json");
    await writeFile(path, '{"access": []}');
    await expect(loadOrCreateSigningKeys(root)).rejects.toThrow(`${path}: Invalid signing keys`);
    expect(await readFile(path, "utf8")).toBe('{"access": []}');
  });
});

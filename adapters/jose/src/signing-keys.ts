import { randomBytes } from "node:crypto";
import { link, mkdir, open, readFile, rename, unlink } from "node:fs/promises";
import { join } from "node:path";
import type { TokenPurpose } from "@vod/core";
import { Either, ParseResult, Schema } from "effect";
import { calculateJwkThumbprint, exportJWK, generateKeyPair } from "jose";

// Every message is fixed text: a failing key file must never echo key material into a log.
const Base64Url = Schema.String.annotations({ message: () => "must be a base64url string" }).pipe(
  Schema.pattern(/^[A-Za-z0-9_-]+$/, { message: () => "must be a base64url string" }),
);

const Ed25519PrivateJwk = Schema.Struct({
  kty: Schema.Literal("OKP"),
  crv: Schema.Literal("Ed25519"),
  kid: Schema.String.pipe(Schema.minLength(1, { message: () => "must be a non-empty string" })),
  x: Base64Url,
  d: Base64Url,
  alg: Schema.optional(Schema.Literal("EdDSA")),
  use: Schema.optional(Schema.Literal("sig")),
}).annotations({ message: () => "must be an Ed25519 private JWK object" });

export type Ed25519PrivateJwk = typeof Ed25519PrivateJwk.Type;

const KeySet = Schema.Array(Ed25519PrivateJwk).pipe(
  Schema.minItems(1, { message: () => "must list at least one key (the first one signs)" }),
);

const purposes = ["access", "playback", "license"] as const satisfies readonly TokenPurpose[];

// A kid names one key of one purpose: the verifier tells "another purpose's key" from "an unknown
// key" by it, so a kid shared by two purposes would blur the two.
const uniqueKids = (keys: { readonly [P in TokenPurpose]: ReadonlyArray<{ readonly kid: string }> }) => {
  const kids = purposes.flatMap((purpose) => keys[purpose].map((key) => key.kid));
  return new Set(kids).size === kids.length;
};

/**
 * Per token purpose, Ed25519 private JWKs with a `kid`. The first key of each list signs; every key
 * of the list verifies, so a new key is put first and the old one kept until its tokens expire.
 */
export const SigningKeys = Schema.Struct({ access: KeySet, playback: KeySet, license: KeySet })
  .annotations({ message: () => "must be an object with access, playback and license key lists" })
  .pipe(Schema.filter(uniqueKids, { message: () => "every kid must be unique across all purposes" }));

export type SigningKeys = typeof SigningKeys.Type;

/** Validates signing keys given as a value; throws an Error naming every bad field. */
export const decodeSigningKeys = (input: unknown): SigningKeys => {
  const result = Schema.decodeUnknownEither(SigningKeys, { errors: "all" })(input);
  if (Either.isRight(result)) return result.right;
  const problems = ParseResult.ArrayFormatter.formatErrorSync(result.left).map(
    (issue) => `${issue.path.length > 0 ? issue.path.join(".") : "(root)"}: ${issue.message}`,
  );
  throw new Error(`Invalid signing keys: ${problems.join("; ")}`);
};

/** Parses signing keys given as JSON (e.g. from configuration); throws an Error saying what is wrong. */
export const parseSigningKeys = (json: string): SigningKeys => {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    // The parser's message quotes the input, and the input is secret.
    throw new Error("Invalid signing keys: not valid JSON");
  }
  return decodeSigningKeys(parsed);
};

const generateKey = async (): Promise<Ed25519PrivateJwk> => {
  const { privateKey } = await generateKeyPair("EdDSA", { crv: "Ed25519", extractable: true });
  const jwk = await exportJWK(privateKey);
  if (jwk.kty !== "OKP" || jwk.crv !== "Ed25519" || jwk.x === undefined || jwk.d === undefined) {
    throw new Error("jose exported an unexpected key shape for an Ed25519 key");
  }
  const kid = await calculateJwkThumbprint({ kty: jwk.kty, crv: jwk.crv, x: jwk.x });
  return { kty: "OKP", crv: "Ed25519", kid, x: jwk.x, d: jwk.d, alg: "EdDSA", use: "sig" };
};

/** A fresh key per purpose. */
export const generateSigningKeys = async (): Promise<SigningKeys> => {
  const [access, playback, license] = await Promise.all([generateKey(), generateKey(), generateKey()]);
  return { access: [access], playback: [playback], license: [license] };
};

const isErrnoException = (error: unknown, code: string): boolean =>
  error instanceof Error && (error as NodeJS.ErrnoException).code === code;

const readKeyFile = async (path: string): Promise<SigningKeys | undefined> => {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if (isErrnoException(error, "ENOENT")) return undefined;
    throw error;
  }
  try {
    return parseSigningKeys(text);
  } catch (error) {
    throw new Error(`${path}: ${(error as Error).message}`);
  }
};

/**
 * Reads `<dir>/signing-keys.json`, or creates it with fresh keys, so that tokens signed before a
 * restart stay valid after it. Safe when several processes start at once: all end up with the keys
 * of whichever process wrote the file first.
 */
export const loadOrCreateSigningKeys = async (dir: string): Promise<SigningKeys> => {
  const path = join(dir, "signing-keys.json");
  const existing = await readKeyFile(path);
  if (existing !== undefined) return existing;

  await mkdir(dir, { recursive: true, mode: 0o700 });
  const keys = await generateSigningKeys();
  const temporary = `${path}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
  const file = await open(temporary, "wx", 0o600);
  try {
    await file.writeFile(`${JSON.stringify(keys, null, 2)}\n`);
    // The file must be whole on disk before its name can be seen, or a crash leaves a torn key file.
    await file.sync();
  } finally {
    await file.close();
  }

  try {
    // link, unlike rename, refuses to replace: a second process that lost the race must not swap
    // out keys the first has already signed with.
    await link(temporary, path);
  } catch (error) {
    if (isErrnoException(error, "EEXIST")) {
      await unlink(temporary);
      const winner = await readKeyFile(path);
      if (winner === undefined) throw new Error(`${path} appeared and vanished while being created`);
      return winner;
    }
    if (isErrnoException(error, "EPERM") || isErrnoException(error, "ENOTSUP")) {
      // Some filesystems have no hard links; an atomic rename still never leaves a torn file.
      await rename(temporary, path);
      return (await readKeyFile(path)) ?? keys;
    }
    await unlink(temporary);
    throw error;
  }
  await unlink(temporary);
  return keys;
};

// Secrets generated into VOD_DATA_DIR, made by many creators at once on an empty directory: in
// this process and in processes of their own, as hosts and workers sharing a directory start.
import { spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { loadOrCreateSecret } from "../src/secrets.js";

/** The build the CLI runs (`npm test` compiles before vitest). */
const built = fileURLToPath(new URL("../dist/secrets.js", import.meta.url));

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

// Each child makes `perChild` creators at once when told "go" on stdin, and prints their secrets.
const childScript = `
const { loadOrCreateSecret } = await import(process.argv[1]);
const [dir, perChild] = [process.argv[2], Number(process.argv[3])];
process.stdout.write("ready\\n");
process.stdin.once("data", async () => {
  const made = await Promise.all(
    Array.from({ length: perChild }, () => loadOrCreateSecret(dir, "drm-master-key")),
  );
  process.stdout.write(made.map((s) => Buffer.from(s).toString("hex")).join("\\n") + "\\n");
  process.exit(0);
});
`;

const startChild = (dir: string, perChild: number) => {
  const child = spawn(
    process.execPath,
    ["--input-type=module", "-e", childScript, built, dir, String(perChild)],
    {
      stdio: ["pipe", "pipe", "inherit"],
    },
  );
  let out = "";
  child.stdout.setEncoding("utf8");
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout.on("data", (chunk: string) => {
      out += chunk;
      if (out.startsWith("ready\n")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`child exited (${code}) before it was ready`)));
  });
  // "close", not "exit": a child's exit can be told before the last of its output is read.
  const secrets = new Promise<string[]>((resolve, reject) =>
    child.once("close", (code) =>
      code === 0
        ? resolve(out.slice("ready\n".length).trim().split("\n"))
        : reject(new Error(`child exited with ${code}`)),
    ),
  );
  return { child, ready, secrets };
};

describe("secrets generated into the data directory", () => {
  const dirs: string[] = [];
  const emptyDir = async () => {
    const dir = await mkdtemp(join(tmpdir(), "vod-secrets-"));
    dirs.push(dir);
    return join(dir, "data");
  };
  afterEach(async () => {
    await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
  });

  it("gives 30 creators in one process, starting at once on an empty directory, one secret", async () => {
    for (let round = 0; round < 5; round++) {
      const dir = await emptyDir();
      const made = await Promise.all(
        Array.from({ length: 30 }, () => loadOrCreateSecret(dir, "drm-master-key")),
      );
      const stored = (await readFile(join(dir, "drm-master-key"), "utf8")).trim();
      expect(new Set(made.map(hex))).toEqual(new Set([Buffer.from(stored, "base64url").toString("hex")]));
      expect(made[0]).toHaveLength(32);
      // No temporary file is left beside it.
      expect(await readdir(dir)).toEqual(["drm-master-key"]);
    }
  });

  it("gives creators in several processes, told to start together, one secret", async () => {
    for (let round = 0; round < 3; round++) {
      const dir = await emptyDir();
      const children = Array.from({ length: 4 }, () => startChild(dir, 6));
      await Promise.all(children.map((c) => c.ready));
      for (const { child } of children) child.stdin.end("go\n");
      const made = (await Promise.all(children.map((c) => c.secrets))).flat();
      expect(made).toHaveLength(24);
      const stored = (await readFile(join(dir, "drm-master-key"), "utf8")).trim();
      expect(new Set(made)).toEqual(new Set([Buffer.from(stored, "base64url").toString("hex")]));
      expect(await readdir(dir)).toEqual(["drm-master-key"]);
    }
  }, 60_000);

  it("keeps a secret that exists: a restart reads it again", async () => {
    const dir = await emptyDir();
    const first = await loadOrCreateSecret(dir, "cursor-secret");
    expect(hex(await loadOrCreateSecret(dir, "cursor-secret"))).toBe(hex(first));
  });
});

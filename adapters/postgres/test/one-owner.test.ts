import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { DataDirectoryInUse, migrate, openPglite, openPgliteProcess } from "@vod/adapter-postgres";
import { afterAll, describe, expect, it } from "vitest";

const dirs: string[] = [];
const tempDir = async () => {
  const dir = await mkdtemp(join(tmpdir(), "vod-one-owner-"));
  dirs.push(dir);
  return dir;
};
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

/** A node process running `body` (an ES module, `adapter` bound to this package), until killed. */
const nodeProcess = async (body: string) => {
  const adapter = import.meta.resolve("@vod/adapter-postgres");
  // A file, not --input-type: the database process it forks inherits its flags.
  const script = join(await tempDir(), "script.mjs");
  await writeFile(script, `const adapter = await import(${JSON.stringify(adapter)});\n${body}`);
  const child = spawn(process.execPath, [script], { stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let output = "";
  child.stdout?.on("data", (d) => {
    output += d;
  });
  child.stderr?.on("data", (d) => {
    output += d;
  });
  const printed = async (text: string) => {
    const until = Date.now() + 60_000;
    while (!output.includes(text)) {
      if (child.exitCode !== null) throw new Error(`exited early:\n${output}`);
      if (Date.now() > until) throw new Error(`never printed ${text}:\n${output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const killed = () =>
    new Promise<void>((resolve) => {
      child.once("exit", () => resolve());
      child.kill("SIGKILL");
    });
  return { child, printed, killed };
};

describe("a PGlite data directory has one owner", () => {
  it("refuses a second opening, naming the owner; a process that asks reaches the owner's database", async () => {
    const dir = await tempDir();
    const owner = await openPgliteProcess(dir);
    try {
      await migrate(owner);
      const refused = await openPglite(dir).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(DataDirectoryInUse);
      expect((refused as DataDirectoryInUse).pid).toBe(process.pid);
      await expect(openPgliteProcess(dir)).rejects.toThrow(`in use by process ${process.pid}`);

      const reached = await openPgliteProcess(dir, { whenInUse: "reach" });
      expect(reached.reached).toBe(true);
      const heard: unknown[] = [];
      owner.onBroadcast((message) => heard.push(message));
      await reached.transaction(async (tx) => {
        await tx.query(
          "INSERT INTO tenants (id, slug, name, plan, status, created_at) VALUES ($1, $1, 'n', 'free', 'active', 1)",
          ["t_reached"],
        );
      });
      await reached.publish({ hello: "owner" });
      await reached.close();
      // The socket is open to any local user; only one who can read the owner's key is served.
      const keyFile = join(dir, "..", `.${basename(dir)}.vod-key`);
      const key = await readFile(keyFile, "utf8");
      expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
      await writeFile(keyFile, "0".repeat(key.length));
      await expect(openPgliteProcess(dir, { whenInUse: "reach" })).rejects.toThrow("wrong key");
      await writeFile(keyFile, key);
      // Written in the owner's files, and the owner told.
      expect((await owner.query("SELECT id FROM tenants WHERE id = 't_reached'")).rows).toEqual([
        { id: "t_reached" },
      ]);
      expect(heard).toEqual([{ hello: "owner" }]);
    } finally {
      await owner.close();
    }
    // Closed, the directory is anyone's again.
    const again = await openPglite(dir);
    expect((await again.query("SELECT id FROM tenants")).rows).toEqual([{ id: "t_reached" }]);
    await again.close();
  }, 120_000);

  it("a process killed inside a transaction on the owner's database leaves it unlocked and rolled back", async () => {
    const dir = await tempDir();
    const owner = await openPgliteProcess(dir);
    try {
      await migrate(owner);
      const other = await nodeProcess(`
const db = await adapter.openPgliteProcess(${JSON.stringify(dir)}, { whenInUse: "reach" });
await db.transaction(async (tx) => {
  await tx.query("INSERT INTO tenants (id, slug, name, plan, status, created_at) VALUES ('t_lost', 't_lost', 'n', 'free', 'active', 1)");
  console.log("inside");
  await new Promise(() => {});
});`);
      await other.printed("inside");
      await other.killed();
      // The owner's next statement would wait for that transaction's lock forever.
      expect((await owner.query("SELECT count(*)::int AS n FROM tenants")).rows).toEqual([{ n: 0 }]);
    } finally {
      await owner.close();
    }
  }, 120_000);

  it("an owner killed with SIGKILL holds nothing after: the next opening succeeds", async () => {
    const dir = await tempDir();
    const crashed = await nodeProcess(`
const db = await adapter.openPgliteProcess(${JSON.stringify(dir)});
await adapter.migrate(db);
await db.query("INSERT INTO tenants (id, slug, name, plan, status, created_at) VALUES ('t_kept', 't_kept', 'n', 'free', 'active', 1)");
console.log("written");
await new Promise(() => {});`);
    await crashed.printed("written");
    const pid = crashed.child.pid;
    await crashed.killed();
    const next = await openPgliteProcess(dir);
    try {
      expect(pid).not.toBe(process.pid);
      expect((await next.query("SELECT id FROM tenants")).rows).toEqual([{ id: "t_kept" }]);
    } finally {
      await next.close();
    }
  }, 120_000);
});

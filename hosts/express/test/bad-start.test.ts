import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { describeWith, suiteScratch } from "./suites.js";
import { cli, freePort } from "./support.js";

const startScript = fileURLToPath(new URL("../../../scripts/start.mjs", import.meta.url));

/** A command run to its end: exit code, and stdout and stderr apart. */
const run = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, args, {
      env: { ...process.env, VOD_LOG_LEVEL: "info", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    child.once("exit", (code) => resolve({ code, stdout, stderr }));
  });

const lines = (text: string) => text.split("\n").filter((l) => l !== "");

/** A stack frame anywhere in what was printed. */
const STACK = /^\s+at /m;

const expectOneLine = (
  result: { code: number | null; stdout: string; stderr: string },
  code: number,
  line: RegExp,
) => {
  expect(lines(result.stderr)).toHaveLength(1);
  expect(result.stderr).toMatch(line);
  expect(result.stdout + result.stderr).not.toMatch(STACK);
  expect(result.code).toBe(code);
};

// The exit codes are those of README "Exit codes".
describe("a start that cannot succeed says why in one line and exits with its code", () => {
  const scratch = suiteScratch("vod-bad-start-");

  it("PORT=abc: 78, naming PORT", async () => {
    const result = await run([cli, "serve"], { PORT: "abc", VOD_DATA_DIR: await scratch.dir() });
    expectOneLine(result, 78, /^vod: invalid configuration: PORT: must be a port number from 0 to 65535\n$/);
    expect(result.stdout).toBe("");
  });

  it("several bad variables: still one line, each named", async () => {
    const result = await run([cli, "serve"], {
      PORT: "eighty",
      VOD_TRUST_PROXY: "true",
      VOD_DATA_DIR: await scratch.dir(),
    });
    expectOneLine(
      result,
      78,
      /^vod: invalid configuration: PORT: .*; VOD_TRUST_PROXY: true is no longer accepted/,
    );
  });

  it("an ffmpeg that is not there: 78, naming VOD_FFMPEG_PATH", async () => {
    const result = await run([cli, "serve"], {
      VOD_FFMPEG_PATH: "/nonexistent/ffmpeg",
      VOD_STORAGE: "memory",
      PORT: "0",
      VOD_DATA_DIR: await scratch.dir(),
    });
    expectOneLine(
      result,
      78,
      /^vod: invalid configuration: VOD_FFMPEG_PATH: "\/nonexistent\/ffmpeg" is not an executable file\n$/,
    );
  });

  it("a port in use: 71, naming PORT", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    scratch.afterwards(() => new Promise((resolve) => taken.close(resolve)));
    const port = (taken.address() as { port: number }).port;
    const result = await run([cli, "serve"], {
      PORT: String(port),
      VOD_HOST: "127.0.0.1",
      VOD_STORAGE: "memory",
      VOD_DATA_DIR: await scratch.dir(),
    });
    expectOneLine(result, 71, new RegExp(`^vod serve: PORT: port ${port} is in use by another process`));
  });

  it("a database server that refuses connections: 69, naming VOD_DATABASE_URL, never its password", async () => {
    const port = await freePort();
    const result = await run([cli, "serve"], {
      VOD_DATABASE_URL: `postgres://vod:s3cret-pw@127.0.0.1:${port}/vod`,
      VOD_DATA_DIR: await scratch.dir(),
      PORT: "0",
    });
    expectOneLine(
      result,
      69,
      new RegExp(
        `^vod serve: VOD_DATABASE_URL: cannot reach the database at 127.0.0.1:${port}/vod \\(connection refused\\)`,
      ),
    );
    expect(result.stdout + result.stderr).not.toContain("s3cret-pw");
  });

  it("npm start's script says it builds, then the start's own line (78 for PORT=abc)", async () => {
    const result = await run([startScript, "serve"], { PORT: "abc", VOD_DATA_DIR: await scratch.dir() });
    expect(result.code).toBe(78);
    expect(lines(result.stderr)).toEqual([
      "vod: building… (tsc -b; a first build takes a few minutes, later ones only what changed)",
      expect.stringMatching(/^vod: built in \d+\.\d s; starting…$/),
      "vod: invalid configuration: PORT: must be a port number from 0 to 65535",
    ]);
  }, 120_000);
});

describeWith(["database"], "a start on a database server that is not there as named", ({ databaseUrl }) => {
  const scratch = suiteScratch("vod-bad-database-");

  it("an unknown database: 66; an unknown role: 77", async () => {
    const url = new URL(databaseUrl);
    url.pathname = "/vod_no_such_database_here";
    const unknown = await run([cli, "serve"], {
      VOD_DATABASE_URL: url.href,
      VOD_DATA_DIR: await scratch.dir(),
      PORT: "0",
    });
    expectOneLine(
      unknown,
      66,
      /^vod serve: VOD_DATABASE_URL: database "vod_no_such_database_here" does not exist \(at .*\); create it/,
    );
    const role = new URL(databaseUrl);
    role.username = "vod_no_such_role";
    role.password = "pw-not-shown";
    const refused = await run([cli, "migrate"], {
      VOD_DATABASE_URL: role.href,
      VOD_DATA_DIR: await scratch.dir(),
    });
    expectOneLine(
      refused,
      77,
      /^vod migrate: VOD_DATABASE_URL: the database refused the connection: .*vod_no_such_role/,
    );
    expect(refused.stdout + refused.stderr).not.toContain("pw-not-shown");
  });
});

describe("a start that succeeds says what it does", () => {
  const scratch = suiteScratch("vod-good-start-");

  it("creating and migrating the embedded database, then listening on its address with the API's and the reference's URLs", async () => {
    const port = await freePort();
    const served = await scratch.serve({ VOD_DATA_DIR: await scratch.dir(), VOD_LOG_LEVEL: "info" }, port);
    await served.waitFor("listening on");
    const said = served
      .output()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => (JSON.parse(l) as { msg: string }).msg);
    // A new data directory: its database is created first, and said so.
    const creating = said.indexOf(
      "creating the embedded database (once per data directory; about half a minute)…",
    );
    const migrating = said.indexOf("migrating the database…");
    expect(creating).toBeGreaterThanOrEqual(0);
    expect(migrating).toBeGreaterThan(creating);
    expect(said.findIndex((m) => /^database (migrated: \d+|up to date)/.test(m))).toBeGreaterThan(migrating);
    expect(said).toContain(
      `listening on 127.0.0.1:${port}; the API at http://localhost:${port}, its reference at http://localhost:${port}/docs`,
    );
  }, 120_000);
});

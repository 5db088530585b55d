import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { request } from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { temporarySchemas } from "@vod/adapter-postgres/testing";
import { suiteName, testServices } from "@vod/contract-tests";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, cli, freePort, makeVideo, signUp, spawnCli, stop, uploadAsset } from "./support.js";

/*
 * `npm start` as a user runs it, stopped by SIGTERM sent to npm, to the node process or to the
 * whole process group (DECISIONS, Operations): each drains (the request in flight at the signal
 * gets its answer, the running processing job is released at the drain deadline), exits 0 and
 * leaves no process of its tree behind; another host then takes the job up at once, on the same
 * attempt, although the lease (600 s here) has not run out.
 */

const root = fileURLToPath(new URL("../../../", import.meta.url));

/** The fields of /proc/<pid>/stat after the command in parentheses: state, ppid, pgrp, ... */
const statOf = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ");
  } catch {
    return undefined; // exited
  }
};
const pids = () =>
  readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map(Number);
/** `pid` and every process below it, from /proc (Linux). */
const treeOf = (pid: number): number[] => {
  const below = pids().filter((p) => statOf(p)?.[1] === String(pid));
  return [pid, ...below.flatMap(treeOf)];
};
/** Alive and not a zombie waiting for its parent to reap it. */
const running = (pid: number) => {
  const stat = statOf(pid);
  return stat !== undefined && stat[0] !== "Z";
};
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const waitUntil = async (condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000) => {
  const until = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await pause(50);
  }
};

/** The pino lines of `output`, parsed. */
const logLines = (output: string) =>
  output
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        return {};
      }
    });

interface Started {
  readonly child: ChildProcess;
  readonly url: string;
  readonly output: () => string;
}

/** `npm start` in the repository root, in a process group of its own, until /healthz answers. */
const npmStart = async (env: Record<string, string>, port: number): Promise<Started> => {
  let output = "";
  const child = spawn("npm", ["start"], {
    cwd: root,
    env: { ...process.env, ...env, PORT: String(port), VOD_HOST: "127.0.0.1" },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  child.stdout?.on("data", (d) => {
    output += d;
  });
  child.stderr?.on("data", (d) => {
    output += d;
  });
  const url = `http://127.0.0.1:${port}`;
  await waitUntil(
    async () => {
      if (child.exitCode !== null) throw new Error(`npm start exited early:\n${output}`);
      return fetch(`${url}/healthz`).then(
        (r) => r.status === 200,
        () => false,
      );
    },
    "npm start to serve",
    60_000,
  );
  return { child, url, output: () => output };
};

/**
 * A part upload whose body is half sent: `finish` sends the rest and answers the status. The
 * request is in flight at the server until then.
 */
const halfSentPart = async (url: string, auth: Record<string, string>) => {
  const bytes = randomBytes(256 * 1024);
  const created = await call(url, "/v1/assets", { body: { title: "in flight" }, headers: auth });
  const started = await call(url, "/v1/uploads", {
    body: { asset_id: created.body.asset.id, size_bytes: bytes.length },
    headers: auth,
  });
  expect(started.status).toBe(201);
  const part = new URL(started.body.upload.parts[0].url);
  part.hostname = "127.0.0.1";
  let finishing = () => {};
  const status = new Promise<number>((resolve, reject) => {
    const req = request(part, { method: "PUT", headers: { "content-length": String(bytes.length) } });
    req.on("response", (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    req.write(bytes.subarray(0, bytes.length / 2));
    finishing = () => req.end(bytes.subarray(bytes.length / 2));
  });
  // Read in `finish`; a reset before then is its answer, not an unhandled rejection.
  status.catch(() => undefined);
  // The first half has reached the server once the socket has written it.
  await pause(200);
  return {
    finish: () => {
      finishing();
      return status;
    },
  };
};

type Target = "npm" | "node" | "group";

const describeShutdown = (
  name: string,
  makeEnv: () => Record<string, string>,
  cleanup: () => Promise<void> = async () => {},
) =>
  describe(name, () => {
    let dir: string;
    let source: Buffer;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), "vod-shutdown-"));
      // Built once here: each `npm start` then finds nothing stale (tsc -b is a quick check).
      const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
      await promisify(execFile)(process.execPath, [tsc, "-b", join(root, "hosts/express")], { cwd: root });
      // Long enough that its processing is still running at the drain deadline (1 s).
      const file = join(dir, "source.mp4");
      await makeVideo(file, { width: 640, height: 360, seconds: 40, fps: 24 });
      source = await readFile(file);
    }, 120_000);
    afterAll(async () => {
      await cleanup();
      await rm(dir, { recursive: true, force: true });
    });

    const stopsCleanly = async (target: Target) => {
      const env: Record<string, string> = {
        ...makeEnv(),
        VOD_DATA_DIR: await mkdtemp(join(dir, `${target}-`)),
        VOD_LOG_LEVEL: "info",
        VOD_SHUTDOWN_GRACE_SECONDS: "1",
        // Only a job released at once is taken up again within this test.
        VOD_JOB_LEASE_SECONDS: "600",
      };
      const first = await npmStart(env, await freePort());
      const npmPid = first.child.pid ?? 0;
      const npmExit = new Promise<number | null>((resolve) =>
        first.child.once("exit", (code) => resolve(code)),
      );
      const seen = new Set<number>();
      try {
        const auth = await signUp(first.url, "shutdown");
        const { assetId } = await uploadAsset(first.url, auth, source, "long");
        await waitUntil(
          async () =>
            (await call(first.url, `/v1/assets/${assetId}`, { headers: auth })).body.asset.status ===
            "processing",
          "the job to run",
        );
        const inFlight = await halfSentPart(first.url, auth);

        const tree = treeOf(npmPid);
        for (const pid of tree) seen.add(pid);
        // node itself, not a shell between npm and node (`sh -c "node scripts/start.mjs serve"`).
        const nodePid = tree.find((pid) => {
          const [command, script] = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
          return basename(command ?? "") === basename(process.execPath) && script?.endsWith("start.mjs");
        });
        expect(nodePid).toBeDefined();
        // The embedded database's own process is part of the tree in the embedded set.
        if (!env.VOD_DATABASE_URL)
          expect(
            tree.some((pid) => readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("pglite-child")),
          ).toBe(true);
        if (target === "npm") process.kill(npmPid, "SIGTERM");
        else if (target === "node") process.kill(nodePid ?? 0, "SIGTERM");
        else process.kill(-npmPid, "SIGTERM");
        // Whatever the tree starts while it stops is watched as well.
        const watch = setInterval(() => {
          for (const pid of treeOf(npmPid)) seen.add(pid);
          if (nodePid !== undefined) for (const pid of treeOf(nodePid)) seen.add(pid);
        }, 20);

        await pause(300);
        expect(await inFlight.finish()).toBe(200);
        const code = await Promise.race([npmExit, pause(30_000).then(() => "still running")]);
        clearInterval(watch);
        // npm answers with the exit code of node, which it runs in place of a shell (package.json).
        expect(code, first.output().slice(-3000)).toBe(0);
        await waitUntil(() => [...seen].every((pid) => !running(pid)), "the tree to be gone", 10_000).catch(
          () => undefined,
        );
        expect(
          [...seen].filter(running).map((pid) => `${pid} ${statOf(pid)?.join(" ").slice(0, 40)}`),
        ).toEqual([]);
        const log = logLines(first.output());
        expect(log.some((line) => line.msg === "stopped")).toBe(true);

        // Forty seconds of video do not encode within the 1 s grace: the job was released at its
        // end, not waited for. Another host takes it up now, on the attempt it had (a lease that
        // ran out would cost one), long before the 600 s lease.
        expect(
          log.some((line) => line.msg === "processing released" && line.asset_id === assetId),
          // What the host said of the job, should it not have been released.
          JSON.stringify(log.filter((line) => /processing|job|draining|worker/.test(String(line.msg)))),
        ).toBe(true);
        const next = spawnCli("serve", { ...env, PORT: String(await freePort()), VOD_HOST: "127.0.0.1" });
        try {
          const takenUp = () =>
            logLines(next.output()).find(
              (line) => line.msg === "processing started" && line.asset_id === assetId,
            );
          await waitUntil(() => takenUp() !== undefined, "another host to take the job up", 60_000);
          expect(takenUp()?.attempt).toBe(1);
        } finally {
          expect(await stop(next)).toBe(0);
        }
      } finally {
        for (const pid of [...seen].filter(running)) process.kill(pid, "SIGKILL");
      }
    };

    it("stops on SIGTERM to npm's own process", () => stopsCleanly("npm"), 150_000);
    it("stops on SIGTERM to the node process", () => stopsCleanly("node"), 150_000);
    it("stops on SIGTERM to the whole process group", () => stopsCleanly("group"), 150_000);
  });

describeShutdown("npm start on the embedded default: SIGTERM drains and leaves nothing", () => ({}));

describe("vod serve whose parent dies without a word", () => {
  it("stops by itself, as on SIGTERM, rather than serve on orphaned", async () => {
    const dir = await mkdtemp(join(tmpdir(), "vod-orphan-"));
    let tree: number[] = [];
    try {
      const port = await freePort();
      const logFile = join(dir, "serve.log");
      // dash keeps itself between (a redirection, no exec), as it does under `npm start` without exec.
      const shell = spawn("sh", ["-c", `"${process.execPath}" "${cli}" serve > "${logFile}" 2>&1`], {
        env: {
          ...process.env,
          PORT: String(port),
          VOD_HOST: "127.0.0.1",
          VOD_DATA_DIR: dir,
          // Quick to start; the embedded database's process follows its host (lifecycle.test.ts).
          VOD_STORAGE: "memory",
          VOD_LOG_LEVEL: "info",
        },
        stdio: "ignore",
      });
      await waitUntil(
        () =>
          fetch(`http://127.0.0.1:${port}/healthz`).then(
            (r) => r.status === 200,
            () => false,
          ),
        "vod serve to serve",
        60_000,
      );
      tree = treeOf(shell.pid ?? 0);
      expect(tree.length).toBe(2); // sh and node
      process.kill(shell.pid ?? 0, "SIGKILL");
      await waitUntil(() => !tree.some(running), "the orphaned host to stop", 30_000).catch(() => undefined);
      expect(tree.filter(running)).toEqual([]);
      const log = logLines(await readFile(logFile, "utf8"));
      expect(log.find((line) => line.msg === "draining")?.signal).toBe("parent exited");
      expect(log.some((line) => line.msg === "stopped")).toBe(true);
    } finally {
      for (const pid of tree.filter(running)) process.kill(pid, "SIGKILL");
      await rm(dir, { recursive: true, force: true });
    }
  }, 90_000);
});

const { databaseUrl } = testServices();
const schemas = temporarySchemas(databaseUrl ?? "", "vod_shutdown");
describe.skipIf(databaseUrl === null)(
  suiteName("npm start on a postgres server", databaseUrl !== null, "VOD_TEST_DATABASE_URL"),
  () => {
    describeShutdown(
      "SIGTERM drains and leaves nothing",
      () => ({ VOD_DATABASE_URL: databaseUrl ?? "", VOD_DATABASE_SCHEMA: schemas.fresh() }),
      () => schemas.dropAll(),
    );
  },
);

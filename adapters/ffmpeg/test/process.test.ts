import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Effect } from "effect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runTool } from "../src/process.js";

describe("runTool", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "vod-run-tool-"));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  // What a SIGTERM to the host's process group does to a tool caught between its fork and its
  // setsid: it dies of the signal as it starts. The script stands in for it, dying so once.
  const diesOnce = (signal: string) => `if [ -e ran ]; then echo done; else : > ran; kill -${signal} $$; fi`;

  for (const signal of ["TERM", "INT"])
    it(`runs a tool again that a SIG${signal} ended, one the adapter never sends`, async () => {
      const run = await Effect.runPromise(
        runTool("sh", "sh", ["-c", diesOnce(signal)], { cwd: dir, captureStdout: true }),
      );
      expect(run).toMatchObject({ exitCode: 0, signal: null, stdout: "done\n" });
    });

  it("runs it once more only: a second such end is the tool's answer", async () => {
    const run = await Effect.runPromise(
      runTool("sh", "sh", ["-c", "kill -TERM $$"], { cwd: dir, captureStdout: true }),
    );
    expect(run).toMatchObject({ exitCode: null, signal: "SIGTERM" });
  });

  it("leaves any other end as it was: an exit code, or SIGKILL", async () => {
    const failed = await Effect.runPromise(runTool("sh", "sh", ["-c", "exit 3"], { cwd: dir }));
    expect(failed).toMatchObject({ exitCode: 3, signal: null });
    const killed = await Effect.runPromise(runTool("sh", "sh", ["-c", "kill -KILL $$"], { cwd: dir }));
    expect(killed).toMatchObject({ exitCode: null, signal: "SIGKILL" });
  });
});

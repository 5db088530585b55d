import { type ChildProcess, spawn } from "node:child_process";
import { MediaRejected } from "@vod/core";
import { Duration, Effect } from "effect";

/** The port's tagged error; the name stays for the modules that import it. */
export type MediaRejectedError = MediaRejected;

export const rejected = (code: MediaRejected["code"], message: string, cause?: unknown): MediaRejectedError =>
  new MediaRejected(cause === undefined ? { code, message } : { code, message, cause });

export interface ToolRun {
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  /** The last few KiB of stderr: enough for the error, bounded for a chatty tool. */
  readonly stderr: string;
}

const STDERR_TAIL = 4096;

export const succeeded = (run: ToolRun): boolean => run.exitCode === 0;

/** A one-line account of how a run ended, for error messages. */
export const describeRun = (name: string, run: ToolRun): string => {
  const how = run.signal === null ? `exited with ${run.exitCode}` : `was killed by ${run.signal}`;
  const tail = run.stderr.trim().split("\n").slice(-3).join(" | ");
  return `${name} ${how}${tail === "" ? "" : `: ${tail}`}`;
};

/**
 * Runs a tool without a shell. Fails (processing_error) only when it cannot be started or runs past
 * `timeoutMs`; how it exited is for the caller to judge. Interrupting the effect kills the child and
 * waits for it to be gone, so scratch files can be removed right after. `env` is added to this
 * process's environment for the child alone: the way to hand it a secret, which on the command line
 * any local user could read (`ps`, `/proc/<pid>/cmdline`).
 */
export const runTool = (
  name: string,
  command: string,
  args: ReadonlyArray<string>,
  options: {
    readonly cwd?: string;
    readonly captureStdout?: boolean;
    readonly timeoutMs?: number;
    readonly env?: Readonly<Record<string, string>>;
  } = {},
): Effect.Effect<ToolRun, MediaRejectedError> => {
  const run = Effect.async<ToolRun, MediaRejectedError>((resume) => {
    let child: ChildProcess;
    try {
      child = spawn(command, args, {
        cwd: options.cwd,
        ...(options.env === undefined ? {} : { env: { ...process.env, ...options.env } }),
        stdio: ["ignore", options.captureStdout ? "pipe" : "ignore", "pipe"],
        windowsHide: true,
        // A process group of its own: SIGTERM or SIGINT to the host's group (a supervisor, Ctrl-C)
        // would kill the tool mid-run, failing the attempt the host is draining. The host ends
        // its tools itself (interruption below) when its grace runs out.
        detached: true,
      });
    } catch (cause) {
      resume(Effect.fail(rejected("processing_error", `Could not start ${name} (${command})`, cause)));
      return;
    }
    let settled = false;
    let closed = false;
    const stdout: Buffer[] = [];
    let stderr = "";
    child.stdout?.on("data", (chunk: Buffer) => stdout.push(chunk));
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      stderr = (stderr + chunk).slice(-STDERR_TAIL);
    });
    child.once("error", (cause) => {
      if (settled) return;
      settled = true;
      resume(Effect.fail(rejected("processing_error", `Could not run ${name} (${command})`, cause)));
    });
    child.once("close", (exitCode, signal) => {
      closed = true;
      if (settled) return;
      settled = true;
      resume(Effect.succeed({ exitCode, signal, stdout: Buffer.concat(stdout).toString("utf8"), stderr }));
    });
    return Effect.async<void>((done) => {
      settled = true;
      if (closed || child.pid === undefined) {
        done(Effect.void);
        return;
      }
      child.once("close", () => done(Effect.void));
      child.kill("SIGKILL");
    });
  });
  const timed =
    options.timeoutMs === undefined
      ? run
      : run.pipe(
          Effect.timeoutFail({
            duration: Duration.millis(options.timeoutMs),
            onTimeout: () => rejected("processing_error", `${name} ran longer than ${options.timeoutMs} ms`),
          }),
        );
  // The child is in the host's process group from its fork until its setsid, with every signal
  // blocked: a SIGTERM or SIGINT sent to that group in between (a supervisor stopping the host
  // just as a tool starts, seen under load as "ffmpeg -codecs was killed by SIGTERM") is
  // delivered as it execs. This adapter never sends either (it ends its tools with SIGKILL), so
  // such an end is the host's stop, not the tool's verdict: it runs once more, and the drain
  // ends that run as it ends any other.
  return Effect.flatMap(timed, (result) =>
    result.signal === "SIGTERM" || result.signal === "SIGINT" ? timed : Effect.succeed(result),
  );
};

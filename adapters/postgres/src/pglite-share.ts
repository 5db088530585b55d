import { createHash } from "node:crypto";
import { mkdirSync, realpathSync, rmSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { basename, dirname, join } from "node:path";
import { deserialize, serialize } from "node:v8";

/**
 * One process opens a PGlite data directory; others reach it through that process. The owner
 * listens on a local socket named after the directory, which is also the lock: on Linux an
 * abstract socket (`\0...`), which the kernel frees when its process dies however it dies, so
 * no stale lock outlives a crash and nothing needs cleaning. Elsewhere a socket file beside the
 * directory, which a dead owner leaves behind: one that refuses connections is stale and is
 * replaced.
 */
export const shareAddress = (dataDir: string) => {
  mkdirSync(dataDir, { recursive: true });
  const real = realpathSync(dataDir);
  if (process.platform === "linux")
    return `\0vod-pglite-${createHash("sha256").update(real).digest("hex").slice(0, 40)}`;
  // Beside the directory, not in it: PGlite's copies of it (`dumpDataDir`) take every file.
  return join(dirname(real), `.${basename(real)}.vod.sock`);
};

/**
 * Where the owner keeps the key other processes must show before their first query: an abstract
 * socket has no file permissions, so any local user could connect to it. The key file is readable
 * by the data directory's user only, as the database's own files are. Beside the directory.
 */
export const shareKeyPath = (dataDir: string) => {
  const real = realpathSync(dataDir);
  return join(dirname(real), `.${basename(real)}.vod-key`);
};

/** The data directory is another process's: it says which, for the message to the operator. */
export class DataDirectoryInUse extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
    readonly command: string,
  ) {
    super(`the data directory ${dataDir} is in use by process ${pid} (${command}): stop that process first`);
    this.name = "DataDirectoryInUse";
  }
}

/** Length-prefixed V8-serialized messages, the same serialization as the host's IPC to the child. */
export const frame = (message: unknown) => {
  const body = serialize(message);
  const head = Buffer.allocUnsafe(4);
  head.writeUInt32BE(body.length);
  return Buffer.concat([head, body]);
};

/** Calls `onMessage` with each whole message that arrives on `socket`. */
export const readFrames = (socket: Socket, onMessage: (message: unknown) => void) => {
  let pending: Buffer = Buffer.alloc(0);
  socket.on("data", (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 4) {
      const size = pending.readUInt32BE(0);
      if (pending.length < 4 + size) break;
      const body = pending.subarray(4, 4 + size);
      pending = pending.subarray(4 + size);
      onMessage(deserialize(body));
    }
  });
};

/** Who holds the directory, as its owner answers a `hello`. */
export interface Holder {
  readonly pid: number;
  readonly command: string;
  /** Whether it serves queries to other processes (the host's database process does). */
  readonly shares: boolean;
}

/**
 * Connects to the owner of `address`, if any: the socket and what it said of itself, or
 * undefined when nothing listens (no owner, or on a socket file, a dead one's).
 */
export const reachOwner = (
  address: string,
): Promise<{ readonly socket: Socket; readonly holder: Holder } | undefined> =>
  new Promise((resolve, reject) => {
    const socket = connect(address);
    let settled = false;
    const settle = (value: { socket: Socket; holder: Holder } | undefined, error?: Error) => {
      if (settled) return;
      settled = true;
      if (error) reject(error);
      else resolve(value);
    };
    socket.once("error", (error: NodeJS.ErrnoException) => {
      socket.destroy();
      if (error.code === "ECONNREFUSED" || error.code === "ENOENT") settle(undefined);
      else settle(undefined, error);
    });
    socket.once("close", () => settle(undefined));
    readFrames(socket, (message) => {
      const replies = message as ReadonlyArray<{ readonly id?: number; readonly result?: Holder }>;
      const hello = replies.find((r) => r.id === 0)?.result;
      if (!hello) return;
      clearTimeout(silent);
      socket.removeAllListeners("data");
      socket.removeAllListeners("close");
      socket.removeAllListeners("error");
      settle({ socket, holder: hello });
    });
    // An owner answers at once, even while its database opens; one that does not is not ours.
    const silent = setTimeout(() => {
      socket.destroy();
      settle(undefined, new Error(`${address.replace("\0", "@")} did not answer as a vod database process`));
    }, 10_000);
    socket.once("close", () => clearTimeout(silent));
    socket.once("connect", () => socket.write(frame([{ id: 0, op: "hello" }])));
  });

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
};

/** How long a database process whose owner died may take to close and let go. */
const ORPHAN_GRACE_MS = 15_000;

/**
 * The owner of `address`, as `reachOwner`, but not one whose owning process is dead: its
 * database process closes and lets go of the directory on its own (pglite-child.ts), so that
 * is waited for, a restart straight after a crash is not refused in the name of the dead.
 */
export const liveOwner = async (address: string) => {
  const until = Date.now() + ORPHAN_GRACE_MS;
  for (;;) {
    const owner = await reachOwner(address);
    if (!owner || alive(owner.holder.pid) || Date.now() > until) return owner;
    owner.socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
};

/**
 * Listens on `address` for the data directory: resolves with the server once it holds it, or
 * rejects with `DataDirectoryInUse` naming the owner.
 */
export const holdDirectory = async (dataDir: string, address: string, server: Server): Promise<Server> => {
  for (let attempt = 0; ; attempt++) {
    const taken = await new Promise<boolean>((resolve, reject) => {
      const onError = (error: NodeJS.ErrnoException) => {
        server.off("listening", onListening);
        if (error.code === "EADDRINUSE") resolve(false);
        else reject(error);
      };
      const onListening = () => {
        server.off("error", onError);
        resolve(true);
      };
      server.once("error", onError);
      server.once("listening", onListening);
      server.listen(address);
    });
    if (taken) return server;
    const owner = await liveOwner(address);
    if (owner) {
      owner.socket.destroy();
      throw new DataDirectoryInUse(dataDir, owner.holder.pid, owner.holder.command);
    }
    // Let go meanwhile, or a socket file whose owner died (not on Linux, where the address goes
    // with its process).
    if (attempt > 2) throw new Error(`cannot listen on ${address}`);
    if (address.startsWith("\0")) continue;
    rmSync(address, { force: true });
  }
};

/** The name of what runs in this process, for `DataDirectoryInUse`. */
export const commandLine = () =>
  [process.argv[1]?.split("/").pop(), ...process.argv.slice(2)].filter(Boolean).join(" ") || "node";

/**
 * Holds the directory for PGlite opened in this process: others are told who holds it and that
 * it shares nothing. Released by `release`, or by the process's end.
 */
export const holdHere = async (dataDir: string) => {
  const holder: Holder = { pid: process.pid, command: commandLine(), shares: false };
  const server = createServer((socket) => {
    readFrames(socket, (message) => {
      const hello = (message as ReadonlyArray<{ id: number; op: string }>).find((r) => r.op === "hello");
      if (hello) socket.end(frame([{ id: hello.id, ok: true, result: holder }]));
    });
    socket.on("error", () => socket.destroy());
  });
  await holdDirectory(dataDir, shareAddress(dataDir), server);
  // The process may end while it holds the directory: the kernel lets go of it then.
  server.unref();
  return {
    release: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
};

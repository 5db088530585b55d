import type { HostConfig } from "./config.js";

/**
 * How `vod` ends when it cannot start for a reason the operator fixes: one line naming the
 * variable, no stack, and an exit code of its own (README "Exit codes"; the numbers are those of
 * BSD's sysexits.h where one fits).
 */
export const EXIT = {
  /** A variable's value is invalid (PORT=abc, a URL that is no URL, a missing companion). */
  config: 78,
  /** The database server cannot be reached: connection refused, unknown host, timed out. */
  unreachable: 69,
  /** The database server refuses the credentials (no such role, wrong password, pg_hba). */
  refused: 77,
  /** The database named in VOD_DATABASE_URL does not exist on the server. */
  noDatabase: 66,
  /** PORT (or VOD_OPS_PORT) cannot be bound: in use, or not permitted. */
  port: 71,
} as const;

export interface StartFailure {
  readonly line: string;
  readonly code: number;
}

/** `host:port/database` of a database URL: the password never reaches a line. */
const whereIs = (url: string) => {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || "5432"}${u.pathname}`;
  } catch {
    return "the server";
  }
};

const NETWORK: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ENOTFOUND: "unknown host",
  EAI_AGAIN: "host name lookup failed",
  ETIMEDOUT: "timed out",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  ECONNRESET: "connection reset",
};

/** The PostgreSQL SQLSTATEs of a connection the server refused for its credentials. */
const AUTH = new Set(["28000", "28P01"]);

/**
 * The start failure an operator acts on, or undefined for a defect (left to crash with its stack).
 * `config` is what was loaded, when loading got that far.
 */
export const startFailure = (error: unknown, config: HostConfig | undefined): StartFailure | undefined => {
  if (!(error instanceof Error)) return undefined;
  const { code, syscall, port } = error as Error & { code?: unknown; syscall?: unknown; port?: unknown };
  if (syscall === "listen" && (code === "EADDRINUSE" || code === "EACCES")) {
    const name = config?.opsPort !== undefined && port === config.opsPort ? "VOD_OPS_PORT" : "PORT";
    const why = code === "EADDRINUSE" ? "is in use by another process" : "may not be bound by this user";
    return { line: `${name}: port ${String(port)} ${why}; choose another`, code: EXIT.port };
  }
  const url = config?.database.url;
  if (url === undefined || config?.storage === "memory") return undefined;
  const where = whereIs(url);
  if (typeof code === "string" && code in NETWORK && (syscall === "connect" || syscall === "getaddrinfo"))
    return {
      line: `VOD_DATABASE_URL: cannot reach the database at ${where} (${NETWORK[code]}); is the server running, and is the URL right?`,
      code: EXIT.unreachable,
    };
  if (code === "3D000")
    return {
      line: `VOD_DATABASE_URL: ${error.message} (at ${where}); create it (createdb) or name an existing one`,
      code: EXIT.noDatabase,
    };
  if (typeof code === "string" && AUTH.has(code))
    return {
      line: `VOD_DATABASE_URL: the database refused the connection: ${error.message} (at ${where})`,
      code: EXIT.refused,
    };
  return undefined;
};

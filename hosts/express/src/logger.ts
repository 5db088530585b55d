import { type Logger, type LoggerOptions, pino } from "pino";
import pretty from "pino-pretty";

export type { Logger };

/** pino's number for `warn`. */
const WARN = 40;

/**
 * A warn is a dependency refusing, not a defect (host README, "Levels say who must act"): its
 * error is logged as its type, message and code, without the stack, which only errors carry.
 */
const warnWithoutStack: NonNullable<LoggerOptions["hooks"]>["logMethod"] = function (args, method, level) {
  const [fields] = args as unknown[];
  if (level === WARN && typeof fields === "object" && fields !== null && "err" in fields) {
    const { err, ...rest } = fields as { err: unknown };
    if (err instanceof Error) {
      const code = (err as { code?: unknown }).code;
      const brief = { type: err.name, message: err.message, ...(code === undefined ? {} : { code }) };
      (args as unknown[])[0] = { ...rest, err: brief };
    }
  }
  return method.apply(this, args);
};

/**
 * Logs as JSON lines, or, on a terminal (or with `format: "pretty"`), as pino-pretty's readable
 * lines: local time, level, message, fields. Credentials never reach a line: request logs carry
 * no headers or bodies, and these paths are censored should an object holding them ever be logged.
 */
export const createLogger = (
  level: string,
  destination?: NodeJS.WritableStream,
  format: "json" | "pretty" = destination === undefined && process.stdout.isTTY ? "pretty" : "json",
): Logger =>
  pino(
    {
      level,
      base: { service: "vod" },
      hooks: { logMethod: warnWithoutStack },
      // A warn's error arrives here already brief (`warnWithoutStack`): kept as it is.
      serializers: { err: (err: unknown) => (err instanceof Error ? pino.stdSerializers.err(err) : err) },
      redact: {
        paths: [
          "*.authorization",
          "*.password",
          "*.current_password",
          "*.new_password",
          "*.refresh_token",
          "*.access_token",
          "*.id_token",
          "*.key",
          '*["x-api-key"]',
        ],
        censor: "[redacted]",
      },
    },
    format === "pretty"
      ? pretty({
          destination: destination ?? 1,
          sync: true,
          colorize: destination === undefined && process.stdout.isTTY === true,
          translateTime: "SYS:HH:MM:ss.l",
          ignore: "pid,hostname,service",
        })
      : (destination as pino.DestinationStream | undefined),
  );

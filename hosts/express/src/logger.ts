import { type Logger, pino } from "pino";

export type { Logger };

/**
 * JSON logs. Credentials never reach a line: request logs carry no headers or bodies, and these
 * paths are censored should an object holding them ever be logged.
 */
export const createLogger = (level: string, destination?: NodeJS.WritableStream): Logger =>
  pino(
    {
      level,
      base: { service: "vod" },
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
    destination as pino.DestinationStream | undefined,
  );

import { parseArgs } from "node:util";
import { createGcsTestServer } from "./index.js";

const USAGE = `usage: gcs-test-server [--port N] [--host 127.0.0.1] [--bucket NAME] [--min-part-size BYTES]

Prints one JSON line {"endpoint","bucket","credentials","hmac_access_id","hmac_secret"} once listening; stops on SIGTERM or SIGINT.`;

const integer = (name: string, text: string | undefined, fallback: number): number => {
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text)) throw new Error(`--${name} must be a non-negative integer, got ${text}`);
  return Number(text);
};

/** Runs the server until a signal; resolves once it has closed. */
export const main = async (argv: ReadonlyArray<string>): Promise<void> => {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      port: { type: "string" },
      host: { type: "string" },
      bucket: { type: "string" },
      "min-part-size": { type: "string" },
      help: { type: "boolean" },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const server = await createGcsTestServer({
    port: integer("port", values.port, 0),
    host: values.host ?? "127.0.0.1",
    ...(values.bucket !== undefined ? { bucket: values.bucket } : {}),
    minPartSize: integer("min-part-size", values["min-part-size"], 5 * 1024 * 1024),
  });
  process.stdout.write(
    `${JSON.stringify({
      endpoint: server.endpoint,
      bucket: server.bucket,
      credentials: server.credentialsPath,
      hmac_access_id: server.hmacKey.accessId,
      hmac_secret: server.hmacKey.secret,
    })}\n`,
  );
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off("SIGTERM", stop);
      process.off("SIGINT", stop);
      resolve();
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
  });
  await server.close();
};

import { describeHostileInput, suiteName, testServices } from "@vod/contract-tests";
import { describe } from "vitest";
import { postgresSubject } from "./http-subjects.js";

// The server Postgres set as the host composes it in production (pg-boss jobs, filesystem
// objects), with a worker (and the fake media processor) so that ready assets exist.
const { databaseUrl } = testServices();

describe.skipIf(databaseUrl === null)(
  suiteName("postgres server", databaseUrl !== null, "VOD_TEST_DATABASE_URL"),
  () => {
    const makeSubject = postgresSubject(databaseUrl ?? "");
    describeHostileInput("postgres", (env = {}) => makeSubject({ VOD_WORKER_CONCURRENCY: "1", ...env }), {
      runs: 8,
    });
  },
);

import { describeHttpApi, suiteName, testServices } from "@vod/contract-tests";
import { describe } from "vitest";
import { postgresSubject } from "./http-subjects.js";

// Server Postgres with Redis as the shared accelerator (rate limits, revocation feed), each host
// under a key prefix of its own, whose keys are deleted when the host is.
const { databaseUrl, redisUrl } = testServices();
const available = databaseUrl !== null && redisUrl !== null;

describe.skipIf(!available)(
  suiteName("postgres server + redis", available, "VOD_TEST_DATABASE_URL and VOD_TEST_REDIS_URL"),
  () => {
    describeHttpApi("postgres + redis", postgresSubject(databaseUrl ?? "", { redisUrl: redisUrl ?? "" }));
  },
);

import { describeHttpApi, suiteName, testServices } from "@vod/contract-tests";
import { describe } from "vitest";
import { postgresSubject } from "./http-subjects.js";

// The host composes its storage from VOD_DATABASE_URL exactly as in production, one schema per
// host; the backdoor reads that schema over a connection of its own.
const { databaseUrl } = testServices();

describe.skipIf(databaseUrl === null)(
  suiteName("postgres server", databaseUrl !== null, "VOD_TEST_DATABASE_URL"),
  () => {
    describeHttpApi("postgres", postgresSubject(databaseUrl ?? ""));
  },
);

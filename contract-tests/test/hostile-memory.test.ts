import { describeHostileInput } from "@vod/contract-tests";
import { memorySubject } from "./http-subjects.js";

// The memory set, with a worker (and the fake media processor) so that ready assets exist.
const makeSubject = memorySubject();
describeHostileInput("memory", (env = {}) => makeSubject({ VOD_WORKER_CONCURRENCY: "1", ...env }), {
  runs: 10,
});

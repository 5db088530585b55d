import { describeHttpApi } from "@vod/contract-tests";
import { memorySubject } from "./http-subjects.js";

describeHttpApi("memory", memorySubject());

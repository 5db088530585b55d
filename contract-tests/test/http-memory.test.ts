import { describeDocumentConformance, describeHttpApi, recordExchanges } from "@vod/contract-tests";
import { memorySubject } from "./http-subjects.js";

// Every exchange of the suite is held against the OpenAPI document after it.
const recording = recordExchanges();
describeHttpApi("memory", memorySubject());
describeDocumentConformance(memorySubject(), recording);

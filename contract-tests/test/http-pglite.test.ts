import { describeHttpApi } from "@vod/contract-tests";
import { pgliteSubject } from "./http-subjects.js";

// The embedded default, what `npm start` runs with no VOD_DATABASE_URL: PGlite on the data
// directory. It needs no service, so it is never skipped.
describeHttpApi("embedded pglite", pgliteSubject());

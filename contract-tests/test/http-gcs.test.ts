import { describeHttpApi } from "@vod/contract-tests";
import { describe } from "vitest";
import { gcsSubject } from "./http-subjects.js";

describe("on a GCS bucket (the GCS test server)", () => {
  describeHttpApi("memory + gcs", gcsSubject());
});

import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { generatedFile, generateTypes } from "../scripts/generate.js";

describe("the checked-in types of @vod/client", () => {
  it("are what the generator makes from today's OpenAPI document (else: npm run -w @vod/client generate)", async () => {
    const checkedIn = await readFile(generatedFile, "utf8");
    const fresh = await generateTypes();
    expect(fresh).toContain('"createAsset": {');
    expect(
      checkedIn === fresh,
      "src/generated/openapi.ts is stale: run `npm run -w @vod/client generate`",
    ).toBe(true);
  });
});

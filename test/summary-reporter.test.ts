import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const fixture = fileURLToPath(new URL("./fixtures/skipped-suites/", import.meta.url));
// vitest's own command, as `npm test` runs it (its package exports no path to it).
const vitest = fileURLToPath(new URL("../node_modules/vitest/vitest.mjs", import.meta.url));

it("names each suite skipped for a missing service, with the variable that turns it on, before the totals", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [vitest, "run", "--root", fixture], {
    env: { ...process.env, NO_COLOR: "1" },
  });
  expect(stdout).toBe(
    [
      "",
      "Skipped 2 suites; to run them, set VOD_TEST_DATABASE_URL or run a Docker engine:",
      "  services.fixture.ts > contract suites [postgres]",
      "  services.fixture.ts > the HTTP suite [postgres]",
      "Skipped 1 suite; to run them, set VOD_TEST_REDIS_URL or run a Docker engine:",
      "  services.fixture.ts > rate limits [redis]",
      "",
      "Tests: 1 passed, 0 failed, 4 skipped",
      "",
    ].join("\n"),
  );
}, 60_000);

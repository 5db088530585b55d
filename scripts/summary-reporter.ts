import type { Reporter, TestCase, TestModule, TestSuite } from "vitest/node";

/** Whether `test` never ran because a suite around it failed (a `beforeAll` that threw). */
const failedAround = (test: TestCase) => {
  let parent: TestSuite | TestModule = test.parent;
  while (parent.errors().length === 0) {
    if (parent.type === "module") return false;
    parent = parent.parent;
  }
  return true;
};

/** How a suite skipped for a missing service names itself: `<name> (skipped: set VOD_TEST_… …)`. */
const SKIPPED = /^(.*) \(skipped: (.+)\)$/;

/**
 * The suites skipped for a missing service, each with its file and what turns it on, grouped by
 * that: a run that skipped the server-Postgres suites says so, and how to run them.
 */
export const skippedSuites = (modules: ReadonlyArray<TestModule>): string => {
  const byRemedy = new Map<string, string[]>();
  for (const mod of modules)
    for (const suite of mod.children.allSuites()) {
      const named = SKIPPED.exec(suite.name);
      if (named === null || suite.state() !== "skipped") continue;
      // Only the outermost: a skipped suite's inner suites are skipped with it.
      if (suite.parent.type === "suite" && SKIPPED.test(suite.parent.name)) continue;
      const [, name = "", remedy = ""] = named;
      const list = byRemedy.get(remedy) ?? [];
      list.push(`${mod.relativeModuleId} > ${name}`);
      byRemedy.set(remedy, list);
    }
  if (byRemedy.size === 0) return "";
  const lines = [...byRemedy].flatMap(([remedy, suites]) => [
    `Skipped ${suites.length} suite${suites.length === 1 ? "" : "s"}; to run them, ${remedy}:`,
    ...suites.map((suite) => `  ${suite}`),
  ]);
  return `\n${lines.join("\n")}\n`;
};

/**
 * Ends the run with one plain line, `Tests: N passed, N failed, N skipped`, which CI reads
 * whatever the runner's own format. Adapter sets skipped for a missing service are counted there
 * and named by their suites. A test left unrun by a suite whose hook failed counts as failed:
 * vitest marks it skipped, and the line would otherwise read as nothing failed.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>) {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const mod of modules)
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") passed++;
        else if (state === "failed" || failedAround(test)) failed++;
        else skipped++;
      }
    const failedModules = modules.filter((m) => m.state() === "failed" && m.children.size === 0).length;
    process.stdout.write(skippedSuites(modules));
    process.stdout.write(`\nTests: ${passed} passed, ${failed + failedModules} failed, ${skipped} skipped\n`);
  }
}

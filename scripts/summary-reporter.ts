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
    process.stdout.write(`\nTests: ${passed} passed, ${failed + failedModules} failed, ${skipped} skipped\n`);
  }
}

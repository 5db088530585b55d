import type { Reporter, TestModule } from "vitest/node";

/**
 * Ends the run with one plain line, `Tests: N passed, N failed, N skipped`, which CI reads
 * whatever the runner's own format. Adapter sets skipped for a missing service are counted there
 * and named by their suites.
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
        else if (state === "failed") failed++;
        else skipped++;
      }
    const failedModules = modules.filter((m) => m.state() === "failed" && m.children.size === 0).length;
    process.stdout.write(`\nTests: ${passed} passed, ${failed + failedModules} failed, ${skipped} skipped\n`);
  }
}

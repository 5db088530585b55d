import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const root = fileURLToPath(new URL("..", import.meta.url));

/** The documentation a clone has: the READMEs of the root and of every package, and docs/. */
const documents = () => {
  const packages = [
    "core",
    "http",
    "contract-tests",
    "test-services",
    "bench",
    "adapters",
    "hosts",
    "examples",
  ];
  const found = ["README.md", ...readdirSync(join(root, "docs")).map((f) => join("docs", f))];
  for (const dir of packages) {
    if (existsSync(join(root, dir, "README.md"))) found.push(join(dir, "README.md"));
    for (const sub of readdirSync(join(root, dir), { withFileTypes: true }))
      if (sub.isDirectory() && existsSync(join(root, dir, sub.name, "README.md")))
        found.push(join(dir, sub.name, "README.md"));
  }
  return found.filter((f) => f.endsWith(".md"));
};

it("points at nothing outside the repository, and every relative link resolves", () => {
  const problems: string[] = [];
  for (const doc of documents()) {
    const text = readFileSync(join(root, doc), "utf8");
    if (text.includes("../shared")) problems.push(`${doc}: names ../shared, which a clone does not have`);
    for (const [, target = ""] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target) || target.startsWith("#")) continue;
      const file = join(dirname(join(root, doc)), target.split("#")[0] ?? "");
      if (!existsSync(file)) problems.push(`${doc}: ${target} (${relative(root, file)}) does not exist`);
      else if (relative(root, file).startsWith(".."))
        problems.push(`${doc}: ${target} is outside the repository`);
    }
  }
  expect(problems).toEqual([]);
  expect(documents()).toContain(join("docs", "api.md"));
});

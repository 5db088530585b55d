import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

// No module of a workspace's `src/` may import itself back, through any chain of imports, type-only
// ones and imports across packages (`@vod/...`, followed to that package's `src/`) included: a
// circle makes the order modules load in matter, and hides which of them is the lower layer.
// The imports are read by TypeScript's own scanner (`preProcessFile`), which skips comments and
// template strings.

const root = fileURLToPath(new URL("..", import.meta.url));

interface Manifest {
  readonly name: string;
  readonly workspaces?: ReadonlyArray<string>;
  readonly main?: string;
  readonly exports?: Readonly<Record<string, string | { readonly default?: string }>>;
}

const manifest = (dir: string): Manifest => JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));

/** The workspaces' folders, from the root manifest (a trailing `/*` means every folder in it). */
const workspaces = (manifest(root).workspaces ?? []).flatMap((pattern) =>
  pattern.endsWith("/*")
    ? readdirSync(join(root, pattern.slice(0, -2)), { withFileTypes: true })
        .filter(
          (e) => e.isDirectory() && existsSync(join(root, pattern.slice(0, -2), e.name, "package.json")),
        )
        .map((e) => join(root, pattern.slice(0, -2), e.name))
    : [join(root, pattern)],
);

const sources = (dir: string): string[] =>
  existsSync(dir)
    ? readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory()
          ? sources(join(dir, e.name))
          : /\.(?:ts|tsx|mts|mjs|js)$/.test(e.name) && !e.name.endsWith(".d.ts")
            ? [join(dir, e.name)]
            : [],
      )
    : [];

/** A file as TypeScript finds it from an emitted name: `x.js` is `x.ts`, a folder its index. */
const sourceFile = (path: string): string | undefined =>
  [
    path,
    path.replace(/\.js$/, ".ts"),
    path.replace(/\.js$/, ".tsx"),
    path.replace(/\.mjs$/, ".mts"),
    `${path}.ts`,
    join(path, "index.ts"),
  ].find((candidate) => existsSync(candidate) && statSync(candidate).isFile());

/** `@vod/name[/subpath]` to the source of the entry its package exports there (`dist/x.js` is `src/x.ts`). */
const packages = new Map(workspaces.map((dir) => [manifest(dir).name, dir] as const));
const packageEntry = (specifier: string): string | undefined => {
  const [scope, name, ...rest] = specifier.split("/");
  const dir = packages.get(`${scope}/${name}`);
  if (dir === undefined) return undefined;
  const { exports, main } = manifest(dir);
  const target = exports?.[rest.length === 0 ? "." : `./${rest.join("/")}`];
  const emitted =
    typeof target === "string" ? target : (target?.default ?? (rest.length === 0 ? main : undefined));
  if (emitted === undefined) return undefined;
  return sourceFile(join(dir, emitted.replace(/^\.?\/?dist\//, "src/")));
};

const importsOf = (file: string): string[] =>
  ts
    .preProcessFile(readFileSync(file, "utf8"), true, true)
    .importedFiles.map(({ fileName }) =>
      fileName.startsWith(".") ? sourceFile(resolve(dirname(file), fileName)) : packageEntry(fileName),
    )
    .filter((target): target is string => target !== undefined);

/** Every group of modules that import one another, each sorted, by Tarjan's strongly connected components. */
const circlesOf = (graph: ReadonlyMap<string, ReadonlyArray<string>>): string[][] => {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  const visit = (node: string) => {
    index.set(node, index.size);
    low.set(node, index.get(node) as number);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node) as number, low.get(next) as number));
      } else if (onStack.has(next))
        low.set(node, Math.min(low.get(node) as number, index.get(next) as number));
    }
    if (low.get(node) !== index.get(node)) return;
    const group: string[] = [];
    let member: string;
    do {
      member = stack.pop() as string;
      onStack.delete(member);
      group.push(member);
    } while (member !== node);
    if (group.length > 1 || (graph.get(node) ?? []).includes(node)) circles.push(group.sort());
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return circles;
};

describe("import circles", () => {
  const files = workspaces.flatMap((dir) => sources(join(dir, "src")));
  const graph = new Map(
    files.map(
      (file) => [relative(root, file), importsOf(file).map((target) => relative(root, target))] as const,
    ),
  );

  it("reads the imports of every workspace's src (the scan works)", () => {
    expect(files.length).toBeGreaterThan(100);
    // A relative import, a type-only one, and one across packages.
    expect(graph.get("adapters/postgres/src/pg-pool.ts")).toContain("adapters/postgres/src/lanes.ts");
    expect(graph.get("adapters/postgres/src/tenancy.ts")).toContain("adapters/postgres/src/sql.ts");
    expect(graph.get("hosts/express/src/compose.ts")).toContain("core/src/index.ts");
  });

  it("finds a circle where there is one", () => {
    const made = new Map([
      ["a", ["b"]],
      ["b", ["c"]],
      ["c", ["a", "d"]],
      ["d", []],
      ["e", ["e"]],
    ]);
    expect(circlesOf(made)).toEqual([["a", "b", "c"], ["e"]]);
  });

  it("has none in the workspace", () => {
    expect(circlesOf(graph)).toEqual([]);
  });
});

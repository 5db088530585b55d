import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const src = fileURLToPath(new URL("../src", import.meta.url));

const files = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );

/**
 * The core may import only these. Everything else, an I/O module of Node or a vendor SDK, belongs
 * behind a port. node:crypto is pure computation (hashes, HMAC); randomness still comes from Ids.
 */
const allowed = new Set(["effect", "inversify", "node:crypto"]);

describe("@vod/core purity", () => {
  const imports = files(src).flatMap((file) =>
    [
      ...readFileSync(file, "utf8").matchAll(
        /(?:^|\n)\s*(?:import|export)[^"']*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g,
      ),
    ].map((m) => ({ file: relative(src, file), specifier: (m[1] ?? m[2]) as string })),
  );

  it("reads some imports (the scan works)", () => {
    expect(imports.length).toBeGreaterThan(20);
    expect(imports.some((i) => i.specifier === "effect")).toBe(true);
  });

  it("imports no vendor SDK and no I/O module", () => {
    const foreign = imports.filter((i) => !i.specifier.startsWith(".") && !allowed.has(i.specifier));
    expect(foreign).toEqual([]);
  });

  it("uses no global I/O either (fetch, process, timers)", () => {
    const offenders = files(src).filter((file) =>
      /\b(?:fetch|setTimeout|setInterval|require)\s*\(|\bprocess\./.test(
        readFileSync(file, "utf8").replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, ""),
      ),
    );
    expect(offenders.map((f) => relative(src, f))).toEqual([]);
  });
});

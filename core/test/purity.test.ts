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

  /**
   * HTTP lives in `@vod/http`: a path of the API, a header, a status line or a framework's request
   * object here means a use case builds what the catalog should (its `Links` port makes URLs).
   */
  const httpWords: ReadonlyArray<RegExp> = [
    /\/v1\//,
    /\b(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) \//,
    /\b(?:content-(?:type|length|range)|cache-control|idempotency-key|retry-after|x-request-id|www-authenticate|accept-ranges)\b/i,
    /\bstatus code\b/i,
    /\b(?:req|res)\.(?:headers|body|params|query|status|setHeader|end|json|send)\b/,
  ];

  it("speaks no HTTP: no paths, headers, status lines or request objects", () => {
    const found = files(src).flatMap((file) =>
      readFileSync(file, "utf8")
        .split("\n")
        .flatMap((line, n) =>
          httpWords.some((word) => word.test(line))
            ? [`${relative(src, file)}:${n + 1}: ${line.trim()}`]
            : [],
        ),
    );
    expect(found).toEqual([]);
  });

  it("would notice HTTP words (the scan works)", () => {
    const leaks = [
      'return base + "/v1/play/" + token;',
      'headers["Content-Type"]',
      "POST /v1/assets",
      "Idempotency-Key",
      "res.setHeader(name, value)",
    ];
    expect(leaks.filter((line) => !httpWords.some((word) => word.test(line)))).toEqual([]);
  });
});

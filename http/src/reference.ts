import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/**
 * The API reference at `{base_url}/docs`: the OpenAPI document rendered in the browser by Scalar's
 * standalone bundle, served from the installed npm package rather than a CDN, so the reference
 * works offline and on a private network, and shows the version of the document it is served with.
 */

/** Where the page loads its script and the document from, relative to `/docs` itself. */
export const REFERENCE_SCRIPT_PATH = "/docs/reference.js";

/**
 * The page: relative URLs (`docs/reference.js`, `v1/openapi.json`), so that the reference works
 * under whatever prefix the API is mounted at. Scalar's web fonts come from its CDN unless told
 * otherwise; the system's fonts are used instead. The empty icon spares the browser asking for a
 * `/favicon.ico` the API does not have. The AI agent, which would send the document to Scalar, is off.
 */
export const REFERENCE_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>VOD platform API reference</title>
<link rel="icon" href="data:,">
</head>
<body>
<div id="reference"></div>
<script src="docs/reference.js"></script>
<script>
Scalar.createApiReference("#reference", {
  url: "v1/openapi.json",
  withDefaultFonts: false,
  hideClientButton: true,
  showDeveloperTools: "never",
  agent: { disabled: true },
});
</script>
</body>
</html>
`;

const require = createRequire(import.meta.url);

/** The bundle's file: the package exports its module entry only, the browser build sits beside it. */
const scriptFile = () => join(dirname(require.resolve("@scalar/api-reference")), "browser", "standalone.js");

let script: Promise<Buffer> | undefined;

/** The standalone bundle (about 5 MB), read once per process, when first asked for. */
export const referenceScript = (): Promise<Buffer> => {
  script ??= readFile(scriptFile()).catch((error: unknown) => {
    script = undefined;
    throw error;
  });
  return script;
};

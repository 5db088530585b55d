/**
 * The packages as a user outside this repository gets them: each publishable workspace packed by
 * npm, the tarballs installed into empty projects under the OS temp directory (nothing of the
 * workspace is reachable from there), and `examples/node-http` run in one of them from its own
 * copy: sign-up, an API key, a real ffmpeg-made file uploaded in parts, processed by the example's
 * worker loop, a playback session, the master playlist and a segment fetched, ffprobe reading it.
 * The other project installs every tarball, imports every entry point and runs the `vod` bin.
 *
 * Packing runs each package's `prepack` (`tsc -b`), so the tarballs hold a build of the sources.
 * Installs prefer the npm cache (`--prefer-offline`); what it lacks comes from the registry.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = fileURLToPath(new URL("..", import.meta.url));
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");

interface Manifest {
  readonly name: string;
  readonly version: string;
  readonly private?: boolean;
  readonly license?: string;
  readonly engines?: Record<string, string>;
  readonly exports?: Record<string, { readonly types: string; readonly default: string }>;
  readonly bin?: Record<string, string>;
  readonly dependencies?: Record<string, string>;
  readonly devDependencies?: Record<string, string>;
}

/** What the test's children see: npm's own `npm_*` variables (under `npm test`) would point a child npm at the workspace. */
const cleanEnv = (extra: Record<string, string> = {}) => ({
  ...Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith("npm_")),
  ),
  ...extra,
});

const npm = (args: ReadonlyArray<string>, cwd: string) =>
  run("npm", [...args], { cwd, env: cleanEnv(), maxBuffer: 64 * 1024 * 1024 });

/** Every workspace with its manifest, by directory. */
const workspaces = async () => {
  const { workspaces: patterns } = JSON.parse(await readFile(join(root, "package.json"), "utf8")) as {
    workspaces: string[];
  };
  const dirs: string[] = [];
  for (const pattern of patterns) {
    if (!pattern.endsWith("/*")) {
      dirs.push(pattern);
      continue;
    }
    const parent = pattern.slice(0, -2);
    for (const entry of await readdir(join(root, parent), { withFileTypes: true }))
      if (entry.isDirectory()) dirs.push(`${parent}/${entry.name}`);
  }
  return Promise.all(
    dirs.map(async (dir) => ({
      dir,
      manifest: JSON.parse(await readFile(join(root, dir, "package.json"), "utf8")) as Manifest,
    })),
  );
};

interface Packed {
  readonly dir: string;
  readonly manifest: Manifest;
  readonly tarball: string;
  readonly files: ReadonlyArray<string>;
}

let work: string;
let packed: Packed[];
let allProject: string;
let exampleProject: string;
const children: ChildProcess[] = [];

/** An empty project under `work` with these dependencies, installed. */
const install = async (name: string, manifest: object) => {
  const dir = join(work, name);
  await mkdir(dir);
  await writeFile(join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  await npm(["install", "--prefer-offline", "--no-audit", "--no-fund"], dir);
  return dir;
};

const tarballOf = (name: string) => {
  const found = packed.find((p) => p.manifest.name === name);
  if (!found) throw new Error(`${name} was not packed`);
  return `file:${found.tarball}`;
};

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "vod-packaging-"));
  const publishable = (await workspaces()).filter((w) => !w.manifest.private);
  const tarballs = join(work, "tarballs");
  await mkdir(tarballs);
  const { stdout } = await npm(
    ["pack", "--json", "--pack-destination", tarballs, ...publishable.flatMap((w) => ["-w", w.dir])],
    root,
  );
  const reports = JSON.parse(stdout) as Array<{
    name: string;
    filename: string;
    files: Array<{ path: string }>;
  }>;
  packed = publishable.map((w) => {
    const report = reports.find((r) => r.name === w.manifest.name);
    if (!report) throw new Error(`npm pack made nothing for ${w.dir}`);
    return { ...w, tarball: join(tarballs, report.filename), files: report.files.map((f) => f.path) };
  });

  const example = JSON.parse(
    await readFile(join(root, "examples/node-http/package.json"), "utf8"),
  ) as Manifest;
  const fromTarballs = (deps: Record<string, string> = {}) =>
    Object.fromEntries(
      Object.entries(deps).map(([name, range]) => [name, name.startsWith("@vod/") ? tarballOf(name) : range]),
    );
  [allProject, exampleProject] = await Promise.all([
    install("all", {
      name: "all-packages",
      private: true,
      type: "module",
      dependencies: Object.fromEntries(packed.map((p) => [p.manifest.name, tarballOf(p.manifest.name)])),
    }),
    // The example's own manifest, its @vod/* dependencies taken from the tarballs, and theirs
    // too (overrides): until the packages are on a registry, a dependency of a dependency
    // (@vod/http's @vod/player) is found nowhere else.
    install("node-http", {
      ...example,
      dependencies: fromTarballs(example.dependencies),
      devDependencies: fromTarballs(example.devDependencies),
      overrides: Object.fromEntries(packed.map((p) => [p.manifest.name, tarballOf(p.manifest.name)])),
    }),
  ]);
  await mkdir(join(exampleProject, "src"));
  await writeFile(
    join(exampleProject, "src/server.ts"),
    await readFile(join(root, "examples/node-http/src/server.ts")),
  );
}, 300_000);

afterAll(async () => {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  if (work) await rm(work, { recursive: true, force: true });
});

/** A child started in `cwd`, its output kept; `waitFor` resolves with the first line that matches. */
const start = (command: string, args: ReadonlyArray<string>, cwd: string, env: Record<string, string>) => {
  const child = spawn(command, args, { cwd, env: cleanEnv(env), stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let output = "";
  child.stdout.on("data", (d) => {
    output += d;
  });
  child.stderr.on("data", (d) => {
    output += d;
  });
  const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const waitFor = async (pattern: RegExp, timeoutMs = 60_000) => {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const line = output.split("\n").find((l) => pattern.test(l));
      if (line) return line;
      if (child.exitCode !== null) throw new Error(`${args.join(" ")} exited early:\n${output}`);
      if (Date.now() > until) throw new Error(`${args.join(" ")} never printed ${pattern}:\n${output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  return { child, exit, waitFor, output: () => output };
};

const json = async (
  url: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
) => {
  const res = await fetch(url, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    headers: { ...(init.body === undefined ? {} : { "content-type": "application/json" }), ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  // biome-ignore lint/suspicious/noExplicitAny: JSON bodies are read field by field in assertions.
  return { status: res.status, body: (await res.json()) as any };
};

describe("the packed packages, installed outside the workspace", () => {
  it("are the core, the HTTP contract, every adapter, the clients and the host; the rest stays private", () => {
    expect(packed.map((p) => p.dir).sort()).toEqual(
      [
        "adapters/argon2",
        "adapters/ffmpeg",
        "adapters/filesystem",
        "adapters/gcs",
        "adapters/google-identity",
        "adapters/jose",
        "adapters/memory",
        "adapters/postgres",
        "adapters/prometheus",
        "adapters/redis",
        "adapters/smtp",
        "adapters/webhook-http",
        "adapters/webvtt",
        "clients/client",
        "clients/player",
        "core",
        "hosts/express",
        "http",
      ].sort(),
    );
    expect(work.startsWith(root)).toBe(false);
  });

  it("each ship their build, types and README, every export's file, and name their @vod dependencies by version", () => {
    const versions = new Map(packed.map((p) => [p.manifest.name, p.manifest.version]));
    for (const { dir, manifest, files } of packed) {
      expect({ dir, license: manifest.license, engines: manifest.engines }).toEqual({
        dir,
        license: expect.any(String),
        // The client runs wherever fetch does (DECISIONS "Client kit": Node 20 and browsers).
        engines: { node: manifest.name === "@vod/client" ? ">=20" : ">=24" },
      });
      expect(files, dir).toEqual(expect.arrayContaining(["package.json", "README.md", "dist/index.js"]));
      expect(
        files.filter((f) => f.endsWith(".tsbuildinfo") || f.startsWith("test/")),
        dir,
      ).toEqual([]);
      for (const [subpath, target] of Object.entries(manifest.exports ?? {}))
        for (const file of [target.types, target.default])
          expect(files, `${dir} ${subpath}`).toContain(file.replace(/^\.\//, ""));
      for (const file of Object.values(manifest.bin ?? {}))
        expect(files).toContain(file.replace(/^\.\//, ""));
      for (const [name, range] of Object.entries(manifest.dependencies ?? {}))
        if (name.startsWith("@vod/"))
          expect({ dir, name, range }).toEqual({ dir, name, range: versions.get(name) });
    }
  });

  it("import at every entry point from the installed tarballs, and nothing from the workspace", async () => {
    // @vod/player's root is the web component's bundle: a module for browsers (it defines a
    // custom element), which node cannot evaluate; node reaches the package by `./files`.
    const browserOnly = new Set(["@vod/player"]);
    const entries = packed.flatMap(({ manifest }) =>
      Object.keys(manifest.exports ?? {})
        .map((subpath) => manifest.name + subpath.slice(1))
        .filter((entry) => !browserOnly.has(entry)),
    );
    const script = `
      const found = {};
      for (const name of ${JSON.stringify(entries)}) {
        const module = await import(name);
        found[name] = { at: import.meta.resolve(name), exports: Object.keys(module).length };
      }
      console.log(JSON.stringify(found));`;
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], {
      cwd: allProject,
      env: cleanEnv(),
    });
    const found = JSON.parse(stdout) as Record<string, { at: string; exports: number }>;
    expect(Object.keys(found).sort()).toEqual([...entries].sort());
    for (const [name, { at, exports }] of Object.entries(found)) {
      expect(fileURLToPath(at), name).toMatch(new RegExp(`^${allProject}${sep}node_modules${sep}@vod${sep}`));
      expect(exports, name).toBeGreaterThan(0);
    }
  }, 60_000);

  it("share one copy of effect and of inversify, their peer dependencies, in each project", async () => {
    // Effects made by one copy of effect are not effects to another: a second copy fails at run time.
    for (const project of [allProject, exampleProject])
      for (const name of ["effect", "inversify"]) {
        const { stdout } = await npm(["ls", name, "--all", "--parseable"], project);
        expect(stdout.trim().split("\n"), `${name} in ${project}`).toEqual([
          join(project, "node_modules", name),
        ]);
      }
  }, 60_000);

  it("run the host's vod bin: serve, on its embedded default, answers /healthz, the OpenAPI document and a signup; SIGTERM stops it with 0", async () => {
    const usage = await run(join(allProject, "node_modules/.bin/vod"), ["help"], {
      cwd: allProject,
      env: cleanEnv(),
    });
    expect(usage.stderr).toMatch(/^usage: vod <command>/);
    const host = start(join(allProject, "node_modules/.bin/vod"), ["serve"], allProject, {
      PORT: "0",
      VOD_HOST: "127.0.0.1",
      // PGlite in a child process of the host, started from the installed package's dist.
      VOD_DATA_DIR: join(work, "host-data"),
    });
    const line = await host.waitFor(/"port":\d+.*listening/);
    const url = `http://127.0.0.1:${(JSON.parse(line) as { port: number }).port}`;
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const openapi = await json(`${url}/v1/openapi.json`);
    expect(openapi.status).toBe(200);
    expect(openapi.body.openapi).toMatch(/^3\.1\./);
    const signup = await json(`${url}/v1/auth/signup`, {
      body: { email: "host@example.com", password: "correct horse battery" },
    });
    expect(signup.status).toBe(201);
    expect(signup.body.user.email).toBe("host@example.com");
    host.child.kill("SIGTERM");
    expect(await host.exit).toBe(0);
  }, 90_000);

  it("typecheck examples/node-http against the installed types", async () => {
    await writeFile(
      join(exampleProject, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          // The declarations were made by tsc from checked sources; what is checked here is the
          // example's use of them, as most projects do.
          skipLibCheck: true,
          noEmit: true,
          types: ["node"],
        },
        include: ["src"],
      }),
    );
    const checked = await run(process.execPath, [tsc, "-p", exampleProject], { cwd: exampleProject }).then(
      () => "no errors",
      (e: { stdout: string }) => e.stdout,
    );
    expect(checked).toBe("no errors");
  }, 120_000);

  it("run examples/node-http: an upload in parts is processed by its worker loop and plays over node:http", async () => {
    const source = join(work, "source.mp4");
    // Noise, losslessly coded: a few seconds of a small picture that spans several 8 MiB parts.
    await run("ffmpeg", [
      ...["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30:duration=4"],
      ...["-f", "lavfi", "-i", "sine=frequency=440:duration=4", "-vf", "noise=alls=60:allf=t"],
      ...[
        "-c:v",
        "libx264",
        "-preset",
        "ultrafast",
        "-qp",
        "0",
        "-pix_fmt",
        "yuv420p",
        "-c:a",
        "aac",
        source,
      ],
    ]);
    const bytes = await readFile(source);

    const server = start(process.execPath, ["src/server.ts"], exampleProject, { PORT: "0" });
    const url = (JSON.parse(await server.waitFor(/"msg":"listening"/)) as { url: string }).url;

    const signup = await json(`${url}/v1/auth/signup`, {
      body: { email: `packed-${Date.now()}@example.com`, password: "correct horse battery" },
    });
    expect(signup.status).toBe(201);
    const created = await json(`${url}/v1/api-keys`, {
      body: { name: "backend", scopes: ["write"] },
      headers: { authorization: `Bearer ${signup.body.access_token}` },
    });
    expect(created.status).toBe(201);
    const key = { "x-api-key": created.body.key as string };

    const asset = await json(`${url}/v1/assets`, { body: { title: "Packed" }, headers: key });
    expect(asset.status).toBe(201);
    const assetId = asset.body.asset.id as string;
    const upload = await json(`${url}/v1/uploads`, {
      body: { asset_id: assetId, size_bytes: bytes.length },
      headers: key,
    });
    expect(upload.status).toBe(201);
    const {
      id: uploadId,
      part_size,
      parts,
    } = upload.body.upload as {
      id: string;
      part_size: number;
      parts: Array<{ number: number; url: string }>;
    };
    expect(parts.length).toBe(Math.ceil(bytes.length / part_size));
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts) {
      const put = await fetch(part.url, {
        method: "PUT",
        body: bytes.subarray((part.number - 1) * part_size, part.number * part_size),
      });
      expect(put.status, `part ${part.number}`).toBe(200);
      expect(put.headers.get("etag")).toMatch(/^".+"$/);
    }
    const completed = await json(`${url}/v1/uploads/${uploadId}/complete`, { body: {}, headers: key });
    expect(completed.status).toBe(200);

    const until = Date.now() + 120_000;
    let status = "";
    while (status !== "ready") {
      const read = await json(`${url}/v1/assets/${assetId}`, { headers: key });
      status = read.body.asset.status;
      if (status === "failed" || Date.now() > until)
        throw new Error(`asset ${status}: ${JSON.stringify(read.body)}\n${server.output()}`);
      await new Promise((r) => setTimeout(r, 200));
    }

    const session = await json(`${url}/v1/playback/sessions`, { body: { asset_id: assetId }, headers: key });
    expect(session.status).toBe(201);
    const masterUrl = session.body.urls.manifest as string;
    expect(masterUrl.startsWith(`${url}/v1/play/`)).toBe(true);
    const master = await fetch(masterUrl);
    expect(master.status).toBe(200);
    const masterText = await master.text();
    expect(masterText).toMatch(/^#EXTM3U/);
    const variant = masterText.split("\n").find((l) => l.length > 0 && !l.startsWith("#"));
    if (!variant) throw new Error(`no variant in\n${masterText}`);
    const playlistUrl = new URL(variant, masterUrl);
    const playlist = await (await fetch(playlistUrl)).text();
    const segment = playlist.split("\n").find((l) => l.length > 0 && !l.startsWith("#"));
    if (!segment) throw new Error(`no segment in\n${playlist}`);
    const media = await fetch(new URL(segment, playlistUrl));
    expect(media.status).toBe(200);
    expect((await media.arrayBuffer()).byteLength).toBeGreaterThan(1_000);

    // Images are made on request by the example's ffmpeg image maker.
    const thumbnail = await fetch(session.body.urls.thumbnail as string);
    expect(thumbnail.status).toBe(200);
    expect(thumbnail.headers.get("content-type")).toBe("image/jpeg");

    const probed = await run("ffprobe", [
      ...["-v", "error", "-show_entries", "stream=codec_type,codec_name,height", "-of", "json", masterUrl],
    ]);
    const streams = (JSON.parse(probed.stdout) as { streams: Array<Record<string, unknown>> }).streams;
    expect(streams).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ codec_type: "video", codec_name: "h264", height: 240 }),
        expect.objectContaining({ codec_type: "audio", codec_name: "aac" }),
      ]),
    );

    server.child.kill("SIGTERM");
    expect(await server.exit).toBe(0);
    expect(server.output()).toContain('"msg":"stopped"');
  }, 180_000);
});

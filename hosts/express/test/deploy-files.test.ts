// The deploy files (Dockerfile, deploy/gcp) against the config schema: every variable they set is
// one the host reads and documents, and the values they set start a host with the intended role.
// So a renamed or removed setting fails here instead of in a Cloud Run revision.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { loadConfig } from "@vod/host-express";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const gcpDir = join(root, "deploy/gcp");
const read = (path: string) => readFileSync(join(root, path), "utf8");

interface EnvEntry {
  readonly name: string;
  readonly value?: string;
  readonly valueFrom?: { readonly secretKeyRef?: { readonly name?: string; readonly key?: string } };
}
interface Container {
  readonly args?: ReadonlyArray<string>;
  readonly image?: string;
  readonly env?: ReadonlyArray<EnvEntry>;
  readonly startupProbe?: { readonly httpGet?: { readonly path?: string } };
  readonly livenessProbe?: { readonly httpGet?: { readonly path?: string } };
}
interface Workload {
  readonly file: string;
  readonly kind: string;
  readonly containers: ReadonlyArray<Container>;
}

/** Every `containers` list anywhere in a document: services, worker pools and jobs nest them differently. */
const containersIn = (node: unknown): Container[] => {
  if (Array.isArray(node)) return node.flatMap(containersIn);
  if (node === null || typeof node !== "object") return [];
  return Object.entries(node).flatMap(([key, value]) =>
    key === "containers" && Array.isArray(value) ? (value as Container[]) : containersIn(value),
  );
};

const workloads: Workload[] = readdirSync(gcpDir)
  .filter((f) => f.endsWith(".yaml"))
  .flatMap((file) =>
    parseAllDocuments(readFileSync(join(gcpDir, file), "utf8")).map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors.map((e) => e.message).join("; ")}`);
      const json = doc.toJS() as { kind: string };
      return { file, kind: json.kind, containers: containersIn(json) };
    }),
  );
const byKind = (kind: string) => {
  const found = workloads.filter((w) => w.kind === kind);
  expect(found).toHaveLength(1);
  return found[0]!;
};
const envOf = (container: Container) => container.env ?? [];
/** Placeholders a value may hold, with the example docs/deploy-gcp.md gives (its step 9 fills them in). */
const placeholders: Readonly<Record<string, string>> = {
  BUCKET: "acme-vod-media",
  "https://APP_ORIGIN": "https://app.example.com",
};
/** The literal values a container sets, as the host would read them (secrets not included). */
const literalEnv = (container: Container) =>
  Object.fromEntries(
    envOf(container)
      .filter((e) => e.value !== undefined)
      .map((e) => [e.name, placeholders[e.value!] ?? e.value]),
  );

/** Variable names of the config schema (`const Env = Schema.Struct({ ... })` in config.ts). */
const schemaNames = (() => {
  const source = read("hosts/express/src/config.ts");
  const start = source.indexOf("const Env = Schema.Struct({");
  const body = source.slice(start, source.indexOf("\n});", start));
  return new Set([...body.matchAll(/^ {2}([A-Z][A-Z0-9_]*):/gm)].map((m) => m[1]!));
})();
/** Variable names in the README's configuration table. */
const documentedNames = new Set(
  read("README.md")
    .split("\n")
    .filter((line) => line.startsWith("| `"))
    .flatMap((line) => [...(line.split(" | ")[0] ?? "").matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((m) => m[1]!)),
);
const dockerfileEnvNames = [...read("Dockerfile").matchAll(/\b(VOD_[A-Z0-9_]+)=/g)].map((m) => m[1]!);

// Values of the shapes the secrets hold (docs/deploy-gcp.md says how each is made).
const sampleSecrets: Record<string, string> = {
  VOD_DATABASE_URL: "postgres://vod:pa%40ss%2Fword@localhost/vod?host=/cloudsql/project-id:europe-west1:vod",
  VOD_REDIS_URL: "rediss://:auth-string@10.0.0.5:6378",
  VOD_SIGNING_KEYS: "{}",
  VOD_CURSOR_SECRET: "x".repeat(44),
  VOD_UPLOAD_URL_SECRET: "y".repeat(44),
  VOD_GCS_HMAC_ACCESS_ID: "GOOG1EXAMPLEACCESSID",
  VOD_GCS_HMAC_SECRET: "z".repeat(40),
  VOD_DRM_MASTER_KEY: "a".repeat(64),
  VOD_METRICS_TOKEN: "m".repeat(32),
};

describe("deploy files", () => {
  it("parse: every YAML and JSON file of deploy/gcp", () => {
    expect(workloads.map((w) => `${w.file}:${w.kind}`).sort()).toEqual([
      "api.service.yaml:Service",
      "migrate.job.yaml:Job",
      "worker.yaml:WorkerPool",
    ]);
    for (const file of readdirSync(gcpDir).filter((f) => f.endsWith(".json")))
      expect(() => JSON.parse(readFileSync(join(gcpDir, file), "utf8")), file).not.toThrow();
  });

  it("set only variables the config schema reads and the README documents", () => {
    expect(schemaNames.size).toBeGreaterThan(30);
    const used = new Set([
      ...dockerfileEnvNames,
      ...workloads.flatMap((w) => w.containers.flatMap((c) => envOf(c).map((e) => e.name))),
    ]);
    const vodNames = [...used].filter((n) => n.startsWith("VOD_"));
    expect(vodNames.filter((n) => !schemaNames.has(n))).toEqual([]);
    expect(vodNames.filter((n) => !documentedNames.has(n))).toEqual([]);
    // The rest is Node's own: the extra CA for Memorystore's TLS.
    expect([...used].filter((n) => !n.startsWith("VOD_"))).toEqual(["NODE_EXTRA_CA_CERTS"]);
  });

  it("take secrets from Secret Manager by name and version, never as literal values", () => {
    const secretNames = new Set(Object.keys(sampleSecrets));
    for (const workload of workloads)
      for (const entry of workload.containers.flatMap(envOf)) {
        if (secretNames.has(entry.name)) {
          expect(entry.value, `${workload.file} ${entry.name}`).toBeUndefined();
          expect(entry.valueFrom?.secretKeyRef?.name, `${workload.file} ${entry.name}`).toMatch(/^vod-/);
          expect(entry.valueFrom?.secretKeyRef?.key, `${workload.file} ${entry.name}`).toBeTruthy();
        } else expect(entry.value, `${workload.file} ${entry.name}`).toBeDefined();
      }
  });

  it("start each process with its role: API-only host, worker, migrations", () => {
    const withSecrets = (container: Container) => ({
      ...literalEnv(container),
      ...Object.fromEntries(
        envOf(container)
          .filter((e) => e.valueFrom)
          .map((e) => [e.name, sampleSecrets[e.name]]),
      ),
    });

    const [api] = byKind("Service").containers;
    expect(api?.args).toEqual(["serve"]);
    expect(api?.startupProbe?.httpGet?.path).toBe("/readyz");
    expect(api?.livenessProbe?.httpGet?.path).toBe("/healthz");
    const apiConfig = loadConfig(withSecrets(api!));
    expect(apiConfig.jobs.workerConcurrency).toBe(0);
    // Cloud Run's front end is the one proxy: the client is the last X-Forwarded-For entry.
    expect(apiConfig.trustProxy).toEqual({ hops: 1 });
    expect(apiConfig.redis.url).toMatch(/^rediss:/);
    expect(apiConfig.database.url).toContain("host=/cloudsql/");
    expect(apiConfig.baseUrl).toMatch(/^https:/);
    expect([apiConfig.signingKeys, apiConfig.cursorSecret, apiConfig.objects.uploadUrlSecret]).not.toContain(
      undefined,
    );
    expect(apiConfig.drm.masterKey).toBeDefined();
    // Part URLs are signed with the HMAC key, not by IAM signBlob calls.
    expect(apiConfig.objects.gcs.hmacKey).toEqual({
      accessId: sampleSecrets.VOD_GCS_HMAC_ACCESS_ID,
      secret: sampleSecrets.VOD_GCS_HMAC_SECRET,
    });
    // Its /metrics is on the public address; the web app's pages may call it.
    expect(apiConfig.metricsToken).toBeDefined();
    expect(apiConfig.corsOrigins).toEqual(["https://app.example.com"]);

    const [worker] = byKind("WorkerPool").containers;
    expect(worker?.args).toEqual(["worker"]);
    const workerConfig = loadConfig(withSecrets(worker!));
    expect(workerConfig.jobs.workerConcurrency).toBeGreaterThan(0);
    expect(workerConfig.database.url).toContain("host=/cloudsql/");
    // The master key must be the API's, or the licences it serves would not unwrap.
    expect(workerConfig.drm.masterKey).toBeDefined();
    // Its jobs' metrics are served where they are counted, for a scraper beside it.
    expect(workerConfig.opsPort).toBeGreaterThan(0);
    expect(workerConfig.metricsToken).toBeDefined();

    const [migrate] = byKind("Job").containers;
    expect(migrate?.args).toEqual(["migrate"]);
    expect(envOf(migrate!).map((e) => e.name)).toEqual(["VOD_DATABASE_URL"]);

    const images = new Set(workloads.flatMap((w) => w.containers.map((c) => c.image)));
    expect(images.size).toBe(1);
  });

  it("build the image on the Node line package.json asks for, decoding with Debian's ffmpeg only", () => {
    const dockerfile = read("Dockerfile");
    const engines = (JSON.parse(read("package.json")) as { engines: { node: string } }).engines.node;
    const major = /^>=(\d+)/.exec(engines)?.[1];
    expect(Number(major)).toBeGreaterThanOrEqual(24);
    const bases = [...dockerfile.matchAll(/^FROM (\S+)/gm)].map((m) => m[1]);
    expect(bases).toEqual([`node:${major}-bookworm-slim`, `node:${major}-bookworm-slim`]);
    // The npm packages' 2018 ffmpeg never ships in the image, and the adapter is pointed at
    // Debian's: a path that is set and missing stops the start instead of falling back.
    expect(dockerfile).toMatch(/apt-get install -y --no-install-recommends ffmpeg\b/);
    expect(dockerfile).toContain("rm -rf node_modules/@ffmpeg-installer node_modules/@ffprobe-installer");
    const env = Object.fromEntries(
      [...dockerfile.matchAll(/\b(VOD_[A-Z0-9_]+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]),
    );
    const media = loadConfig(env).media;
    expect([media.ffmpegPath, media.ffprobePath]).toEqual(["/usr/bin/ffmpeg", "/usr/bin/ffprobe"]);
  });

  it("keep in the image every workspace the host loads at run time, and no other", () => {
    const dockerfile = read("Dockerfile");
    const kept = /p\.workspaces=\[([^\]]*)\]/
      .exec(dockerfile)?.[1]
      ?.match(/'([^']+)'/g)
      ?.map((w) => w.slice(1, -1));
    const copied = /for ws in ([^;]+); do/.exec(dockerfile)?.[1]?.trim().split(/\s+/);
    expect(copied).toEqual(kept);
    // The host's @vod dependencies, and theirs, each lives under one of the kept patterns.
    const manifest = (dir: string) =>
      JSON.parse(read(`${dir}/package.json`)) as { name: string; dependencies?: Record<string, string> };
    const dirs = [
      "core",
      "http",
      ...["adapters", "clients", "hosts"].flatMap((top) =>
        readdirSync(join(root, top)).map((name) => `${top}/${name}`),
      ),
    ];
    const byName = new Map(dirs.map((dir) => [manifest(dir).name, dir]));
    const needed = new Set<string>();
    const visit = (dir: string) => {
      if (needed.has(dir)) return;
      needed.add(dir);
      for (const dep of Object.keys(manifest(dir).dependencies ?? {}))
        if (dep.startsWith("@vod/")) visit(byName.get(dep) ?? `missing ${dep}`);
    };
    visit("hosts/express");
    const covered = (dir: string) =>
      (kept ?? []).some((pattern) =>
        pattern.endsWith("/*") ? dir.startsWith(pattern.slice(0, -1)) : dir === pattern,
      );
    expect([...needed].filter((dir) => !covered(dir))).toEqual([]);
  });
});

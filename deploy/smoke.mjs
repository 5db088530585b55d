// A deployed (or locally started) vod, end to end: /healthz, a signup, an asset, a small video
// uploaded through its part URLs, and the asset processed to `ready` by whichever worker runs.
//
//   node deploy/smoke.mjs http://localhost:8080 [video-file]
//
// Without a video file, one is made with ffmpeg (2 s test pattern with a tone). Exits 0 when the
// asset is ready, 1 with the asset or the failing answer otherwise. No dependency but Node 24.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const base = (process.argv[2] ?? "http://localhost:8080").replace(/\/+$/, "");
const timeoutMs = Number(process.env.SMOKE_TIMEOUT_MS ?? 180_000);

const fail = (what, detail) => {
  console.error(`smoke: ${what}`, detail ?? "");
  process.exit(1);
};

const call = async (method, path, { token, body } = {}) => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body ? { "content-type": "application/json" } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : undefined };
};

const expectStatus = (what, answer, status) => {
  if (answer.status !== status) fail(`${what}: expected ${status}, got ${answer.status}`, answer.json);
  console.log(`smoke: ${what} ${answer.status}`);
  return answer.json;
};

const video = () => {
  if (process.argv[3]) return readFileSync(process.argv[3]);
  const dir = mkdtempSync(join(tmpdir(), "vod-smoke-"));
  try {
    const file = join(dir, "in.mp4");
    execFileSync(process.env.VOD_FFMPEG_PATH ?? "ffmpeg", [
      ...["-v", "error", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=2"],
      ...["-f", "lavfi", "-i", "sine=frequency=440:duration=2"],
      ...["-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", file],
    ]);
    return readFileSync(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};

const health = await fetch(`${base}/healthz`);
if (health.status !== 200) fail(`GET /healthz: ${health.status}`);
console.log("smoke: GET /healthz 200");

const email = `smoke-${Date.now()}-${process.pid}@example.com`;
const { access_token: token } = expectStatus(
  "signup",
  await call("POST", "/v1/auth/signup", {
    body: { email, password: "correct horse battery staple", tenantName: "Smoke Test" },
  }),
  201,
);
const { asset } = expectStatus(
  "asset create",
  await call("POST", "/v1/assets", { token, body: { title: "smoke" } }),
  201,
);

const bytes = video();
const sha256 = createHash("sha256").update(bytes).digest("hex");
const { upload } = expectStatus(
  "upload start",
  await call("POST", "/v1/uploads", {
    token,
    body: { asset_id: asset.id, size_bytes: bytes.length, sha256 },
  }),
  201,
);
const parts = [];
for (const { number, url } of upload.parts) {
  const chunk = bytes.subarray((number - 1) * upload.part_size, number * upload.part_size);
  const response = await fetch(url, { method: "PUT", body: chunk });
  if (!response.ok) fail(`part ${number} PUT: ${response.status}`, await response.text());
  parts.push({ number, etag: (response.headers.get("etag") ?? "").replaceAll('"', "") });
}
console.log(`smoke: ${parts.length} part(s) PUT`);
expectStatus(
  "upload complete",
  await call("POST", `/v1/uploads/${upload.id}/complete`, { token, body: { parts } }),
  200,
);

const deadline = Date.now() + timeoutMs;
for (;;) {
  const { json } = await call("GET", `/v1/assets/${asset.id}`, { token });
  if (json.asset.status === "ready") {
    console.log(`smoke: asset ${asset.id} ready`, JSON.stringify(json.asset));
    break;
  }
  if (json.asset.status === "failed") fail("asset failed", json.asset);
  if (Date.now() > deadline) fail(`asset still ${json.asset.status} after ${timeoutMs} ms`, json.asset);
  await new Promise((resolve) => setTimeout(resolve, 1000));
}

// The second baseline of bench/api-paths.mjs: Express 5 answering GET /v1/assets?limit=N with
// what a listing behind a shared rate limit needs at the least, and nothing else: one Redis
// EVALSHA (ioredis, auto-pipelined) and one indexed SELECT of N + 1 rows of the asset columns
// (one pipelined pg connection, a named statement), sent with res.json. No authentication,
// validation, row security, logging or metrics: what the platform's own work is measured against.
// Env: PORT, DATABASE_URL, SCHEMA (made if missing, its table filled once), REDIS_URL, KEY_PREFIX.
import express from "express";
import Redis from "ioredis";
import pg from "pg";

const schema = process.env.SCHEMA ?? "public";
if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`bad SCHEMA ${schema}`);
// One connection in pg's pipeline mode, as the host's statements outside transactions go (its
// shared lanes): with a pool of 10, each request's checkout, write and read cost this baseline
// more than the host now spends on the same SELECT. The pool stays for the set-up.
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 2 });
const lane = new pg.Client({ connectionString: process.env.DATABASE_URL, pipeline: true });
await lane.connect();
pg.types.setTypeParser(20, Number);
const redis = new Redis(process.env.REDIS_URL, { enableAutoPipelining: true });
redis.defineCommand("hit", {
  numberOfKeys: 1,
  lua: "local n = redis.call('INCR', KEYS[1]) if n == 1 then redis.call('PEXPIRE', KEYS[1], 60000) end return n",
});
const table = `${schema}.bench_one_lookup`;
await pool.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
await pool.query(`CREATE TABLE IF NOT EXISTS ${table} (
  id text, tenant_id text, title text, status text, failure_code text, source_width int,
  source_height int, source_fps double precision, source_codec text, source_duration_ms int8,
  source_bitrate_kbps int, origin_size_bytes int8, checksum_sha256 text, drm_enabled bool,
  visibility text, published_at int8, created_at int8, deleted_at int8,
  PRIMARY KEY (tenant_id, id))`);
await pool.query(
  `CREATE INDEX IF NOT EXISTS bench_one_lookup_page ON ${table} (tenant_id, created_at DESC, id DESC)`,
);
const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${table}`);
for (let i = rows[0].n; i < 50; i++)
  await pool.query(
    `INSERT INTO ${table} (id, tenant_id, title, status, drm_enabled, visibility, created_at)
     VALUES ($1, 'tnt_bench', $2, 'pending', false, 'private', $3)`,
    [`ast_${String(i).padStart(22, "0")}`, `asset ${i}`, Date.now() + i],
  );
const text = `SELECT id, tenant_id, title, status, failure_code, source_width, source_height, source_fps,
  source_codec, source_duration_ms, source_bitrate_kbps, origin_size_bytes, checksum_sha256, drm_enabled,
  visibility, published_at, created_at FROM ${table} WHERE tenant_id = $1 AND deleted_at IS NULL
  ORDER BY created_at DESC, id DESC LIMIT $2`;

const app = express();
app.disable("x-powered-by");
app.set("etag", false);
app.get("/v1/assets", async (req, res) => {
  const limit = Math.min(100, Math.max(1, Number(req.query.limit) || 20));
  await redis.hit(`${process.env.KEY_PREFIX ?? "bench-one-lookup:"}${req.get("x-api-key") ?? "none"}`);
  const result = await lane.query({ name: "page", text, values: ["tnt_bench", limit + 1] });
  res.json({ data: result.rows.slice(0, limit), next_cursor: result.rows.length > limit ? "next" : null });
});
const server = app.listen(Number(process.env.PORT), "127.0.0.1", () => {
  process.stdout.write(`listening on ${server.address().port}\n`);
});
process.on("SIGTERM", () =>
  server.close(() => Promise.all([pool.end(), lane.end(), redis.quit()]).finally(() => process.exit(0))),
);

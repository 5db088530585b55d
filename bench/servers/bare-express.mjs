// The baseline of bench/api-paths.mjs: Express 5 with nothing but one GET answering a small JSON
// body, on PORT. What any Express API pays before it does anything of its own.
import express from "express";

const app = express();
app.disable("x-powered-by");
app.set("etag", false);
app.get("/v1/ping", (_req, res) => {
  res.json({ ok: true, at: Date.now() });
});
const server = app.listen(Number(process.env.PORT), "127.0.0.1", () => {
  process.stdout.write(`listening on ${server.address().port}\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));

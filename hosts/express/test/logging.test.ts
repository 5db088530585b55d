import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { memoryStorage } from "@vod/adapter-memory";
import { createLogger, loadConfig, loggedPath, startHost } from "@vod/host-express";
import { expect, it } from "vitest";

it("keeps playback tokens out of logged paths", () => {
  expect(loggedPath("/v1/play/v1.aaa.bbb.ccc/720p/3.m4s")).toBe("/v1/play/[token]/720p/3.m4s");
  expect(loggedPath("/v1/assets/ast_1")).toBe("/v1/assets/ast_1");
});

it("writes no credential of a request into the log", async () => {
  let lines = "";
  const sinkStream = new Writable({
    write(chunk, _enc, done) {
      lines += chunk;
      done();
    },
  });
  const dir = await mkdtemp(join(tmpdir(), "vod-log-"));
  const host = await startHost(loadConfig({ PORT: "0", VOD_HOST: "127.0.0.1", VOD_DATA_DIR: dir }), {
    storage: memoryStorage(),
    logger: createLogger("info", sinkStream),
  });
  try {
    const password = "secret horse battery";
    const signup = await fetch(`${host.url}/v1/auth/signup`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: `log-${Date.now()}@example.com`, password }),
    });
    const { access_token, refresh_token } = (await signup.json()) as {
      access_token: string;
      refresh_token: string;
    };
    await fetch(`${host.url}/v1/auth/me`, { headers: { authorization: `Bearer ${access_token}` } });
    await fetch(`${host.url}/v1/play/v1.forged.token.here/master.m3u8`);
    await fetch(`${host.url}/v1/assets?cursor=${refresh_token}`, {
      headers: { "x-api-key": "vod_AAAAAAAA_secret" },
    });
    await new Promise((r) => setTimeout(r, 50));
    expect(lines).toContain('"path":"/v1/auth/signup"');
    expect(lines).toContain('"path":"/v1/play/[token]/master.m3u8"');
    for (const secret of [
      password,
      access_token,
      refresh_token,
      "v1.forged.token.here",
      "vod_AAAAAAAA_secret",
    ])
      expect(lines).not.toContain(secret);
  } finally {
    await host.close(1_000);
    await rm(dir, { recursive: true, force: true });
  }
});

import { connect } from "node:net";
import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import {
  createApiKey,
  createAsset,
  type ErrorBody,
  expectError,
  expectUnauthorized,
  type MakeHttpSubject,
  type Reply,
  randomIp,
  sharedSubject,
  signUp,
  type WireAsset,
} from "./client.js";

/**
 * What no error body may show: a stack, an object key or file path, SQL, a parser's or the
 * runtime's own words, or the NUL a client sent.
 */
const INTERNALS =
  /\bat .+\.(ts|js):\d+|_tag|stack|renditions\/|objects\/|\/tmp\/|ENAMETOOLONG|ENOENT|SELECT |INSERT |Failed to decode|URIError|incorrect header check|Z_DATA_ERROR|\\u0000/;

/** DECISIONS, hostile input: 400 invalid_request with `details.fields`, and nothing internal. */
const expectRefused = (reply: Reply<unknown>): ErrorBody => {
  const body = expectError(reply, 400, "invalid_request");
  expect(reply.text).not.toMatch(INTERNALS);
  expect(Array.isArray(body.details?.fields)).toBe(true);
  for (const field of body.details?.fields ?? [])
    expect(field).toStrictEqual({ path: expect.any(Array), message: expect.any(String) });
  return body;
};

/** One raw HTTP/1.1 exchange: what a client that frames its request badly gets back. */
const rawExchange = (baseUrl: string, request: string) =>
  new Promise<{ status: number; headers: string; body: string }>((resolve, reject) => {
    const { hostname, port } = new URL(baseUrl);
    const socket = connect(Number(port), hostname);
    let received = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      received += chunk;
    });
    socket.on("error", reject);
    socket.on("close", () => {
      const [head = "", ...rest] = received.split("\r\n\r\n");
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
      resolve({ status, headers: head, body: rest.join("\r\n\r\n") });
    });
    socket.write(request);
  });

/** The error format of part 7 across operations, and unknown routes. */
export const describeErrors = (makeSubject: MakeHttpSubject): void => {
  describe("errors", () => {
    const subject = sharedSubject(makeSubject);

    it("answers an unknown route with 404 not_found, with or without a credential", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const replies = [
        await api.get("/v1/nope"),
        await api.get("/v1/nope", { bearer: account.access_token }),
        await api.post("/v1/assets/whatever/publish", { bearer: account.access_token, json: {} }),
        await api.del("/v1/assets", { bearer: account.access_token }),
        await api.get("/"),
      ];
      for (const reply of replies) {
        const body = expectError(reply, 404, "not_found");
        expect(body).toStrictEqual({ error: "not_found", code: "not_found", message: expect.any(String) });
      }
    });

    it("answers an unknown route with 404 whatever body it carries", async () => {
      const { api } = subject();
      expectError(await api.post("/v1/nope", { raw: "hello", contentType: "text/plain" }), 404, "not_found");
      expectError(
        await api.post("/v1/nope", { raw: "{", contentType: "application/json" }),
        404,
        "not_found",
      );
    });

    it("gives every error body error === code, a string message, and no internals", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const read = await createApiKey(api, { bearer: account.access_token }, ["read"]);
      const cases: Array<[Reply<ErrorBody>, number, string]> = [
        [
          await api.post("/v1/auth/signup", { json: { email: "x", password: "y" }, ip: randomIp() }),
          400,
          "invalid_request",
        ],
        [
          await api.post("/v1/auth/login", { raw: "{", contentType: "application/json", ip: randomIp() }),
          400,
          "invalid_request",
        ],
        [await api.get("/v1/assets?limit=abc", { bearer: account.access_token }), 400, "invalid_request"],
        [await api.get("/v1/assets"), 401, "unauthorized"],
        [await api.get("/v1/api-keys", { apiKey: "vod_AAAAAAAA_nope" }), 401, "unauthorized"],
        [await api.post("/v1/assets", { apiKey: read.key, json: {} }), 403, "forbidden"],
        [await api.get("/v1/assets/ast_missing", { bearer: account.access_token }), 404, "not_found"],
        [
          await api.post("/v1/auth/signup", {
            json: { email: account.email, password: account.password },
            ip: randomIp(),
          }),
          409,
          "conflict",
        ],
      ];
      for (const [reply, status, code] of cases) {
        const body = expectError(reply, status, code);
        expect(reply.text).not.toMatch(/\bat .+\.(ts|js):\d+/);
        expect(reply.text).not.toMatch(/_tag|stack/);
        if (body.details?.fields !== undefined) {
          for (const field of body.details.fields) {
            expect(field).toStrictEqual({ path: expect.any(Array), message: expect.any(String) });
          }
        }
      }
    });

    it("checks the credential before the input: 401, then 403, then 400", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const read = await createApiKey(api, { bearer: account.access_token }, ["read"]);
      const bad = { name: "", scopes: ["root"] };
      expectUnauthorized(await api.post("/v1/api-keys", { json: bad }));
      expectError(await api.post("/v1/api-keys", { apiKey: read.key, json: bad }), 403, "forbidden");
      expectError(
        await api.post("/v1/api-keys", { bearer: account.access_token, json: bad }),
        400,
        "invalid_request",
      );
    });
  });

  describe("hostile input", () => {
    const subject = sharedSubject(makeSubject);

    it("answers bad percent-encoding in a path with 400 invalid_request, with or without a credential", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const bearer = account.access_token;
      const replies = [
        await api.get("/v1/assets/%ZZ"),
        await api.get("/v1/assets/%ZZ", { bearer }),
        await api.get("/v1/assets/%E0%A4%A", { bearer }),
        await api.del("/v1/api-keys/%ZZ", { bearer }),
        await api.post("/v1/uploads/%ZZ/complete", { bearer, json: {} }),
        await api.request("PUT", "/v1/uploads/%ZZ/parts/1", { raw: "bytes" }),
        await api.get("/v1/play/%ZZ/master.m3u8"),
        await api.get("/v1/play/v1.a.b.c/%ZZ.m4s"),
      ];
      for (const reply of replies) expectRefused(reply);
    });

    it("answers a body that is not in its declared Content-Encoding with 400, on every JSON route", async () => {
      const { api, baseUrl } = subject();
      const account = await signUp(api);
      const notGzip = JSON.stringify({ email: "x@example.com", password: "correct horse battery" });
      for (const encoding of ["gzip", "deflate", "br", "x-squish"]) {
        const headers = { "content-encoding": encoding };
        const replies = [
          await api.post("/v1/auth/signup", {
            raw: notGzip,
            contentType: "application/json",
            headers,
            ip: randomIp(),
          }),
          await api.post("/v1/auth/login", {
            raw: notGzip,
            contentType: "application/json",
            headers,
            ip: randomIp(),
          }),
          await api.post("/v1/assets", {
            raw: "{}",
            contentType: "application/json",
            headers,
            bearer: account.access_token,
          }),
        ];
        for (const reply of replies) expectRefused(reply);
      }
      // A body really in gzip is read as any other.
      const created = await fetch(`${baseUrl}/v1/assets`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "content-encoding": "gzip",
          authorization: `Bearer ${account.access_token}`,
        },
        body: gzipSync(JSON.stringify({ title: "zipped" })),
      });
      expect(created.status).toBe(201);
      expect(((await created.json()) as { asset: WireAsset }).asset.title).toBe("zipped");
    });

    it("refuses a NUL character in a body field or a path id with 400, and stores nothing", async () => {
      const { api, backdoor } = subject();
      const account = await signUp(api);
      const bearer = account.access_token;
      const title = expectRefused(await api.post("/v1/assets", { bearer, json: { title: "a\u0000b" } }));
      expect(title.details?.fields?.map((f) => f.path)).toEqual([["title"]]);
      const id = expectRefused(await api.get("/v1/assets/%00", { bearer }));
      expect(id.details?.fields?.map((f) => f.path)).toEqual([["id"]]);
      expectRefused(await api.get("/v1/assets/ast_%00x", { bearer }));
      expectRefused(await api.del("/v1/api-keys/key%00", { bearer }));
      expectRefused(await api.get("/v1/uploads/upl_%00", { bearer }));
      expectRefused(await api.get("/v1/assets?cursor=%00", { bearer }));
      expectRefused(await api.post("/v1/playback/sessions", { bearer, json: { asset_id: "ast_\u0000" } }));
      expectRefused(
        await api.post("/v1/auth/refresh", { json: { refresh_token: "\u0000" }, ip: randomIp() }),
      );
      const email = `nul-${Date.now()}@example.com`;
      const signup = expectRefused(
        await api.post("/v1/auth/signup", {
          json: { email, password: "correct horse battery", name: "a\u0000b" },
          ip: randomIp(),
        }),
      );
      expect(signup.details?.fields?.map((f) => f.path)).toEqual([["name"]]);
      // Nothing was stored: the tenant has no asset, and the refused email is free.
      const list = await api.get<{ data: WireAsset[] }>("/v1/assets", { bearer });
      expect(list.status).toBe(200);
      expect(list.body.data).toEqual([]);
      const user = await api.post("/v1/auth/signup", {
        json: { email, password: "correct horse battery" },
        ip: randomIp(),
      });
      expect(user.status).toBe(201);
      expect(await backdoor.tenant(account.tenant.id)).toBeDefined();
    });

    it("refuses a body nested thousands of levels deep with 400, on the catalog and on telemetry", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const deep = `${"[".repeat(5_000)}${"]".repeat(5_000)}`;
      const deepObject = `${'{"a":'.repeat(2_000)}1${"}".repeat(2_000)}`;
      expectRefused(
        await api.post("/v1/assets", {
          bearer: account.access_token,
          raw: deep,
          contentType: "application/json",
        }),
      );
      expectRefused(
        await api.post("/v1/assets", {
          bearer: account.access_token,
          raw: `{"title":${deep}}`,
          contentType: "application/json",
        }),
      );
      expectRefused(
        await api.post("/v1/auth/signup", {
          raw: deepObject,
          contentType: "application/json",
          ip: randomIp(),
        }),
      );
      expectRefused(await api.post("/v1/telemetry", { raw: deep, contentType: "application/json" }));
      expectRefused(
        await api.post("/v1/telemetry", {
          raw: `{"token":"v1.x","events":[${deepObject}]}`,
          contentType: "application/json",
        }),
      );
    });

    it("refuses unknown fields of a JSON body, naming each, and creates nothing", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const bearer = account.access_token;
      const typo = expectRefused(
        await api.post("/v1/assets", { bearer, json: { titel: "mistyped", drm: false } }),
      );
      expect(typo.details?.fields?.map((f) => f.path)).toEqual([["titel"]]);
      const two = expectRefused(
        await api.post("/v1/api-keys", { bearer, json: { name: "k", scopes: ["read"], scope: "x", ttl: 1 } }),
      );
      expect(two.details?.fields?.map((f) => f.path).sort()).toEqual([["scope"], ["ttl"]]);
      const nested = expectRefused(
        await api.post("/v1/auth/signup", {
          json: {
            email: `x-${Date.now()}@example.com`,
            password: "correct horse battery",
            plan: "enterprise",
          },
          ip: randomIp(),
        }),
      );
      expect(nested.details?.fields?.map((f) => f.path)).toEqual([["plan"]]);
      const list = await api.get<{ data: WireAsset[] }>("/v1/assets", { bearer });
      expect(list.body.data).toEqual([]);
      // Query strings stay lenient: a cache-busting parameter is not an error.
      expect((await api.get("/v1/assets?_=123", { bearer })).status).toBe(200);
    });

    it("counts length limits in Unicode code points", async () => {
      const { api } = subject();
      const account = await signUp(api);
      const emoji = "\u{1F3AC}".repeat(200);
      const asset = await createAsset(api, { bearer: account.access_token }, { title: emoji });
      expect(asset.title).toBe(emoji);
      const over = expectRefused(
        await api.post("/v1/assets", { bearer: account.access_token, json: { title: `${emoji}x` } }),
      );
      expect(over.details?.fields?.map((f) => f.path)).toEqual([["title"]]);
    });

    it("answers HTTP framing errors with the spec's JSON body", async () => {
      const { baseUrl } = subject();
      const requests = [
        "POST /v1/auth/signup HTTP/1.1\r\nHost: vod\r\nContent-Type: application/json\r\nContent-Length: abc\r\n\r\n{}",
        "POST /v1/auth/signup HTTP/1.1\r\nHost: vod\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        "POST /v1/auth/signup HTTP/1.1\r\nHost: vod\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        "GET /v1/assets HTTP/1.1\r\nHost: vod\r\nBad Header\r\n\r\n",
      ];
      for (const request of requests) {
        const reply = await rawExchange(baseUrl, request);
        expect(reply.status).toBe(400);
        expect(reply.headers).toMatch(/\r\ncontent-type: application\/json/i);
        const body = JSON.parse(reply.body) as ErrorBody;
        expect(body).toStrictEqual({
          error: "invalid_request",
          code: "invalid_request",
          message: expect.any(String),
          details: { fields: [{ path: [], message: expect.any(String) }] },
        });
        expect(reply.body).not.toMatch(INTERNALS);
      }
    });
  });
};

import { describe, expect, it } from "vitest";
import {
  createApiKey,
  type ErrorBody,
  expectError,
  expectUnauthorized,
  type MakeHttpSubject,
  type Reply,
  randomIp,
  sharedSubject,
  signUp,
} from "./client.js";

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
};

import {
  describeDocumentConformance,
  describeHttpApi,
  type HttpSubject,
  recordExchanges,
} from "@vod/contract-tests";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fastifySubject } from "./http-subjects.js";

// The HTTP contract suite against the API mounted inside Fastify, every exchange then held
// against the OpenAPI document: the framework around it changes nothing a client sees.
const recording = recordExchanges();
describeHttpApi("fastify", fastifySubject());
describeDocumentConformance(fastifySubject(), recording);

describe("the API inside Fastify, where Fastify would answer first", () => {
  let subject: HttpSubject;
  beforeAll(async () => {
    subject = await fastifySubject()();
  });
  afterAll(() => subject?.cleanup());

  const send = async (path: string, init: RequestInit = {}) => {
    const reply = await fetch(`${subject.baseUrl}${path}`, init);
    return { status: reply.status, type: reply.headers.get("content-type"), body: await reply.json() };
  };

  it("serves the app's own route beside the API", async () => {
    expect(await send("/app/hello")).toMatchObject({ status: 200, body: { hello: "from Fastify" } });
  });

  it("answers a path Fastify cannot decode with the spec's 400, not Fastify's", async () => {
    const reply = await send("/v1/assets/%E0%A4%A");
    expect(reply).toMatchObject({ status: 400, body: { error: "invalid_request", code: "invalid_request" } });
    expect(reply.type).toBe("application/json; charset=utf-8");
  });

  it("leaves bodies to the API: malformed JSON and an unknown content type are the spec's 400", async () => {
    const malformed = await send("/v1/auth/login", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"email":',
    });
    expect(malformed).toMatchObject({ status: 400, body: { code: "invalid_request" } });
    const xml = await send("/v1/auth/login", {
      method: "POST",
      headers: { "content-type": "application/xml" },
      body: "<login/>",
    });
    expect(xml).toMatchObject({ status: 400, body: { code: "invalid_request" } });
  });

  it("answers an unknown route with the spec's 404", async () => {
    expect(await send("/v1/nothing-here")).toMatchObject({
      status: 404,
      body: { error: "not_found", code: "not_found", message: "no route for GET /v1/nothing-here" },
    });
  });
});

import { Validator } from "@seriousme/openapi-schema-validator";
import { errorCode } from "@vod/core";
import { errorStatus, openApiDocument, operations } from "@vod/http";
import { describe, expect, it } from "vitest";

interface Doc {
  openapi: string;
  paths: Record<string, Record<string, Op>>;
  components: { schemas: Record<string, Json>; responses: Record<string, Json> };
}
interface Op {
  operationId: string;
  parameters?: Array<{ name: string; in: string; required: boolean; schema: Json }>;
  requestBody?: { content: Record<string, { schema: Json }> };
  responses: Record<string, Json>;
  security: unknown[];
}
type Json = Record<string, unknown>;
type Spec = Parameters<Validator["validate"]>[0];

const doc = openApiDocument(operations, { title: "t", version: "1" }) as unknown as Doc;
const at = (path: string, method: string) => {
  const op = doc.paths[path]?.[method];
  if (!op) throw new Error(`${method} ${path} is not documented`);
  return op;
};
/** Follows a `$ref` inside the document. */
const resolve = (node: Json): Json => {
  const ref = node.$ref;
  if (typeof ref !== "string") return node;
  let target: unknown = doc;
  for (const key of ref.slice(2).split("/")) target = (target as Json)[key];
  if (target === undefined) throw new Error(`${ref} resolves to nothing`);
  return resolve(target as Json);
};
const bodySchema = (op: Op) => resolve(op.requestBody?.content["application/json"]?.schema ?? {});

describe("OpenAPI document", () => {
  it("is a valid OpenAPI 3.1 document, and every $ref in it resolves", async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc) as unknown as Spec);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
    // The validator is no rubber stamp: a parameter "in" the body (OpenAPI 2's way) is refused.
    const broken = structuredClone(doc);
    const limit = broken.paths["/v1/assets"]?.get?.parameters?.[1];
    if (limit) limit.in = "body";
    expect((await new Validator().validate(broken as unknown as Spec)).valid).toBe(false);
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"([^"]+)"/g)].map((m) => m[1] ?? "");
    expect(refs.length).toBeGreaterThan(50);
    for (const ref of new Set(refs)) expect(() => resolve({ $ref: ref }), ref).not.toThrow();
  });

  it("documents every operation of the catalog at its path and method, with its success status", () => {
    for (const op of operations) {
      const entry = at(op.path.replace(/[:*](\w+)/g, "{$1}"), op.method.toLowerCase());
      expect(entry.operationId).toBe(op.id);
      expect(Object.keys(entry.responses)).toContain(String(op.status));
    }
    expect(doc.openapi).toBe("3.1.0");
  });

  it("types parameters by their decoded values, with the schemas' bounds", () => {
    const list = at("/v1/assets", "get");
    expect(list.parameters?.map((p) => `${p.in}:${p.name}:${p.required}`)).toEqual([
      "query:status:false",
      "query:limit:false",
      "query:cursor:false",
    ]);
    expect(list.parameters?.[1]?.schema).toMatchObject({
      type: "integer",
      minimum: 1,
      maximum: 100,
      default: 50,
    });
    const part = at("/v1/uploads/{id}/parts/{number}", "put");
    expect(part.parameters?.find((p) => p.name === "number")?.schema).toMatchObject({
      type: "integer",
      minimum: 1,
      maximum: 10_000,
    });
  });

  it("documents the status filter of the API key list", () => {
    const list = at("/v1/api-keys", "get");
    expect(list.parameters).toEqual([
      {
        name: "status",
        in: "query",
        required: false,
        schema: { type: "string", enum: ["active", "revoked"] },
      },
    ]);
  });

  it("documents Idempotency-Key on authenticated POSTs only, and Idempotent-Replayed on their success", () => {
    const key = (op: Op) => op.parameters?.find((p) => p.name === "Idempotency-Key");
    const create = at("/v1/assets", "post");
    expect(key(create)).toMatchObject({
      in: "header",
      required: false,
      schema: { minLength: 1, maxLength: 255 },
    });
    expect(resolve(create.responses["201"] as Json).headers).toHaveProperty("Idempotent-Replayed");
    expect(key(at("/v1/uploads/{id}/complete", "post"))).toBeDefined();
    expect(key(at("/v1/auth/signup", "post"))).toBeUndefined();
    // Never recorded: a replay would leave the session or the password as it was.
    expect(key(at("/v1/auth/logout", "post"))).toBeUndefined();
    expect(key(at("/v1/auth/password", "post"))).toBeUndefined();
    expect(key(at("/v1/assets", "get"))).toBeUndefined();
    expect(key(at("/v1/assets/{id}", "patch"))).toBeUndefined();
  });

  it("gives request bodies their bounds, patterns and required fields, and refuses unknown fields", () => {
    const start = bodySchema(at("/v1/uploads", "post"));
    expect(start.required).toEqual(["asset_id", "size_bytes"]);
    expect(start.additionalProperties).toBe(false);
    const props = start.properties as Record<string, Json>;
    expect(props.size_bytes).toMatchObject({ minimum: 1, maximum: 107_374_182_400 });
    expect(props.sha256).toMatchObject({ pattern: "^[0-9a-f]{64}$" });
    const signup = bodySchema(at("/v1/auth/signup", "post"));
    expect(signup.required).toEqual(["email", "password"]);
    expect((signup.properties as Record<string, Json>).password).toMatchObject({
      minLength: 8,
      maxLength: 256,
    });
  });

  it("writes bounds where every JSON Schema tool reads them: never beside a $ref", () => {
    // Draft 7 validators and OpenAPI 3.0 tools ignore a $ref's siblings: size_bytes unbounded.
    const besideRef = [...JSON.stringify(doc).matchAll(/\{"\$ref":"[^"]+",[^{}]*\}/g)].map((m) => m[0]);
    expect(besideRef).toEqual([]);
    const start = bodySchema(at("/v1/uploads", "post")).properties as Record<string, Json>;
    expect(start.size_bytes).toMatchObject({ type: "integer", minimum: 1, maximum: 107_374_182_400 });
    const session = bodySchema(at("/v1/playback/sessions", "post")).properties as Record<string, Json>;
    expect(session.ttl_seconds).toMatchObject({ type: "integer", minimum: 60, maximum: 86_400 });
  });

  it("documents a media file in its own type, whole or by range, and a range past its end as an error", () => {
    const types = [
      "application/vnd.apple.mpegurl",
      "application/dash+xml",
      "video/iso.segment",
      "video/mp4",
      "image/jpeg",
      "text/vtt",
    ];
    for (const method of ["get", "head"]) {
      const { responses } = at("/v1/play/{token}/{path}", method);
      for (const status of ["200", "206"])
        expect(Object.keys(resolve(responses[status] ?? {}).content as Json).sort(), status).toEqual(
          [...types].sort(),
        );
      expect(resolve(responses["206"] ?? {}).headers).toMatchObject({ "Content-Range": { required: true } });
      expect(resolve(responses["416"] ?? {})).toMatchObject({
        headers: { "Content-Range": { required: true } },
        content: {
          "application/json": {
            schema: {
              allOf: [
                { $ref: "#/components/schemas/Error" },
                { properties: { code: { enum: ["invalid_request"] } } },
              ],
            },
          },
        },
      });
    }
  });

  it("names a component per resource and refers to it, with formats from the schemas", () => {
    for (const name of [
      "Asset",
      "UploadStarted",
      "UploadResumed",
      "UploadSession",
      "ApiKey",
      "PlaybackSession",
      "PlaybackSessionCreated",
      "Tenant",
      "User",
      "Tokens",
      "Error",
    ])
      expect(doc.components.schemas[name], name).toBeDefined();
    const got = at("/v1/assets/{id}", "get").responses["200"] as {
      content: { "application/json": { schema: { properties: { asset: Json } } } };
    };
    expect(got.content["application/json"].schema.properties.asset).toEqual({
      $ref: "#/components/schemas/Asset",
    });
    const urls = (
      resolve({ $ref: "#/components/schemas/PlaybackSessionCreated" }).properties as Record<string, Json>
    ).urls as { properties: Record<string, Json> };
    expect(urls.properties.manifest).toEqual({ type: "string", format: "uri" });
    expect(resolve({ $ref: "#/components/schemas/PartUrl" }).properties).toMatchObject({
      url: { type: "string", format: "uri" },
    });
  });

  it("lists every error status a route can answer, with WWW-Authenticate on 401 and Retry-After on 429", () => {
    // Each route's statuses, sorted, as one line.
    const statuses = (path: string, method: string) =>
      Object.keys(at(path, method).responses).sort().join(" ");
    expect(statuses("/v1/uploads", "post")).toBe("201 400 401 403 404 409 413 429 503");
    expect(statuses("/v1/auth/signup", "post")).toBe("201 400 409 413 429 503");
    // Past the tenant's quota.
    expect(statuses("/v1/api-keys", "post")).toBe("201 400 401 403 409 413 429 503");
    expect(statuses("/v1/webhooks", "post")).toBe("201 400 401 403 409 413 429 503");
    expect(statuses("/v1/auth/me", "get")).toBe("200 400 401 403 413 429 503");
    expect(statuses("/v1/assets/{id}", "get")).toBe("200 400 401 403 404 413 429 503");
    expect(statuses("/v1/play/{token}/{path}", "get")).toBe("200 206 302 400 401 403 404 416 503");
    expect(statuses("/v1/drm/clearkey/license", "post")).toBe("200 400 401 403 404 413 503");
    expect(statuses("/healthz", "get")).toBe("200");
    expect(resolve(at("/v1/auth/me", "get").responses["401"] ?? {}).headers).toHaveProperty(
      "WWW-Authenticate",
    );
    expect(resolve(at("/v1/telemetry", "post").responses["429"] ?? {}).headers).toMatchObject({
      "Retry-After": { required: true, schema: { type: "integer" } },
    });
    // Every documented status is one the error table answers (or a media file's answer to a
    // range past its end), and every error body is the spec's, with the codes of that status.
    const codesOf = (status: string) =>
      status === "416"
        ? ["invalid_request"]
        : Object.entries(errorStatus)
            .filter(([tag, s]) => String(s) === status && tag !== "InternalError")
            .map(([tag]) => errorCode[tag as keyof typeof errorCode]);
    for (const methods of Object.values(doc.paths))
      for (const op of Object.values(methods))
        for (const [status, response] of Object.entries(op.responses))
          if (Number(status) >= 400) {
            const codes = codesOf(status);
            expect(codes.length, status).toBeGreaterThan(0);
            expect(resolve(response).content).toEqual({
              "application/json": {
                schema: {
                  allOf: [
                    { $ref: "#/components/schemas/Error" },
                    { type: "object", properties: { error: { enum: codes }, code: { enum: codes } } },
                  ],
                },
              },
            });
          }
    expect(codesOf("409").sort()).toEqual(["conflict", "upload_in_progress"]);
  });

  it("secures API routes with a bearer token or an API key, and user-only routes with a bearer token", () => {
    expect(at("/v1/auth/signup", "post").security).toEqual([]);
    expect(at("/v1/assets", "get").security).toEqual([{ bearer: [] }, { apiKey: [] }]);
    expect(at("/v1/auth/logout", "post").security).toEqual([{ bearer: [] }]);
    expect(at("/v1/drm/entitlement", "post").security).toEqual([{ playbackToken: [] }]);
  });
});

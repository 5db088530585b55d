import { openApiDocument, operations } from "@vod/core";
import { describe, expect, it } from "vitest";

describe("OpenAPI document", () => {
  const doc = openApiDocument(operations, { title: "t", version: "1" }) as {
    openapi: string;
    paths: Record<
      string,
      Record<string, { operationId: string; responses: Record<string, unknown>; security: unknown[] }>
    >;
  };

  it("documents every operation of the catalog at its path and method, with its success status", () => {
    for (const op of operations) {
      const entry = doc.paths[op.path.replace(/:(\w+)/g, "{$1}")]?.[op.method.toLowerCase()];
      expect(entry?.operationId).toBe(op.id);
      expect(Object.keys(entry?.responses ?? {})).toContain(String(op.status));
    }
    expect(doc.openapi).toBe("3.1.0");
  });

  it("describes request and response bodies from the schemas", () => {
    const signup = doc.paths["/v1/auth/signup"]?.post as unknown as {
      requestBody: { content: { "application/json": { schema: { required: string[] } } } };
      security: unknown[];
    };
    expect(signup.requestBody.content["application/json"].schema.required).toEqual(["email", "password"]);
    expect(signup.security).toEqual([]);
    const list = doc.paths["/v1/assets"]?.get as unknown as {
      parameters: Array<{ name: string; in: string }>;
    };
    expect(list.parameters.map((p) => `${p.in}:${p.name}`)).toEqual([
      "query:status",
      "query:limit",
      "query:cursor",
    ]);
  });
});

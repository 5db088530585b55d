import { SchemaAST as AST, JSONSchema } from "effect";
import { errorCode, type VodErrorTag } from "../errors.js";
import { Resources } from "../schema/index.js";
import type { Operation } from "./operation.js";

type Json = Record<string, unknown>;

/** An optional field's type is a union with `undefined`, which JSON Schema says by `required`. */
const withoutUndefined = (ast: AST.AST): AST.AST => {
  if (!AST.isUnion(ast)) return ast;
  const members = ast.types.filter((t) => !AST.isUndefinedKeyword(t));
  return members.length === 1 && members[0] ? members[0] : AST.Union.make(members);
};

const errorsOf = (op: Operation): VodErrorTag[] => {
  const tags: VodErrorTag[] = ["InvalidRequest", "RateLimited"];
  if (op.auth !== "none") tags.push("Unauthorized", "Forbidden");
  if (op.path.includes(":")) tags.push("NotFound");
  return tags;
};

const statusOf: Partial<Record<VodErrorTag, string>> = {
  InvalidRequest: "400",
  Unauthorized: "401",
  Forbidden: "403",
  NotFound: "404",
  RateLimited: "429",
};

/**
 * The OpenAPI 3.1 document of a catalog, generated from the same schemas that validate requests
 * and encode responses, so it cannot drift from what the service does.
 */
export const openApiDocument = (
  operations: ReadonlyArray<Operation>,
  info: { title: string; version: string; serverUrl?: string },
): Json => {
  const definitions: Record<string, JSONSchema.JsonSchema7> = {};
  const toSchema = (ast: AST.AST) =>
    JSONSchema.fromAST(withoutUndefined(ast), {
      definitions,
      definitionPath: "#/components/schemas/",
      target: "openApi3.1",
    });
  const errorSchema = toSchema(Resources.ErrorBody.ast);

  const paths: Record<string, Record<string, Json>> = {};
  for (const op of operations) {
    const input = AST.encodedAST(op.input.ast);
    const parts = AST.isTypeLiteral(input) ? input.propertySignatures : [];
    const part = (name: string) => parts.find((p) => p.name === name);
    const parameters: Json[] = [];
    for (const [where, name] of [
      ["path", "params"],
      ["query", "query"],
    ] as const) {
      const fields = part(name)?.type;
      if (fields && AST.isTypeLiteral(fields))
        for (const field of fields.propertySignatures)
          parameters.push({
            name: String(field.name),
            in: where,
            required: where === "path" || !field.isOptional,
            schema: toSchema(field.type),
          });
    }
    const body = part("body");
    const responses: Json = {
      [String(op.status)]:
        op.output === null
          ? { description: "No content" }
          : {
              description: "Success",
              content: { "application/json": { schema: toSchema(AST.encodedAST(op.output.ast)) } },
            },
    };
    for (const tag of errorsOf(op))
      responses[statusOf[tag] ?? "500"] = {
        description: errorCode[tag],
        content: { "application/json": { schema: errorSchema } },
      };
    const path = op.path.replace(/:(\w+)/g, "{$1}");
    paths[path] ??= {};
    paths[path][op.method.toLowerCase()] = {
      operationId: op.id,
      summary: op.summary,
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(body
        ? {
            requestBody: {
              required: !body.isOptional,
              content: { "application/json": { schema: toSchema(body.type) } },
            },
          }
        : {}),
      responses,
      security:
        op.auth === "none"
          ? []
          : op.auth.kinds?.length === 1 && op.auth.kinds[0] === "user"
            ? [{ bearer: [] }]
            : [{ bearer: [] }, { apiKey: [] }],
      ...(op.auth === "none" ? {} : { "x-required-scope": op.auth.scope }),
    };
  }
  return {
    openapi: "3.1.0",
    info: { title: info.title, version: info.version },
    ...(info.serverUrl ? { servers: [{ url: info.serverUrl }] } : {}),
    paths,
    components: {
      schemas: definitions,
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
        apiKey: { type: "apiKey", in: "header", name: "X-API-Key" },
      },
    },
  };
};

export {
  type ErrorReply,
  errorReply,
  errorStatus,
  invalidInput,
  replyForCause,
  requestErrorOf,
  wholeRequest,
} from "./errors.js";
export {
  IDEMPOTENCY_KEY_LIFETIME_MS,
  IDEMPOTENT_REPLAYED_HEADER,
  type IdempotencyRule,
  idempotencyPrincipal,
  sweepIdempotencyKeys,
} from "./idempotency.js";
export { catalogLinks } from "./links.js";
export { openApiDocument } from "./openapi.js";
export * from "./operation.js";
export * as Operations from "./operations.js";
export { operations } from "./operations.js";

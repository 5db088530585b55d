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
  checkReadiness,
  createHttpHandler,
  type HttpHandler,
  type HttpHandlerOptions,
  type HttpMetrics,
  type OpsOptions,
  READY_TIMEOUT_MS,
  type ReadinessCheck,
} from "./handler.js";
export {
  IDEMPOTENCY_KEY_LIFETIME_MS,
  IDEMPOTENT_REPLAYED_HEADER,
  type IdempotencyRule,
  idempotencyPrincipal,
  sweepIdempotencyKeys,
} from "./idempotency.js";
export { catalogLinks } from "./links.js";
export { answerClientError, type HttpLogger, loggedPath, type TrustProxy } from "./node.js";
export { openApiDocument } from "./openapi.js";
export * from "./operation.js";
export * as Operations from "./operations.js";
export { operations } from "./operations.js";

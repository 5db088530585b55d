export { type FieldIssue, inputProblems, MAX_INPUT_DEPTH } from "./input.js";
export * as Requests from "./requests.js";
export * as Resources from "./resources.js";

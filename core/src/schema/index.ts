export * as Requests from "./requests.js";
export * as Resources from "./resources.js";

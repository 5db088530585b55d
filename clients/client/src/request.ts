import { errorOf, VodError } from "./errors.js";
import { operationRoutes, type operations } from "./generated/openapi.js";
import { backoffMs, defaultRetry, type RetryPolicy, sleep, transientStatus } from "./retry.js";

export type OperationId = keyof operations & keyof typeof operationRoutes;

type Params<O extends OperationId> = operations[O]["parameters"];
type Part<O extends OperationId, K extends "path" | "query" | "header"> = Params<O>[K];

type JsonBodyOf<O extends OperationId> = [NonNullable<operations[O]["requestBody"]>] extends [never]
  ? undefined
  : NonNullable<operations[O]["requestBody"]> extends { content: { "application/json": infer B } }
    ? B
    : // A body that is not JSON (a part's bytes).
      Blob | ArrayBuffer | Uint8Array | ReadableStream<Uint8Array> | string;

type Responses<O extends OperationId> = operations[O]["responses"];
type JsonOf<R> = R extends { content: { "application/json": infer J } }
  ? J
  : R extends { content: object }
    ? Response
    : undefined;

/** What a successful call resolves to: its JSON body, undefined for 204, the Response when the body is not JSON. */
export type ResultOf<O extends OperationId> =
  Responses<O> extends { 200: infer R }
    ? JsonOf<R>
    : Responses<O> extends { 201: infer R }
      ? JsonOf<R>
      : Responses<O> extends { 202: infer R }
        ? JsonOf<R>
        : undefined;

/** The parts of one call: path parameters when its path has any, query, body, extra headers. */
export type RequestInput<O extends OperationId> = (undefined extends Part<O, "path">
  ? { readonly path?: undefined }
  : { readonly path: Part<O, "path"> }) & {
  readonly query?: Part<O, "query">;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: JsonBodyOf<O>;
  readonly signal?: AbortSignal;
};

export interface ClientOptions {
  /** Where the API answers, e.g. `https://api.example.com` (no trailing `/v1`). */
  readonly baseUrl: string;
  /** An API key (`vod_…`), sent as X-API-Key. Never in a public page. */
  readonly apiKey?: string;
  /** A user's access token, or a function giving the current one (called for every request). */
  readonly accessToken?: string | (() => string | Promise<string>);
  /** The media and DRM apps, when they are not at `baseUrl` (VOD_MEDIA_URL, VOD_DRM_URL). */
  readonly mediaUrl?: string;
  readonly drmUrl?: string;
  /** Retries of calls that are safe to repeat; the default: 4 more attempts, 300 ms doubling. */
  readonly retry?: Partial<RetryPolicy>;
  /** Another fetch (a test's, a proxy agent's); the global one by default. */
  readonly fetch?: typeof fetch;
}

export interface Transport {
  readonly options: ClientOptions;
  readonly retry: RetryPolicy;
  readonly fetch: typeof fetch;
  readonly request: <O extends OperationId>(operationId: O, input: RequestInput<O>) => Promise<ResultOf<O>>;
}

const trimSlash = (url: string) => url.replace(/\/+$/, "");

const newIdempotencyKey = () =>
  typeof crypto !== "undefined" && typeof crypto.randomUUID === "function"
    ? crypto.randomUUID()
    : `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;

export const createTransport = (options: ClientOptions): Transport => {
  if (!options.baseUrl) throw new TypeError("createClient: baseUrl is required");
  const retry = { ...defaultRetry, ...options.retry };
  const doFetch = options.fetch ?? ((...args: Parameters<typeof fetch>) => fetch(...args));
  const origins: Record<string, string> = {
    api: trimSlash(options.baseUrl),
    media: trimSlash(options.mediaUrl ?? options.baseUrl),
    drm: trimSlash(options.drmUrl ?? options.baseUrl),
  };

  const credentials = async (): Promise<Record<string, string>> => {
    if (options.apiKey) return { "x-api-key": options.apiKey };
    if (options.accessToken === undefined) return {};
    const token =
      typeof options.accessToken === "function" ? await options.accessToken() : options.accessToken;
    return { authorization: `Bearer ${token}` };
  };

  const request = async <O extends OperationId>(
    operationId: O,
    input: RequestInput<O>,
  ): Promise<ResultOf<O>> => {
    const route = operationRoutes[operationId];
    const path = route.path.replace(/\{(\w+)\}/g, (_, name: string) => {
      const value = (input.path as Record<string, unknown> | undefined)?.[name];
      if (value === undefined || value === "")
        throw new TypeError(`${operationId}: path parameter ${name} is required`);
      return encodeURIComponent(String(value));
    });
    const url = new URL(`${origins[route.app]}${path}`);
    for (const [name, value] of Object.entries((input.query ?? {}) as Record<string, unknown>))
      if (value !== undefined && value !== null) url.searchParams.set(name, String(value));
    const headers: Record<string, string> = { ...(await credentials()), ...input.headers };
    let body: BodyInit | undefined;
    const given = input.body as unknown;
    if (given !== undefined) {
      const binary =
        given instanceof Blob ||
        given instanceof ArrayBuffer ||
        given instanceof Uint8Array ||
        (typeof ReadableStream !== "undefined" && given instanceof ReadableStream) ||
        typeof given === "string";
      body = binary ? (given as BodyInit) : JSON.stringify(given);
      if (!binary) headers["content-type"] = "application/json";
    }
    // A POST under an Idempotency-Key replays its first answer: safe to send again, like a GET.
    if (route.idempotencyKey && !Object.keys(headers).some((h) => h.toLowerCase() === "idempotency-key"))
      headers["idempotency-key"] = newIdempotencyKey();
    const repeatable = route.method !== "POST" || route.idempotencyKey;
    const retries = repeatable && !(body instanceof ReadableStream) ? retry.retries : 0;

    for (let attempt = 0; ; attempt++) {
      let res: Response;
      try {
        res = await doFetch(url, { method: route.method, headers, body, signal: input.signal });
      } catch (cause) {
        if (input.signal?.aborted) throw cause;
        if (attempt < retries) {
          await sleep(backoffMs(retry, attempt), input.signal);
          continue;
        }
        throw new VodError(
          0,
          "network_error",
          `${route.method} ${url.pathname}: ${String(cause)}`,
          undefined,
          undefined,
          {
            cause,
          },
        );
      }
      if (res.ok) {
        if (res.status === 204) return undefined as ResultOf<O>;
        if ((res.headers.get("content-type") ?? "").includes("application/json"))
          return (await res.json()) as ResultOf<O>;
        return res as unknown as ResultOf<O>;
      }
      // A 409 under an Idempotency-Key is the first attempt still running: worth waiting for too.
      const again =
        transientStatus(res.status) || (res.status === 409 && route.idempotencyKey && attempt > 0);
      if (again && attempt < retries) {
        await res.body?.cancel().catch(() => undefined);
        await sleep(backoffMs(retry, attempt, res.headers.get("retry-after")), input.signal);
        continue;
      }
      throw await errorOf(res);
    }
  };

  return { options, retry, fetch: doFetch, request };
};

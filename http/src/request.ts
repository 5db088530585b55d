import type { Credentials, RequestedRange } from "@vod/core";

// The request a host hands to an operation and the reply it gets back: apart from `operation.ts`
// so that the Idempotency-Key wrapper, which the operations run through, can read them too.

/** What the host's own routes answer from: the same for every request a handler takes. */
export interface HostContext {
  /** `/readyz`: each dependency's check, settled as `ok` or `failed`. */
  readonly readiness: () => Promise<Readonly<Record<string, "ok" | "failed">>>;
  /** `/metrics`: the registry's text and its content type; absent, there is no such route (404). */
  readonly metrics?: { readonly contentType: string; render(): Promise<string> } | undefined;
  /** When set, `/metrics` needs it as a bearer. */
  readonly metricsToken?: string | undefined;
  /** The OpenAPI document of the routes served. */
  readonly document?: unknown;
  /** Whether a page of `origin` may call the API (its CORS). */
  readonly corsAllows: (origin: string | undefined) => boolean;
}

/** A request as any host hands it over: decoded values, no framework types. */
export interface RawRequest {
  /** The method and path as sent, for what names them back (`no route for GET /x`). */
  readonly method?: string;
  readonly path?: string;
  readonly params: Readonly<Record<string, string>>;
  readonly query: unknown;
  /** Parsed JSON for a JSON body, the text for a text body (`BodyKind`), absent otherwise. */
  readonly body: unknown;
  readonly credentials: Credentials;
  readonly clientIp: string;
  readonly requestId: string;
  /** The request's headers, names in lower case; read only where a credential travels in one. */
  readonly headers?: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>;
  /** The body's bytes as they arrive, for a `stream` body: nothing buffers it. */
  readonly stream?: AsyncIterable<Uint8Array>;
  /** The Range header as the host's HTTP layer reads it, for a `file` reply. */
  readonly range?: RequestedRange;
  /** For the host's own routes. */
  readonly host?: HostContext;
}

/** A header of the request, when sent once (names in lower case). */
export const headerOf = (request: Pick<RawRequest, "headers">, name: string): string | undefined => {
  const value = request.headers?.[name];
  return typeof value === "string" ? value : undefined;
};

export interface Reply {
  readonly status: number;
  /** JSON; absent for a reply without body (204, headers only, a redirect). */
  readonly body?: unknown;
  readonly headers?: Readonly<Record<string, string>>;
  /** A body that is not JSON, streamed as it comes (a media file). */
  readonly stream?: AsyncIterable<Uint8Array>;
}

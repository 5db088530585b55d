import { errorOf, VodError } from "./errors.js";
import type { OperationId, RequestInput, ResultOf, Transport } from "./request.js";
import { backoffMs, defaultRetry, sleep, transientStatus } from "./retry.js";
import { type CompletedUpload, type UploadOptions, uploadFile } from "./upload.js";

export interface EndpointUploadOptions extends Omit<UploadOptions, "assetId"> {
  /**
   * A URL of the page's own server (relative ones are taken from the page's address) that starts
   * and completes upload sessions with its API key, so that no key reaches the browser:
   * `POST {endpoint}` `{size_bytes, name}` answers `{upload}` as `POST /v1/uploads` does;
   * `POST {endpoint}/complete` `{upload_id, parts}` answers `{upload, asset}` as
   * `POST /v1/uploads/{id}/complete` does; `POST {endpoint}/resume` `{upload_id}` answers
   * `{upload}` as `GET /v1/uploads/{id}` does (fresh URLs when the held ones expired).
   */
  readonly endpoint: string | URL;
  /** Sent as `name` when the session is asked for: the file's name by default. */
  readonly name?: string;
  /** Extra headers for the endpoint (a CSRF token, the page's own credentials). */
  readonly headers?: Readonly<Record<string, string>>;
  /** Another fetch; the global one by default. */
  readonly fetch?: typeof fetch;
}

const baseOf = () => (typeof document !== "undefined" ? document.baseURI : undefined);

/**
 * Uploads a Blob or File through a page's endpoint: the page's server starts the session (and
 * creates the asset) with its key, the bytes go straight from here to the part URLs (parallel,
 * retried, fresh URLs asked at `/resume` when they expire), and the server completes it.
 */
export const uploadThroughEndpoint = (options: EndpointUploadOptions): Promise<CompletedUpload> => {
  const doFetch = options.fetch ?? ((...args: Parameters<typeof fetch>) => fetch(...args));
  const endpoint = new URL(String(options.endpoint), baseOf()).href.replace(/\/+$/, "");
  const name =
    options.name ??
    (typeof File !== "undefined" && options.file instanceof File ? options.file.name : "upload");

  // Starting creates an asset on the server: sent once. Resuming and completing are safe to repeat.
  const post = async (url: string, body: unknown, retries: number, signal?: AbortSignal) => {
    for (let attempt = 0; ; attempt++) {
      let res: Response;
      try {
        res = await doFetch(url, {
          method: "POST",
          headers: { ...options.headers, "content-type": "application/json" },
          body: JSON.stringify(body),
          signal,
        });
      } catch (cause) {
        if (signal?.aborted || attempt >= retries)
          throw new VodError(0, "network_error", `POST ${url}: ${String(cause)}`, undefined, undefined, {
            cause,
          });
        await sleep(backoffMs(defaultRetry, attempt), signal);
        continue;
      }
      if (res.ok) return res.json();
      if (transientStatus(res.status) && attempt < retries) {
        await res.body?.cancel().catch(() => undefined);
        await sleep(backoffMs(defaultRetry, attempt, res.headers.get("retry-after")), signal);
        continue;
      }
      throw await errorOf(res);
    }
  };

  const request = async <O extends OperationId>(
    operationId: O,
    input: RequestInput<O>,
  ): Promise<ResultOf<O>> => {
    const given = input as { path?: { id?: string }; body?: { size_bytes?: number; parts?: unknown } };
    const { signal } = input;
    switch (operationId) {
      case "startUpload":
        return post(endpoint, { size_bytes: given.body?.size_bytes, name }, 0, signal);
      case "resumeUpload":
        return post(`${endpoint}/resume`, { upload_id: given.path?.id }, defaultRetry.retries, signal);
      case "completeUpload":
        return post(
          `${endpoint}/complete`,
          { upload_id: given.path?.id, parts: given.body?.parts },
          defaultRetry.retries,
          signal,
        );
      default:
        throw new TypeError(`an upload endpoint does not answer ${operationId}`);
    }
  };

  const transport: Transport = {
    options: { baseUrl: endpoint },
    retry: defaultRetry,
    fetch: doFetch,
    request,
  };
  const { endpoint: _endpoint, name: _name, headers: _headers, fetch: _fetch, ...upload } = options;
  return uploadFile(transport, upload);
};

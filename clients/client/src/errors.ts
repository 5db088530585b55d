/**
 * Every failure of a call: an answer of the API (its spec error body: `code`, `details`, the HTTP
 * `status`), or no answer at all (`status` 0, `code` "network_error", the cause kept).
 */
export class VodError extends Error {
  override readonly name = "VodError";
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
    /** The `x-request-id` of the answer, to quote when reporting it. */
    readonly requestId?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** An asset waited for that failed processing instead of becoming ready. */
export class AssetFailed extends Error {
  override readonly name = "AssetFailed";
  constructor(readonly asset: { readonly id: string; readonly failure_code: string | null }) {
    super(`asset ${asset.id} failed: ${asset.failure_code ?? "unknown"}`);
  }
}

/** The error of a non-2xx answer, from the spec's JSON body when there is one. */
export const errorOf = async (res: Response): Promise<VodError> => {
  const text = await res.text().catch(() => "");
  let body: { code?: unknown; message?: unknown; details?: unknown } = {};
  try {
    body = JSON.parse(text);
  } catch {
    // Not the API's JSON (a proxy's page, an object store's XML): the status says it.
  }
  const code = typeof body.code === "string" ? body.code : `http_${res.status}`;
  const message = typeof body.message === "string" ? body.message : text.slice(0, 200) || res.statusText;
  return new VodError(res.status, code, message, body.details, res.headers.get("x-request-id") ?? undefined);
};

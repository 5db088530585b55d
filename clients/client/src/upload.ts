import { errorOf, VodError } from "./errors.js";
import type { components } from "./generated/openapi.js";
import type { Transport } from "./request.js";
import { backoffMs, sleep, transientStatus } from "./retry.js";

type Schemas = components["schemas"];

export interface UploadProgress {
  readonly uploadId: string;
  /** Bytes of the parts stored so far, those of an earlier run included. */
  readonly uploadedBytes: number;
  readonly totalBytes: number;
  /** Bytes found stored when this run started (a resumed upload). */
  readonly resumedBytes: number;
  readonly partsDone: number;
  readonly partCount: number;
}

/** The session as started or resumed: what a caller keeps to resume it later. */
export interface UploadSessionInfo {
  readonly id: string;
  readonly asset_id: string;
  readonly part_size: number;
  readonly part_count: number;
  readonly size_bytes: number;
  readonly expires_at: number;
}

export interface UploadOptions {
  readonly assetId: string;
  /** A Blob or File; in Node also a file path (read part by part, never whole). */
  readonly file: Blob | string;
  /** Parts sent at once (default 4). */
  readonly parallel?: number;
  readonly onProgress?: (progress: UploadProgress) => void;
  /**
   * An upload session started earlier for the same file: the parts it has are not sent again,
   * and fresh URLs are asked for the others. Expired or aborted, a new session is started.
   */
  readonly uploadId?: string;
  /** Told the session before any byte is sent: keep its id to resume after a crash. */
  readonly onSession?: (session: UploadSessionInfo) => void | Promise<void>;
  /** Attempts after the first for one part (default 6). */
  readonly partRetries?: number;
  readonly signal?: AbortSignal;
}

/** What `upload` resolves to: the completed session and the asset, now uploaded. */
export interface CompletedUpload {
  readonly upload: Schemas["UploadSession"];
  readonly asset: Schemas["Asset"];
}

interface Plan {
  readonly session: UploadSessionInfo;
  readonly urls: Map<number, string>;
  readonly etags: Map<number, string | undefined>;
}

const sizeOfPart = (s: UploadSessionInfo, n: number) =>
  n < s.part_count ? s.part_size : s.size_bytes - s.part_size * (s.part_count - 1);

/**
 * Sends a file as an upload session's parts, `parallel` at a time, straight to the part URLs;
 * retries a part that fails for a passing reason (network, 5xx, 429) with backoff, asks
 * `GET /v1/uploads/{id}` for fresh URLs when one is refused as expired, and completes the session.
 * Given `uploadId`, sends only the parts that session lacks.
 */
export const uploadFile = async (
  transport: Transport,
  // Without an asset (an upload through a page's endpoint), the endpoint's server creates it.
  options: Omit<UploadOptions, "assetId"> & { readonly assetId?: string },
): Promise<CompletedUpload> => {
  const { signal } = options;
  const path = typeof options.file === "string" ? options.file : undefined;
  const nodeFile = path === undefined ? undefined : await import("./node-file.js");
  const blob =
    path === undefined || nodeFile === undefined ? (options.file as Blob) : await nodeFile.openFile(path);
  const parallel = Math.max(1, Math.floor(options.parallel ?? 4));
  const partRetries = options.partRetries ?? 6;

  const resume = (id: string) => transport.request("resumeUpload", { path: { id }, signal });

  const start = async (): Promise<Plan> => {
    const { upload } = await transport.request("startUpload", {
      body: { asset_id: options.assetId ?? "", size_bytes: blob.size },
      signal,
    });
    const { id, asset_id, part_size, part_count, size_bytes, expires_at } = upload;
    return {
      session: { id, asset_id, part_size, part_count, size_bytes, expires_at },
      urls: new Map(upload.parts.map((p) => [p.number, p.url])),
      etags: new Map(),
    };
  };

  let plan: Plan | undefined;
  if (options.uploadId !== undefined) {
    const { upload } = await resume(options.uploadId);
    if (
      (options.assetId !== undefined && upload.asset_id !== options.assetId) ||
      upload.size_bytes !== blob.size
    )
      throw new TypeError(
        `upload ${upload.id} is of asset ${upload.asset_id}, ${upload.size_bytes} bytes: not this file (${blob.size} bytes)`,
      );
    // Completed already (a run that died after completing): completing again answers the same.
    if (upload.status === "completed")
      return transport.request("completeUpload", { path: { id: upload.id }, body: {}, signal });
    if (upload.status === "created") {
      const { id, asset_id, part_size, part_count, size_bytes, expires_at } = upload;
      plan = {
        session: { id, asset_id, part_size, part_count, size_bytes, expires_at },
        urls: new Map(upload.missing_part_urls.map((p) => [p.number, p.url])),
        etags: new Map(upload.uploaded_parts.map((p) => [p.number, p.etag])),
      };
    }
  }
  plan ??= await start();
  const { session, urls, etags } = plan;
  await options.onSession?.(session);

  const resumedBytes = [...etags.keys()].reduce((sum, n) => sum + sizeOfPart(session, n), 0);
  let uploadedBytes = resumedBytes;
  const report = () =>
    options.onProgress?.({
      uploadId: session.id,
      uploadedBytes,
      totalBytes: session.size_bytes,
      resumedBytes,
      partsDone: etags.size,
      partCount: session.part_count,
    });
  report();

  // URLs refused as expired: one resume fetches fresh ones for every part still missing.
  let refreshing: Promise<void> | undefined;
  const refreshUrls = () => {
    refreshing ??= resume(session.id)
      .then(({ upload }) => {
        if (upload.status !== "created")
          throw new VodError(409, "upload_in_progress", `upload is ${upload.status}`);
        for (const p of upload.missing_part_urls) urls.set(p.number, p.url);
      })
      .finally(() => {
        refreshing = undefined;
      });
    return refreshing;
  };

  // One failure stops every part: no bytes are sent for an upload that cannot complete.
  const stop = new AbortController();
  const onAbort = () => stop.abort(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  const partSignal = stop.signal;

  // A path in Node goes over node:http, unless the caller routes every request through its own fetch.
  const fileSender =
    path !== undefined && nodeFile !== undefined && transport.options.fetch === undefined
      ? await nodeFile.filePartSender(path, parallel)
      : undefined;

  const sendPart = async (n: number) => {
    const from = (n - 1) * session.part_size;
    const length = sizeOfPart(session, n);
    const put = (url: string) =>
      fileSender
        ? fileSender.send(url, from, length, partSignal)
        : transport.fetch(url, { method: "PUT", body: blob.slice(from, from + length), signal: partSignal });
    for (let attempt = 0; ; attempt++) {
      const url = urls.get(n);
      if (url === undefined) throw new Error(`no URL for part ${n}`);
      let res: Response | undefined;
      let failure: unknown;
      await fileSender?.unchanged();
      try {
        res = await put(url);
      } catch (cause) {
        if (partSignal.aborted) throw partSignal.reason ?? cause;
        failure = cause;
      }
      if (res?.ok) {
        // Read to its (empty) end: a cancelled body is an aborted request to a browser.
        await res.arrayBuffer().catch(() => undefined);
        etags.set(n, res.headers.get("etag") ?? undefined);
        uploadedBytes += length;
        report();
        return;
      }
      const expired = res !== undefined && (res.status === 401 || res.status === 403);
      const passing = res === undefined || transientStatus(res.status) || expired;
      if (!passing || attempt >= partRetries) {
        if (res) throw await errorOf(res);
        throw new VodError(0, "network_error", `part ${n}: ${String(failure)}`, undefined, undefined, {
          cause: failure,
        });
      }
      const retryAfter = res?.headers.get("retry-after");
      await res?.body?.cancel().catch(() => undefined);
      if (expired) await refreshUrls();
      else await sleep(backoffMs(transport.retry, attempt, retryAfter), partSignal);
    }
  };

  const queue = Array.from({ length: session.part_count }, (_, i) => i + 1).filter((n) => !etags.has(n));
  const worker = async () => {
    for (let n = queue.shift(); n !== undefined; n = queue.shift()) await sendPart(n);
  };
  try {
    await Promise.all(
      Array.from({ length: Math.min(parallel, queue.length) }, () =>
        worker().catch((error: unknown) => {
          stop.abort(error);
          throw error;
        }),
      ),
    );
  } finally {
    signal?.removeEventListener("abort", onAbort);
    await fileSender?.close();
  }

  const parts = [...etags.entries()]
    .sort(([a], [b]) => a - b)
    .map(([number, etag]) => (etag === undefined ? { number } : { number, etag }));
  return transport.request("completeUpload", { path: { id: session.id }, body: { parts }, signal });
};

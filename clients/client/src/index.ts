import { AssetFailed, VodError } from "./errors.js";
import type { components, operations } from "./generated/openapi.js";
import {
  type ClientOptions,
  createTransport,
  type OperationId,
  type RequestInput,
  type ResultOf,
} from "./request.js";
import { sleep } from "./retry.js";
import { type CompletedUpload, type UploadOptions, uploadFile } from "./upload.js";

export { type EndpointUploadOptions, uploadThroughEndpoint } from "./endpoint.js";
export { AssetFailed, VodError } from "./errors.js";
export type { components, operations, paths } from "./generated/openapi.js";
export { operationRoutes } from "./generated/openapi.js";
export type { ClientOptions, OperationId, RequestInput, ResultOf } from "./request.js";
export type { CompletedUpload, UploadOptions, UploadProgress, UploadSessionInfo } from "./upload.js";
export {
  verifyWebhook,
  type WebhookEvent,
  type WebhookEventType,
  WebhookVerificationError,
} from "./webhooks.js";

type Schemas = components["schemas"];
export type Asset = Schemas["Asset"];
export type AssetStatus = Asset["status"];
export type CreateAssetInput = Schemas["CreateAssetRequest"];
export type UpdateAssetInput = Schemas["UpdateAssetRequest"];
export type PlaybackSessionCreated = Schemas["PlaybackSessionCreated"];
export type ListAssetsQuery = Omit<NonNullable<operations["listAssets"]["parameters"]["query"]>, "cursor">;

/** Every asset of a list, page after page (`for await`); `pages()` gives the pages themselves. */
export interface AssetList extends AsyncIterable<Asset> {
  pages(): AsyncIterable<ResultOf<"listAssets">>;
}

export interface WaitOptions {
  /** Give up after this long (default 10 minutes). */
  readonly timeoutMs?: number;
  /** Between two looks (default 1 s). */
  readonly intervalMs?: number;
  readonly signal?: AbortSignal;
}

export const createClient = (options: ClientOptions) => {
  const transport = createTransport(options);
  const { request } = transport;

  const list = (query: ListAssetsQuery = {}): AssetList => {
    const pages = async function* () {
      let cursor: string | undefined;
      do {
        const page = await request("listAssets", { query: { ...query, cursor } });
        yield page;
        cursor = page.next_cursor ?? undefined;
      } while (cursor !== undefined);
    };
    return {
      pages,
      async *[Symbol.asyncIterator]() {
        for await (const page of pages()) yield* page.data;
      },
    };
  };

  const get = async (id: string) => (await request("getAsset", { path: { id } })).asset;

  const assets = {
    create: async (input: CreateAssetInput = {}) => (await request("createAsset", { body: input })).asset,
    get,
    update: async (id: string, patch: UpdateAssetInput) =>
      (await request("updateAsset", { path: { id }, body: patch })).asset,
    delete: async (id: string): Promise<void> => {
      await request("deleteAsset", { path: { id } });
    },
    list,
    /** Resolves with the asset once it is ready; rejects with `AssetFailed` if it fails instead. */
    waitUntilReady: async (id: string, wait: WaitOptions = {}): Promise<Asset> => {
      const until = Date.now() + (wait.timeoutMs ?? 600_000);
      for (;;) {
        const asset = await get(id);
        if (asset.status === "ready") return asset;
        if (asset.status === "failed") throw new AssetFailed(asset);
        if (Date.now() > until)
          throw new VodError(
            0,
            "timeout",
            `asset ${id} is still ${asset.status} after ${wait.timeoutMs ?? 600_000} ms`,
          );
        await sleep(wait.intervalMs ?? 1000, wait.signal);
      }
    },
  };

  const uploads = {
    /** Uploads `file` as the asset's bytes and completes the session (see `UploadOptions`). */
    upload: (upload: UploadOptions): Promise<CompletedUpload> => uploadFile(transport, upload),
    start: (body: Schemas["StartUploadRequest"]) => request("startUpload", { body }),
    resume: (id: string) => request("resumeUpload", { path: { id } }),
    complete: (id: string, body: Schemas["CompleteUploadRequest"] = {}) =>
      request("completeUpload", { path: { id }, body }),
    abort: async (id: string): Promise<void> => {
      await request("abortUpload", { path: { id } });
    },
  };

  const playback = {
    /** A playback session of the asset: its token and the manifest, telemetry (and entitlement) URLs. */
    createSession: ({
      assetId,
      ttlSeconds,
    }: {
      assetId: string;
      ttlSeconds?: number;
    }): Promise<PlaybackSessionCreated> =>
      request("createPlaybackSession", {
        body:
          ttlSeconds === undefined ? { asset_id: assetId } : { asset_id: assetId, ttl_seconds: ttlSeconds },
      }),
    revokeSession: async (id: string): Promise<void> => {
      await request("revokePlaybackSession", { path: { id } });
    },
  };

  return {
    assets,
    uploads,
    playback,
    /** Any operation of the API by its operationId, typed from the OpenAPI document. */
    request: <O extends OperationId>(operationId: O, input: RequestInput<O>): Promise<ResultOf<O>> =>
      request(operationId, input),
  };
};

export type VodClient = ReturnType<typeof createClient>;

import { Effect, Option } from "effect";
import type { VodConfig } from "../config.js";
import { type Asset, assetDetailsChange, newAssetDraft, staticRenditionsDue } from "../domain/asset.js";
import { AssetId, type TenantId, type UploadId } from "../domain/ids.js";
import { chunksPrefix, originKey, renditionsPrefix, textTracksPrefix } from "../domain/object-keys.js";
import { InvalidRequest, NotFound, type StorageError } from "../errors.js";
import { type Job, JobFailed } from "../ports/job-queue.js";
import type { AssetKey } from "../ports/repositories.js";
import type { Requests } from "../schema/index.js";
import type { VodPorts } from "../tokens.js";
import type { Principal } from "./authenticate.js";
import { constantTimeEqual, hmacBase64Url, orNotFound } from "./support.js";
import { eventRecorder } from "./webhooks.js";

type ListInput = typeof Requests.ListAssetsQuery.Type;
type CreateInput = typeof Requests.CreateAssetBody.Type;
type UpdateInput = typeof Requests.UpdateAssetBody.Type;

/** Ends and revokes an asset's playback sessions (playback-sessions.ts). */
type EndPlayback = (tenantId: TenantId, assetId: AssetId) => Effect.Effect<void, StorageError>;

const assetNotFound = () => new NotFound({ message: "asset not found" });

/** DECISIONS: a DRM asset has no clear copy anywhere, so no static rendition either. */
const drmRefusesMp4 = () =>
  new InvalidRequest({
    message: "mp4_support: a DRM asset cannot have static renditions",
    details: {
      fields: [{ path: ["mp4_support"], message: "must be none for a DRM asset (drm: true)" }],
    },
  });

/**
 * Keyset cursors: base64url of "created_at.id", a dot, and an HMAC of it bound to the tenant, so a
 * client can neither forge a position nor carry one to another tenant.
 */
export const makeCursors = (secret: Uint8Array) => {
  const sign = (tenantId: TenantId, payload: string) =>
    hmacBase64Url(secret, `${tenantId}\n${payload}`).slice(0, 22);
  const encode = (tenantId: TenantId, key: AssetKey): string => {
    const payload = Buffer.from(`${key.created_at}.${key.id}`).toString("base64url");
    return `${payload}.${sign(tenantId, payload)}`;
  };
  const decode = (tenantId: TenantId, cursor: string): Effect.Effect<AssetKey, InvalidRequest> => {
    const bad = new InvalidRequest({
      message: "invalid cursor",
      details: { fields: [{ path: ["cursor"], message: "is not a cursor this service issued" }] },
    });
    const [payload, mac, ...rest] = cursor.split(".");
    if (!payload || !mac || rest.length > 0 || !constantTimeEqual(mac, sign(tenantId, payload)))
      return Effect.fail(bad);
    const text = Buffer.from(payload, "base64url").toString("utf8");
    const dot = text.indexOf(".");
    const createdAt = Number(text.slice(0, dot));
    const id = text.slice(dot + 1);
    if (dot < 1 || !Number.isSafeInteger(createdAt) || id.length === 0) return Effect.fail(bad);
    return Effect.succeed({ created_at: createdAt, id: AssetId(id) });
  };
  return { encode, decode };
};

/**
 * Whether a change of mp4_support from `before` to `after` leaves the static renditions' job work
 * now: files to remove (a job that planned them is running or ran), or files to make.
 */
const staticRenditionsJobDue = (before: Asset, after: Asset) =>
  after.mp4_support === "none" ? before.static_renditions.length > 0 : staticRenditionsDue(after);

export const makeAssets = (ports: VodPorts, config: VodConfig, endPlayback: EndPlayback) => {
  const { clock, ids, storage, objectStore } = ports;
  const cursors = makeCursors(config.cursorSecret);
  const recordEvent = eventRecorder(ports);

  // Chained rather than Effect.gen: this is the API's busiest read, and a generator's steps were a
  // visible share of its CPU.
  const list = (principal: Principal, input: ListInput) => {
    const tenantId = principal.tenant.id;
    const page = (after: AssetKey | undefined) =>
      Effect.map(
        // One row more than asked tells whether another page exists without a count query.
        storage.assets.list(tenantId, { status: input.status, limit: input.limit + 1, after }),
        (rows) => {
          const data = rows.length > input.limit ? rows.slice(0, input.limit) : rows;
          const last = data[data.length - 1];
          const next_cursor = rows.length > input.limit && last ? cursors.encode(tenantId, last) : null;
          return { data, next_cursor };
        },
      );
    return input.cursor === undefined
      ? page(undefined)
      : Effect.flatMap(cursors.decode(tenantId, input.cursor), page);
  };

  const create = (principal: Principal, input: CreateInput) =>
    Effect.gen(function* () {
      if (input.drm === true && input.mp4_support === "standard") return yield* Effect.fail(drmRefusesMp4());
      const asset = newAssetDraft({
        id: ids.id("asset"),
        tenant_id: principal.tenant.id,
        title: input.title,
        drm: input.drm,
        mp4_support: input.mp4_support,
        now: clock.now(),
      });
      yield* storage.transaction((tx) =>
        Effect.zipRight(
          tx.assets.insert(asset),
          recordEvent(tx, asset.tenant_id, "asset.created", { asset }),
        ),
      );
      return { asset };
    });

  const get = (principal: Principal, id: AssetId) =>
    Effect.map(orNotFound("asset")(storage.assets.get(principal.tenant.id, id)), (asset) => ({ asset }));

  /**
   * Title, visibility and mp4_support; nothing else of an asset is the client's to change. A
   * change of mp4_support enqueues the static renditions' job when it has something to do now:
   * making them for an asset whose ladder is complete (else processing enqueues it when it is),
   * removing them when turned off. The tenant is locked first, as processing locks it before it
   * saves, so that of this and the ladder's completion exactly one sees the other.
   */
  const update = (principal: Principal, id: AssetId, input: UpdateInput) =>
    storage.transaction((tx) =>
      Effect.gen(function* () {
        const tenantId = principal.tenant.id;
        if (input.mp4_support !== undefined) yield* tx.tenants.lock(tenantId);
        const asset = yield* orNotFound("asset")(tx.assets.get(tenantId, id));
        if (asset.drm_enabled && input.mp4_support === "standard") return yield* Effect.fail(drmRefusesMp4());
        const change = assetDetailsChange(asset, input, clock.now());
        const updated = yield* tx.assets.updateDetails(tenantId, id, change);
        if (Option.isNone(updated)) return yield* Effect.fail(assetNotFound());
        if (change.mp4_support !== undefined && staticRenditionsJobDue(asset, updated.value))
          yield* tx.jobs.enqueue("static-renditions", { tenant_id: tenantId, asset_id: id });
        yield* recordEvent(tx, tenantId, "asset.updated", { asset: updated.value });
        return { asset: updated.value };
      }),
    );

  /**
   * Deletes the asset at once (404 from then on), aborts its open upload, and leaves its objects to
   * the `delete-asset` job, enqueued in the same transaction: no deleted asset without its job.
   * Its playback sessions are ended and revoked after the commit; the job does it again, which
   * covers a revocation that failed here and a session created while the delete ran.
   */
  const remove = (principal: Principal, id: AssetId) =>
    Effect.gen(function* () {
      const tenantId = principal.tenant.id;
      yield* storage.transaction((tx) =>
        Effect.gen(function* () {
          const asset = yield* orNotFound("asset")(tx.assets.get(tenantId, id));
          if (!(yield* tx.assets.remove(tenantId, id, clock.now())))
            return yield* Effect.fail(assetNotFound());
          const open = yield* tx.uploads.findOpen(tenantId, id);
          const uploadIds: UploadId[] = [];
          if (Option.isSome(open) && (yield* tx.uploads.close(tenantId, open.value.id, "aborted"))) {
            uploadIds.push(open.value.id);
            yield* recordEvent(tx, tenantId, "upload.aborted", {
              upload: { ...open.value, status: "aborted" },
              asset,
            });
          }
          yield* recordEvent(tx, tenantId, "asset.deleted", { asset });
          yield* tx.jobs.enqueue("delete-asset", {
            tenant_id: tenantId,
            asset_id: id,
            upload_ids: uploadIds,
          });
        }),
      );
      yield* endPlayback(tenantId, id);
    });

  /**
   * The `delete-asset` job: sessions revoked, open uploads' parts aborted, origin, renditions
   * and text tracks removed. Every step is harmless to repeat (at least once delivery). An upload started while
   * the delete ran is found open here and closed too.
   */
  const removeObjects = (job: Job<"delete-asset">): Effect.Effect<void, JobFailed> =>
    Effect.gen(function* () {
      const { tenant_id, asset_id, upload_ids } = job.data;
      yield* endPlayback(tenant_id, asset_id);
      const late = yield* storage.uploads.findOpen(tenant_id, asset_id);
      if (Option.isSome(late)) yield* storage.uploads.close(tenant_id, late.value.id, "aborted");
      const uploads = Option.isSome(late) ? [...upload_ids, late.value.id] : upload_ids;
      const key = originKey(tenant_id, asset_id);
      yield* Effect.forEach(uploads, (uploadId) => objectStore.abortMultipart({ uploadId, key }), {
        discard: true,
      });
      // Ids have a fixed length, so no other asset's origin key starts with this one.
      yield* objectStore.deletePrefix(key);
      yield* objectStore.deletePrefix(renditionsPrefix(tenant_id, asset_id));
      yield* objectStore.deletePrefix(chunksPrefix(tenant_id, asset_id));
      yield* objectStore.deletePrefix(textTracksPrefix(tenant_id, asset_id));
    }).pipe(
      Effect.catchTag(
        "StorageError",
        (e): Effect.Effect<never, JobFailed> => Effect.fail(new JobFailed({ message: e.message, cause: e })),
      ),
    );

  return { list, create, get, update, remove, removeObjects };
};

export type Assets = ReturnType<typeof makeAssets>;

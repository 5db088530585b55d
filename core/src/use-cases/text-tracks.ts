import { Effect } from "effect";
import type { AssetId, TenantId } from "../domain/ids.js";
import { textTrackKey } from "../domain/object-keys.js";
import { MAX_TEXT_TRACKS_PER_ASSET, type TextTrack } from "../domain/text-track.js";
import { InternalError, InvalidRequest, NotFound } from "../errors.js";
import type { Requests } from "../schema/index.js";
import type { VodPorts } from "../tokens.js";
import type { Principal } from "./authenticate.js";
import { orNotFound, quotaExceeded } from "./support.js";
import { textTrackFiles, textTrackOutput } from "./text-track-manifests.js";

type CreateInput = typeof Requests.CreateTextTrackBody.Type;

/** What a client sees of a track. */
const view = (t: TextTrack) => ({
  id: t.id,
  type: t.type,
  language_code: t.language_code,
  name: t.name,
  closed_captions: t.closed_captions,
  status: t.status,
  created_at: t.created_at,
});

/** The language's English name (`fr`: French), the default name of a track; the tag when unknown. */
const languageName = (tag: string) => {
  try {
    return new Intl.DisplayNames(["en"], { type: "language", fallback: "code" }).of(tag) ?? tag;
  } catch {
    return tag;
  }
};

const quotaOfTracks = () =>
  quotaExceeded(`an asset has at most ${MAX_TEXT_TRACKS_PER_ASSET} text tracks`, MAX_TEXT_TRACKS_PER_ASSET);

/**
 * Text tracks (DECISIONS "Images, downloads and text tracks"): WebVTT or SRT read once, stored
 * as WebVTT under the asset's text-track prefix (the whole file and HLS segments), listed by the
 * manifests a player fetches from then on (playback-delivery.ts adds them as it serves them).
 */
export const makeTextTracks = (ports: VodPorts) => {
  const { clock, ids, storage, objectStore: store } = ports;

  const removeFiles = (tenantId: TenantId, assetId: AssetId, trackId: string) =>
    Effect.forEach(
      textTrackFiles.prefixes(trackId),
      (prefix) => store.deletePrefix(textTrackKey(tenantId, assetId, prefix)),
      { discard: true },
    );

  const assetOf = (principal: Principal, assetId: AssetId) =>
    orNotFound("asset")(storage.assets.get(principal.tenant.id, assetId));

  const add = (principal: Principal, assetId: AssetId, input: CreateInput) =>
    Effect.gen(function* () {
      const tenantId = principal.tenant.id;
      const asset = yield* assetOf(principal, assetId);
      const reader = ports.textTrackReader;
      if (!reader)
        return yield* Effect.fail(new InternalError({ message: "no text track reader is configured" }));
      // Checked before the content is read and stored; again, under the tenant's lock, when recorded.
      if ((yield* storage.textTracks.count(tenantId, assetId)) >= MAX_TEXT_TRACKS_PER_ASSET)
        return yield* Effect.fail(quotaOfTracks());
      const cues = yield* Effect.mapError(
        reader.read(input.content),
        (e) =>
          new InvalidRequest({
            message: `content is neither WebVTT nor SRT: line ${e.line}: ${e.message}`,
            details: {
              fields: [{ path: ["content"], message: `line ${e.line}: ${e.message}` }],
              line: e.line,
            },
          }),
      );
      const language_code = Intl.getCanonicalLocales(input.language_code)[0] ?? input.language_code;
      const track: TextTrack = {
        id: ids.id("track"),
        tenant_id: tenantId,
        asset_id: asset.id,
        type: "text",
        language_code,
        name: input.name ?? languageName(language_code),
        closed_captions: input.closed_captions ?? false,
        status: "ready",
        created_at: clock.now(),
        deleted_at: null,
      };
      const key = (name: string) => textTrackKey(tenantId, asset.id, name);
      // Stored before the track is recorded: a manifest never lists a track whose files are not there.
      yield* Effect.forEach(
        textTrackOutput(track.id, cues, asset.source_duration_ms),
        (file) => store.put(key(file.name), once(file.text), file.contentType),
        { concurrency: 3, discard: true },
      );
      const recorded = yield* storage.transaction((tx) =>
        Effect.gen(function* () {
          yield* tx.tenants.lock(tenantId);
          if ((yield* tx.textTracks.count(tenantId, asset.id)) >= MAX_TEXT_TRACKS_PER_ASSET) return false;
          yield* tx.textTracks.insert(track);
          return true;
        }),
      );
      if (!recorded) {
        yield* removeFiles(tenantId, asset.id, track.id);
        return yield* Effect.fail(quotaOfTracks());
      }
      return { track: view(track) };
    });

  const list = (principal: Principal, assetId: AssetId) =>
    Effect.gen(function* () {
      const asset = yield* assetOf(principal, assetId);
      const tracks = yield* storage.textTracks.list(asset.tenant_id, asset.id);
      return { data: tracks.map(view) };
    });

  /** The track leaves the manifests at once; its files are removed after. */
  const remove = (principal: Principal, assetId: AssetId, trackId: string) =>
    Effect.gen(function* () {
      const asset = yield* assetOf(principal, assetId);
      const removed = yield* storage.textTracks.remove(asset.tenant_id, asset.id, trackId, clock.now());
      if (!removed) return yield* Effect.fail(new NotFound({ message: "text track not found" }));
      yield* removeFiles(asset.tenant_id, asset.id, trackId);
    });

  return { add, list, remove };
};

async function* once(text: string): AsyncIterable<Uint8Array> {
  yield new TextEncoder().encode(text);
}

export type TextTracks = ReturnType<typeof makeTextTracks>;

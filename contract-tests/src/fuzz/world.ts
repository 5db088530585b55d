import { randomUUID } from "node:crypto";
import {
  type Account,
  type CreatedApiKey,
  createApiKey,
  createAsset,
  expectStatus,
  type Harness,
  type HttpClient,
  logIn,
  MINUTE,
  randomIp,
  type StartedUpload,
  sessionIdOf,
  signUp,
  startUpload,
  type WireAsset,
} from "../http/client.js";

export type Scope = "read" | "write" | "admin";
const SCOPES = ["read", "write", "admin"] as const;

export interface PlaybackFixture {
  readonly id: string;
  readonly token: string;
}

/** One tenant with one of everything the API can make, so valid ids and tokens exist to mutate. */
export interface TenantWorld {
  readonly label: string;
  readonly account: Account;
  /** The owner's access token (a login of its own, renewed when a request ends it). */
  bearer: string;
  readonly keys: Record<Scope, CreatedApiKey>;
  readonly assets: { readonly pending: WireAsset; readonly ready: WireAsset; readonly drm: WireAsset };
  /** A session still `created` (on the pending asset), one of its part URLs, and a completed one. */
  readonly uploads: { readonly open: StartedUpload; readonly completedId: string };
  readonly play: {
    readonly clear: PlaybackFixture;
    readonly drm: PlaybackFixture & { readonly license: string; readonly kid: string; readonly key: string };
  };
  /** A webhook (on a closed port: its deliveries fail and are retried) and one of its deliveries. */
  readonly webhook: { readonly id: string; readonly secret: string; readonly deliveryId: string };
  /** A text track of the ready asset. */
  readonly trackId: string;
  /** The files of the ready asset, relative to its token's path. */
  readonly files: ReadonlyArray<string>;
  /** Credentials that were valid once: an expired access token, an expired playback token, a revoked key. */
  readonly stale: { readonly bearer: string; readonly playback: string; readonly revokedKey: string };
  /** Things the fuzz may destroy: further keys, playback sessions and refresh tokens. */
  readonly victims: {
    readonly keyIds: string[];
    readonly playbackIds: string[];
    readonly refreshTokens: string[];
    /** The refresh sessions of those tokens, and an access token of each. */
    readonly refreshSessionIds: string[];
    readonly bearers: string[];
  };
}

/** Ids of a tenant by the kind an id-shaped field names (see `idKindOf`). */
export const idsOf = (w: TenantWorld): Record<string, string[]> => ({
  asset: [w.assets.pending.id, w.assets.ready.id, w.assets.drm.id],
  upload: [w.uploads.open.id, w.uploads.completedId],
  "api-key": [w.keys.read.id, w.keys.write.id, w.keys.admin.id, ...w.victims.keyIds],
  session: [w.play.clear.id, w.play.drm.id, ...w.victims.playbackIds],
  webhook: [w.webhook.id],
  delivery: [w.webhook.deliveryId],
  track: [w.trackId],
});

/** Every string of the tenant's that another tenant must never see. */
export const secretsOf = (w: TenantWorld): string[] => [
  w.account.tenant.id,
  w.account.tenant.slug,
  w.account.user.id,
  w.account.email,
  ...Object.values(idsOf(w)).flat(),
  ...Object.values(w.assets).map((a) => a.title),
  ...Object.values(w.keys).flatMap((k) => [k.name, k.prefix, k.key]),
  w.play.drm.key,
  w.webhook.secret,
];

const bearerOf = (token: string) => ({ bearer: token });

/** Uploads a few bytes for `asset` (processed by the host's fake media processor) and completes. */
const upload = async (api: HttpClient, bearer: string, assetId: string) => {
  const bytes = new Uint8Array(2_000).fill(7);
  const started = await startUpload(api, bearerOf(bearer), {
    asset_id: assetId,
    size_bytes: bytes.byteLength,
  });
  for (const part of started.parts) {
    const put = await fetch(part.url, { method: "PUT", body: bytes });
    if (put.status !== 200) throw new Error(`part PUT: ${put.status} ${await put.text()}`);
  }
  expectStatus(await api.post(`/v1/uploads/${started.id}/complete`, { bearer, json: {} }), 200);
  return started.id;
};

const untilReady = async (api: HttpClient, bearer: string, assetId: string) => {
  for (let i = 0; i < 600; i++) {
    const reply = expectStatus(await api.get<{ asset: WireAsset }>(`/v1/assets/${assetId}`, { bearer }), 200);
    if (reply.body.asset.status === "ready") return reply.body.asset;
    if (reply.body.asset.status === "failed") throw new Error(`asset ${assetId} failed processing`);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`asset ${assetId} never became ready`);
};

const session = async (api: HttpClient, bearer: string, assetId: string, ttl?: number) =>
  expectStatus(
    await api.post<{ session: { id: string }; token: string }>("/v1/playback/sessions", {
      bearer,
      json: { asset_id: assetId, ...(ttl === undefined ? {} : { ttl_seconds: ttl }) },
    }),
    201,
  ).body;

const b64url = (bytes: Buffer) => bytes.toString("base64url");

/**
 * Tenants with every resource, built in three steps: what lasts, credentials that are left to
 * expire (the host's manual clock then moves three hours on), and the live credentials.
 */
export const buildWorlds = async (h: Harness, labels: ReadonlyArray<string>): Promise<TenantWorld[]> => {
  const { api } = h;
  const lasting = await Promise.all(
    labels.map(async (label) => {
      const account = await signUp(api, {
        name: `${label} owner ${randomUUID()}`,
        tenantName: `${label} ${randomUUID()}`,
      });
      const owner = account.access_token;
      const keys = {
        read: await createApiKey(api, bearerOf(owner), ["read"]),
        write: await createApiKey(api, bearerOf(owner), ["write"]),
        admin: await createApiKey(api, bearerOf(owner), ["admin"]),
      };
      // Before the assets, so that their events make deliveries.
      const webhook = expectStatus(
        await api.post<{ webhook: { id: string }; secret: string }>("/v1/webhooks", {
          bearer: owner,
          json: { url: "http://127.0.0.1:9/hook", events: ["*"] },
        }),
        201,
      ).body;
      const title = (what: string) => `${label} ${what} ${randomUUID()}`;
      const ready = await createAsset(api, bearerOf(owner), { title: title("ready") });
      const drm = await createAsset(api, bearerOf(owner), { title: title("drm"), drm: true });
      const pending = await createAsset(api, bearerOf(owner), { title: title("pending") });
      const completedId = await upload(api, owner, ready.id);
      await upload(api, owner, drm.id);
      const track = expectStatus(
        await api.post<{ track: { id: string } }>(`/v1/assets/${ready.id}/tracks`, {
          bearer: owner,
          json: {
            type: "text",
            language_code: "en",
            content: "WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nhi\n",
          },
        }),
        201,
      ).body.track;
      const revoked = await createApiKey(api, bearerOf(owner), ["admin"]);
      expectStatus(await api.del(`/v1/api-keys/${revoked.id}`, { bearer: owner }), 204);
      const victimKeys = await Promise.all(
        (["read", "admin"] as const).map((s) => createApiKey(api, bearerOf(owner), [s])),
      );
      const [delivery] = expectStatus(
        await api.get<{ data: Array<{ id: string }> }>(`/v1/webhooks/${webhook.webhook.id}/deliveries`, {
          bearer: owner,
        }),
        200,
      ).body.data;
      if (delivery === undefined) throw new Error("the world's webhook has no delivery");
      return {
        label,
        account,
        keys,
        completedId,
        revoked,
        victimKeys,
        ids: { ready, drm, pending },
        trackId: track.id,
        webhook: { id: webhook.webhook.id, secret: webhook.secret, deliveryId: delivery.id },
      };
    }),
  );
  const staleOnes = await Promise.all(
    lasting.map(async (t) => {
      const readyAsset = await untilReady(api, t.account.access_token, t.ids.ready.id);
      await untilReady(api, t.account.access_token, t.ids.drm.id);
      return {
        readyAsset,
        bearer: (await logIn(api, t.account.email, t.account.password)).access_token,
        playback: (await session(api, t.account.access_token, t.ids.ready.id, 60)).token,
      };
    }),
  );
  h.clock.advance(180 * MINUTE);
  return Promise.all(
    lasting.map(async (t, i) => {
      const stale = staleOnes[i];
      if (stale === undefined) throw new Error("unreachable");
      const bearer = (await logIn(api, t.account.email, t.account.password)).access_token;
      const open = await startUpload(api, bearerOf(bearer), {
        asset_id: t.ids.pending.id,
        size_bytes: 1_000,
      });
      const clear = await session(api, bearer, t.ids.ready.id);
      const drm = await session(api, bearer, t.ids.drm.id);
      const entitlement = expectStatus(
        await api.post<{ license_headers: Record<string, string> }>("/v1/drm/entitlement", {
          bearer: drm.token,
        }),
        200,
      ).body;
      const license = entitlement.license_headers["x-vod-license-token"] ?? "";
      // The key id as the DRM asset's media playlist declares it, and the key its licence gives.
      const playlist = await (await fetch(`${h.baseUrl}/v1/play/${drm.token}/360p/playlist.m3u8`)).text();
      const kidBase64 = /base64,([^"]+)"/.exec(playlist)?.[1];
      if (kidBase64 === undefined) throw new Error(`no key id in the DRM playlist: ${playlist}`);
      const kid = b64url(Buffer.from(kidBase64, "base64"));
      const granted = expectStatus(
        await api.post<{ keys: Array<{ kid: string; k: string }> }>("/v1/drm/clearkey/license", {
          json: { kids: [kid], type: "temporary" },
          headers: { "x-vod-license-token": license },
        }),
        200,
      ).body;
      const key = granted.keys[0]?.k;
      if (key === undefined) throw new Error("the licence gave no key for the asset's own key id");
      const victimSessions = await Promise.all([1, 2].map(() => session(api, bearer, t.ids.ready.id)));
      const victimLogins = await Promise.all(
        [1, 2].map(() => logIn(api, t.account.email, t.account.password)),
      );
      const world: TenantWorld = {
        label: t.label,
        account: t.account,
        bearer,
        keys: t.keys,
        assets: { pending: t.ids.pending, ready: stale.readyAsset, drm: t.ids.drm },
        webhook: t.webhook,
        trackId: t.trackId,
        uploads: { open, completedId: t.completedId },
        play: {
          clear: { id: clear.session.id, token: clear.token },
          drm: { id: drm.session.id, token: drm.token, license, kid, key },
        },
        files: [
          "master.m3u8",
          "manifest.mpd",
          "360p/playlist.m3u8",
          "360p/init.mp4",
          "360p/seg_1.m4s",
          "poster.jpg",
          `text/${t.trackId}.m3u8`,
          `text/${t.trackId}-segments.vtt`,
        ],
        stale: { bearer: stale.bearer, playback: stale.playback, revokedKey: t.revoked.key },
        victims: {
          keyIds: t.victimKeys.map((k) => k.id),
          playbackIds: victimSessions.map((s) => s.session.id),
          refreshTokens: victimLogins.map((l) => l.refresh_token),
          refreshSessionIds: victimLogins.map((l) => sessionIdOf(l.access_token)),
          bearers: victimLogins.map((l) => l.access_token),
        },
      };
      return world;
    }),
  );
};

/**
 * The fuzz may end what it is given (logout, key revocation, refresh reuse): before each batch,
 * the owner's access token and the API keys are checked and made anew where they stopped working.
 */
export const reviveCredentials = async (api: HttpClient, w: TenantWorld): Promise<void> => {
  const works = async (options: { bearer?: string; apiKey?: string }) =>
    (await api.get("/v1/auth/me", options)).status === 200;
  const [bearerWorks, ...keysWork] = await Promise.all([
    works({ bearer: w.bearer }),
    ...SCOPES.map((scope) => works({ apiKey: w.keys[scope].key })),
  ]);
  if (!bearerWorks)
    w.bearer = expectStatus(
      await api.post<{ access_token: string }>("/v1/auth/login", {
        json: { email: w.account.email, password: w.account.password },
        ip: randomIp(),
      }),
      200,
    ).body.access_token;
  for (const [i, scope] of SCOPES.entries())
    if (!keysWork[i]) w.keys[scope] = await createApiKey(api, bearerOf(w.bearer), [scope]);
};

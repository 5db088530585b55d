import { defaultConfig, type VodConfig } from "./config.js";
import type { VodPorts } from "./tokens.js";
import { makeAccountMail } from "./use-cases/account-mail.js";
import { makeAccounts } from "./use-cases/accounts.js";
import { makeAnalytics } from "./use-cases/analytics.js";
import { makeApiKeys } from "./use-cases/api-keys.js";
import { makeAssets } from "./use-cases/assets.js";
import { makeCredentials } from "./use-cases/authenticate.js";
import { makePlayback } from "./use-cases/playback.js";
import { makeProcessing } from "./use-cases/processing.js";
import { makeStaticRenditions } from "./use-cases/static-renditions.js";
import { makeTenants } from "./use-cases/tenants.js";
import { makeTextTracks } from "./use-cases/text-tracks.js";
import { makeUploads } from "./use-cases/uploads.js";
import { makeWebhooks } from "./use-cases/webhooks.js";

export type VodConfigInput = Partial<
  Omit<VodConfig, "rateLimits" | "processing" | "webhooks" | "quotas" | "images">
> & {
  readonly images?: Partial<VodConfig["images"]>;
  readonly rateLimits?: Partial<VodConfig["rateLimits"]>;
  readonly quotas?: Partial<VodConfig["quotas"]>;
  readonly processing?: Partial<VodConfig["processing"]>;
  readonly webhooks?: Partial<VodConfig["webhooks"]>;
};

/**
 * What a host reads from its own configuration for the core: every setting but the three secrets,
 * which it loads or makes (key files) when it composes. One shape, so that nothing is copied field
 * by field between the host's configuration and the core's.
 */
export type VodSettings = Omit<VodConfigInput, "cursorSecret" | "uploadUrlSecret" | "drmMasterKey">;

/** The platform's use cases over a set of ports: what a host or an embedder calls. */
export interface Vod {
  readonly config: VodConfig;
  readonly ports: VodPorts;
  readonly authenticate: ReturnType<typeof makeCredentials>["authenticate"];
  readonly accounts: ReturnType<typeof makeAccounts>;
  /** Email verification and password reset, by links sent in mail. */
  readonly accountMail: ReturnType<typeof makeAccountMail>;
  readonly apiKeys: ReturnType<typeof makeApiKeys>;
  /**
   * What is done to a tenant as a whole: suspend and activate (the host's `vod tenant`
   * command), delete (that command, and the owner's own deletion through `accounts`).
   */
  readonly tenants: ReturnType<typeof makeTenants>;
  readonly assets: ReturnType<typeof makeAssets>;
  /** An asset's text tracks (captions, subtitles). */
  readonly textTracks: ReturnType<typeof makeTextTracks>;
  readonly uploads: ReturnType<typeof makeUploads>;
  readonly processing: ReturnType<typeof makeProcessing>;
  /** The `static-renditions` job (their delivery is playback's). */
  readonly staticRenditions: ReturnType<typeof makeStaticRenditions>;
  readonly playback: ReturnType<typeof makePlayback>;
  readonly webhooks: ReturnType<typeof makeWebhooks>;
  /** Playback analytics over the views kept from telemetry. */
  readonly analytics: ReturnType<typeof makeAnalytics>;
}

export const resolveConfig = (ports: VodPorts, input: VodConfigInput = {}): VodConfig => {
  const base = defaultConfig({
    cursorSecret: input.cursorSecret ?? ports.ids.randomBytes(32),
    uploadUrlSecret: input.uploadUrlSecret ?? ports.ids.randomBytes(32),
    drmMasterKey: input.drmMasterKey ?? ports.ids.randomBytes(32),
  });
  return {
    ...base,
    ...input,
    rateLimits: { ...base.rateLimits, ...input.rateLimits },
    processing: { ...base.processing, ...input.processing },
    webhooks: { ...base.webhooks, ...input.webhooks },
    images: { ...base.images, ...input.images },
    quotas: { ...base.quotas, ...input.quotas },
  };
};

/** For embedders without a DI container: the whole platform from plain port objects. */
export const createVod = (ports: VodPorts, configInput?: VodConfigInput): Vod => {
  const config = resolveConfig(ports, configInput);
  const credentials = makeCredentials(ports);
  const playback = makePlayback(ports, config, credentials.tenantIsActive);
  const tenants = makeTenants(ports, credentials.forget);
  return {
    config,
    ports,
    authenticate: credentials.authenticate,
    accounts: makeAccounts(ports, config, credentials.forget, tenants.remove),
    accountMail: makeAccountMail(ports, config, credentials.forget),
    apiKeys: makeApiKeys(ports, config, credentials.forget),
    tenants,
    assets: makeAssets(ports, config, playback.endForAsset),
    textTracks: makeTextTracks(ports),
    uploads: makeUploads(ports, config, credentials.tenantIsActive),
    processing: makeProcessing(ports, config),
    staticRenditions: makeStaticRenditions(ports),
    playback,
    webhooks: makeWebhooks(ports, config),
    analytics: makeAnalytics(ports, config),
  };
};

import type { VodConfig } from "../config.js";
import type { VodPorts } from "../tokens.js";
import type { TenantIsActive } from "./authenticate.js";
import { makeContentKeys } from "./content-keys.js";
import { makeEntitlement } from "./entitlement.js";
import { makePlaybackDelivery } from "./playback-delivery.js";
import { makePlaybackImages } from "./playback-images.js";
import { makePlaybackSessions } from "./playback-sessions.js";
import { cachedRevocations } from "./revocations.js";
import { makeStaticRenditionDelivery } from "./static-renditions.js";
import { makeTelemetryIntake } from "./telemetry.js";

/**
 * What a host calls for playback, one module per spec area: sessions (and the token check the
 * others share, with its one cache), delivery, entitlement with the ClearKey licence, telemetry.
 * `tenantIsActive` is the credentials' check: a suspended tenant's tokens are refused with its keys.
 */
export const makePlayback = (ports: VodPorts, config: VodConfig, tenantIsActive: TenantIsActive) => {
  const revocations = cachedRevocations(ports.revocationStore, ports.clock);
  const keys = makeContentKeys(ports, config.drmMasterKey);
  const sessions = makePlaybackSessions(ports, revocations, tenantIsActive);
  return {
    ...sessions,
    ...makePlaybackDelivery(ports, sessions.verify),
    images: makePlaybackImages(ports, config, sessions.verify),
    staticRenditions: makeStaticRenditionDelivery(ports, sessions.verify),
    ...makeEntitlement(ports, config, sessions.verify, revocations, keys, tenantIsActive),
    ...makeTelemetryIntake(ports, config, sessions.verify),
    contentKeys: keys,
  };
};

export type Playback = ReturnType<typeof makePlayback>;

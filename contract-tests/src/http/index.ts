import { describe } from "vitest";
import { describeAccounts } from "./accounts.js";
import { describeAnalytics } from "./analytics.js";
import { describeApiKeys } from "./api-keys.js";
import { describeAssetLifecycle } from "./asset-lifecycle.js";
import { describeAssets } from "./assets.js";
import type { MakeHttpSubject } from "./client.js";
import { describeAccountMail } from "./email.js";
import { describeErrors } from "./errors.js";
import { describeGoogleSignIn } from "./google.js";
import { describeIdempotency } from "./idempotency.js";
import { describePlaybackImages } from "./images.js";
import { describePlayback } from "./playback.js";
import { describeRateLimits } from "./rate-limits.js";
import { describeStaticRenditions } from "./static-renditions.js";
import { describeTenantDeletion } from "./tenant-deletion.js";
import { describeTextTracks } from "./text-tracks.js";
import { describeUploads } from "./uploads.js";
import { describeWebhooks } from "./webhooks.js";

export type { HttpSubject, MakeHttpSubject, ManualClockLike } from "./client.js";
export { type Conformance, checkConformance, describeDocumentConformance } from "./conformance.js";
export { type Exchange, type Recording, recordExchanges } from "./exchanges.js";

/**
 * The HTTP contract: real requests against a running host, checked by what a client sees (status,
 * body, headers) and by what the storage holds afterwards (through the subject's backdoor).
 * `makeSubject` starts a fresh host; `env` adds host environment variables (e.g. low rate limits).
 * Each area shares one host across its tests; every test makes its own accounts.
 */
export const describeHttpApi = (name: string, makeSubject: MakeHttpSubject): void => {
  describe(`HTTP API [${name}]`, () => {
    describeAccounts(makeSubject);
    describeGoogleSignIn(makeSubject);
    describeAccountMail(makeSubject);
    describeApiKeys(makeSubject);
    describeAssets(makeSubject);
    describeAssetLifecycle(makeSubject);
    describeIdempotency(makeSubject);
    describeUploads(makeSubject);
    describeErrors(makeSubject);
    describeRateLimits(makeSubject);
    describePlayback(makeSubject);
    describePlaybackImages(makeSubject);
    describeStaticRenditions(makeSubject);
    describeTextTracks(makeSubject);
    describeWebhooks(makeSubject);
    describeTenantDeletion(makeSubject);
    describeAnalytics(makeSubject);
  });
};

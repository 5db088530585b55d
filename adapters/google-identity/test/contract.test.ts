import { googleIdentityVerifier } from "@vod/adapter-google-identity";
import { describeIdentityVerifier } from "@vod/contract-tests";
import { startFakeGoogle } from "@vod/test-services";

describeIdentityVerifier("google-identity", async () => {
  const google = await startFakeGoogle();
  return {
    port: googleIdentityVerifier({ clientId: google.clientId, certsUrl: google.certsUrl }),
    google,
    cleanup: () => google.close(),
  };
});

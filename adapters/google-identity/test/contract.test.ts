import { googleIdentityVerifier } from "@vod/adapter-google-identity";
import { describeIdentityVerifier, startFakeGoogle } from "@vod/contract-tests";

describeIdentityVerifier("google-identity", async () => {
  const google = await startFakeGoogle();
  return {
    port: googleIdentityVerifier({ clientId: google.clientId, certsUrl: google.certsUrl }),
    google,
    cleanup: () => google.close(),
  };
});

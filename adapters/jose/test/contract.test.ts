import { generateSigningKeys, joseTokenSigner } from "@vod/adapter-jose";
import { describeTokenSigner } from "@vod/contract-tests";

describeTokenSigner("jose", async () => ({
  port: joseTokenSigner({ issuer: "https://vod.test", audience: "vod", keys: await generateSigningKeys() }),
  cleanup: async () => {},
}));

import { inject } from "vitest";

/** Real services this run may use, decided once by `global-setup.ts`; null where absent. */
export interface TestServices {
  readonly databaseUrl: string | null;
  readonly redisUrl: string | null;
}

declare module "vitest" {
  export interface ProvidedContext {
    services: TestServices;
  }
}

export const testServices = (): TestServices => inject("services");

/** The name of a suite that needs a service, saying why when it is skipped. */
export const suiteName = (
  name: string,
  available: boolean,
  variable: string,
  orElse = "run a Docker engine",
) => (available ? name : `${name} (skipped: set ${variable}${orElse ? ` or ${orElse}` : ""})`);

/**
 * Extra environment of a host under test: fake Google, one trusted proxy hop (per-test client IPs
 * in X-Forwarded-For), no logs; with `smtp`, account mail goes to that server (a `startSmtpTestServer`).
 */
export const testHostEnv = (
  google: { readonly clientId: string; readonly certsUrl: string },
  dataDir: string,
  smtp?: { readonly url: string },
): Record<string, string> => ({
  ...(smtp ? { VOD_SMTP_URL: smtp.url, VOD_MAIL_FROM: "VOD test <no-reply@vod.test>" } : {}),
  PORT: "0",
  VOD_HOST: "127.0.0.1",
  VOD_DATA_DIR: dataDir,
  VOD_GOOGLE_CLIENT_ID: google.clientId,
  VOD_GOOGLE_CERTS_URL: google.certsUrl,
  VOD_TRUST_PROXY: "1",
  VOD_LOG_LEVEL: process.env.VOD_TEST_LOG_LEVEL ?? "silent",
});

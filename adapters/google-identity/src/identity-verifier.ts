import { type IdentityVerifier, PlaybackUnavailable, Unauthorized, type VerifiedIdentity } from "@vod/core";
import { Effect } from "effect";
import { OAuth2Client } from "google-auth-library";

export interface GoogleIdentityConfig {
  /** The OAuth client id ID tokens must be issued for. Unset or empty: Google sign-in is off. */
  readonly clientId?: string | undefined;
  /** JSON map of kid to X.509 PEM, as Google's v1 certs URL serves. Default: Google's own. */
  readonly certsUrl?: string | undefined;
}

const GOOGLE_ISSUERS = ["accounts.google.com", "https://accounts.google.com"];

const notConfigured = new PlaybackUnavailable({ message: "Google sign-in is not configured" });

// The library's messages quote the whole token; these say why without it.
const unauthorizedMessage = (cause: unknown): string => {
  const text = cause instanceof Error ? cause.message : "";
  if (text.startsWith("Token used too late")) return "Google ID token has expired";
  if (text.startsWith("Token used too early")) return "Google ID token is not valid yet";
  if (text.startsWith("Wrong recipient")) return "Google ID token was issued for another client";
  if (text.startsWith("Invalid issuer")) return "Google ID token has an unexpected issuer";
  if (text.startsWith("Invalid token signature") || text.startsWith("No pem found")) {
    return "Google ID token signature is invalid";
  }
  return "Google ID token is invalid";
};

const isCertificateMap = (value: unknown): value is Record<string, string> =>
  typeof value === "object" &&
  value !== null &&
  !Array.isArray(value) &&
  Object.keys(value).length > 0 &&
  Object.values(value).every((pem) => typeof pem === "string");

const looksLikeJws = (token: string): boolean => /^[\w-]+\.[\w-]+\.[\w-]*$/.test(token);

/**
 * An IdentityVerifier of Google ID tokens. The certificates are fetched (and cached as long as the
 * certs URL's Cache-Control allows) apart from the token check, so an unreachable Google is told
 * apart from a bad token by construction rather than by reading error messages.
 */
export const googleIdentityVerifier = (config: GoogleIdentityConfig): IdentityVerifier => {
  const clientId = config.clientId;
  if (clientId === undefined || clientId === "") return { verify: () => Effect.fail(notConfigured) };

  const client = new OAuth2Client({
    clientId,
    issuers: GOOGLE_ISSUERS,
    ...(config.certsUrl ? { endpoints: { oauth2FederatedSignonPemCertsUrl: config.certsUrl } } : {}),
    // Someone waits on a sign-in: one quick retry and a bounded wait, rather than the library's
    // default of several retries over seconds with no timeout.
    transporterOptions: {
      timeout: 5_000,
      retryConfig: { retry: 1, noResponseRetries: 1, retryDelay: 200, retryDelayMultiplier: 1 },
    },
  });

  const fetchCertificates = Effect.tryPromise({
    try: () => client.getFederatedSignonCertsAsync(),
    catch: (cause) =>
      new PlaybackUnavailable({ message: "Google sign-in certificates are unreachable", cause }),
  }).pipe(
    Effect.flatMap(({ certs }) =>
      isCertificateMap(certs)
        ? Effect.succeed(certs)
        : Effect.fail(
            new PlaybackUnavailable({ message: "Google sign-in certificates URL served no certificate map" }),
          ),
    ),
  );

  const verify = (idToken: string) =>
    Effect.gen(function* () {
      // Garbage is refused before any network call, so it cannot make us fetch on its behalf.
      if (!looksLikeJws(idToken))
        return yield* Effect.fail(new Unauthorized({ message: "Google ID token is invalid" }));
      const certs = yield* fetchCertificates;
      const ticket = yield* Effect.tryPromise({
        try: () => client.verifySignedJwtWithCertsAsync(idToken, certs, clientId, GOOGLE_ISSUERS),
        catch: (cause) => new Unauthorized({ message: unauthorizedMessage(cause) }),
      });
      const payload = ticket.getPayload();
      if (payload === undefined || typeof payload.sub !== "string" || payload.sub === "") {
        return yield* Effect.fail(new Unauthorized({ message: "Google ID token has no subject" }));
      }
      if (typeof payload.email !== "string" || payload.email === "") {
        return yield* Effect.fail(new Unauthorized({ message: "Google ID token has no email" }));
      }
      // Google has sent this claim both as a boolean and as the string "true".
      const emailVerified: unknown = payload.email_verified;
      const identity: VerifiedIdentity = {
        provider: "google",
        subject: payload.sub,
        email: payload.email,
        email_verified: emailVerified === true || emailVerified === "true",
        name: typeof payload.name === "string" && payload.name !== "" ? payload.name : null,
      };
      return identity;
    });

  return { verify };
};

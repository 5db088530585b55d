import { createServer, type RequestListener } from "node:http";
import type { AddressInfo } from "node:net";
import { googleIdentityVerifier } from "@vod/adapter-google-identity";
import type { IdentityVerifier } from "@vod/core";
import { type FakeGoogle, startFakeGoogle } from "@vod/test-services";
import { Effect, Either } from "effect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

const verify = (port: IdentityVerifier, token: string) =>
  Effect.runPromise(Effect.either(port.verify(token)));

/** A certs URL that answers with `handler`; closed after the test. */
const serve = async (handler: RequestListener): Promise<{ url: string; close: () => Promise<void> }> => {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/oauth2/v1/certs`,
    close: () =>
      new Promise((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
};

describe("googleIdentityVerifier", () => {
  let google: FakeGoogle;
  const closers: Array<() => Promise<void>> = [];
  beforeEach(async () => {
    google = await startFakeGoogle();
    closers.push(() => google.close());
  });
  afterEach(async () => {
    await Promise.all(closers.splice(0).map((close) => close()));
  });

  it("answers PlaybackUnavailable for every token when no client id is configured", async () => {
    for (const clientId of [undefined, ""]) {
      const port = googleIdentityVerifier({ clientId, certsUrl: google.certsUrl });
      const result = await verify(port, google.signIdToken({}));
      expect(Either.isLeft(result) && result.left).toMatchObject({
        _tag: "PlaybackUnavailable",
        message: "Google sign-in is not configured",
      });
    }
  });

  it("answers PlaybackUnavailable when the certs URL answers 404 or 500, promptly", async () => {
    const failing = await serve((request, response) => {
      response.writeHead(request.url === "/oauth2/v1/certs" ? 500 : 404).end("no");
    });
    closers.push(failing.close);
    for (const certsUrl of [
      failing.url,
      `${failing.url}/missing`,
      `${new URL(google.certsUrl).origin}/missing`,
    ]) {
      const started = Date.now();
      const result = await verify(
        googleIdentityVerifier({ clientId: google.clientId, certsUrl }),
        google.signIdToken({}),
      );
      expect(Either.isLeft(result) && result.left._tag).toBe("PlaybackUnavailable");
      expect(Date.now() - started).toBeLessThan(3_000);
    }
  });

  it("answers PlaybackUnavailable when the certs URL serves something other than a certificate map", async () => {
    for (const body of ["[]", "{}", '{"kid": 42}', "<html>maintenance</html>"]) {
      const odd = await serve((_request, response) => {
        response.writeHead(200, { "content-type": "application/json" }).end(body);
      });
      closers.push(odd.close);
      const port = googleIdentityVerifier({ clientId: google.clientId, certsUrl: odd.url });
      const result = await verify(port, google.signIdToken({}));
      expect(Either.isLeft(result) && result.left._tag).toBe("PlaybackUnavailable");
    }
  });

  it("answers PlaybackUnavailable when nothing listens at the certs URL", async () => {
    const gone = await serve(() => {});
    await gone.close();
    const result = await verify(
      googleIdentityVerifier({ clientId: google.clientId, certsUrl: gone.url }),
      google.signIdToken({}),
    );
    expect(Either.isLeft(result) && result.left._tag).toBe("PlaybackUnavailable");
  });

  it("says why a token was refused without quoting it", async () => {
    const port = googleIdentityVerifier({ clientId: google.clientId, certsUrl: google.certsUrl });
    const now = Math.floor(Date.now() / 1000);
    const cases: Array<[string, string]> = [
      [
        google.signIdToken({ aud: "other.apps.googleusercontent.com" }),
        "Google ID token was issued for another client",
      ],
      [google.signIdToken({ iat: now - 7200, exp: now - 3600 }), "Google ID token has expired"],
      [google.signIdToken({}, { foreignKey: true }), "Google ID token signature is invalid"],
      [google.signIdToken({ iss: "https://evil.example.com" }), "Google ID token has an unexpected issuer"],
    ];
    for (const [token, message] of cases) {
      const result = await verify(port, token);
      expect(Either.isLeft(result) && result.left).toMatchObject({ _tag: "Unauthorized", message });
      expect(JSON.stringify(Either.isLeft(result) && result.left)).not.toContain(token.split(".")[1]);
    }
  });
});

// @peculiar/x509 resolves its algorithms through tsyringe, which needs the Reflect metadata polyfill.
import "reflect-metadata";
import { KeyObject, randomBytes, sign, webcrypto } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { X509CertificateGenerator } from "@peculiar/x509";

/** The claims of a Google ID token this fake can sign. */
export interface GoogleIdTokenClaims {
  sub: string;
  email: string;
  /** Google has sent both `true` and `"true"`; a string lets a test send the latter. */
  email_verified: boolean | string;
  name: string;
  aud: string;
  iss: string;
  /** Seconds since the epoch. */
  exp: number;
  /** Seconds since the epoch. */
  iat: number;
}

/**
 * Google's sign-in key server and token issuer, on 127.0.0.1. The certificates are served without
 * Cache-Control, so a verifier fetches them on every check and sees `close()` at once.
 */
export interface FakeGoogle {
  /** Serves a JSON map of kid to X.509 certificate PEM, as https://www.googleapis.com/oauth2/v1/certs. */
  readonly certsUrl: string;
  /** The audience tokens are signed for by default. */
  readonly clientId: string;
  readonly issuer: "https://accounts.google.com";
  /**
   * An RS256 ID token. Defaults: iss `issuer`, aud `clientId`, iat now, exp now + 1 h,
   * email_verified true, a fresh sub and email. A claim given as `undefined` is left out.
   * `foreignKey`: signed by a key whose certificate is not served, under the served kid.
   */
  signIdToken(claims?: Partial<GoogleIdTokenClaims>, opts?: { foreignKey?: boolean }): string;
  /** Stops serving the certificates; later fetches fail to connect. Safe to call twice. */
  close(): Promise<void>;
}

const ISSUER = "https://accounts.google.com";

const RS256 = {
  name: "RSASSA-PKCS1-v1_5",
  hash: "SHA-256",
  modulusLength: 2048,
  publicExponent: new Uint8Array([1, 0, 1]),
} as const;

const base64url = (data: string | Buffer): string => Buffer.from(data).toString("base64url");

const generateKeys = (): Promise<webcrypto.CryptoKeyPair> =>
  webcrypto.subtle.generateKey(RS256, true, ["sign", "verify"]);

const selfSignedPem = async (keys: webcrypto.CryptoKeyPair): Promise<string> => {
  const now = Date.now();
  const certificate = await X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: `01${randomBytes(8).toString("hex")}`,
      name: "CN=fake-google-sign-in",
      notBefore: new Date(now - 60_000),
      notAfter: new Date(now + 24 * 3600_000),
      signingAlgorithm: RS256,
      keys,
    },
    webcrypto,
  );
  return certificate.toString("pem");
};

const listen = (server: Server): Promise<AddressInfo> =>
  new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve(server.address() as AddressInfo);
    });
  });

export const startFakeGoogle = async (): Promise<FakeGoogle> => {
  const [served, foreign] = await Promise.all([generateKeys(), generateKeys()]);
  const kid = randomBytes(20).toString("hex");
  const certificates = JSON.stringify({ [kid]: await selfSignedPem(served) });
  const servedKey = KeyObject.from(served.privateKey);
  const foreignKey = KeyObject.from(foreign.privateKey);

  const server = createServer((request, response) => {
    if (request.method === "GET" && request.url === "/oauth2/v1/certs") {
      response.writeHead(200, { "content-type": "application/json; charset=utf-8" });
      response.end(certificates);
      return;
    }
    response.writeHead(404, { "content-type": "text/plain" });
    response.end("not found");
  });
  const address = await listen(server);
  const clientId = `${randomBytes(6).toString("hex")}.apps.googleusercontent.com`;

  let closing: Promise<void> | undefined;

  return {
    certsUrl: `http://127.0.0.1:${address.port}/oauth2/v1/certs`,
    clientId,
    issuer: ISSUER,
    signIdToken: (claims = {}, opts = {}) => {
      const now = Math.floor(Date.now() / 1000);
      const id = randomBytes(10).toString("hex");
      const payload = {
        iss: ISSUER,
        aud: clientId,
        azp: clientId,
        // Google's subjects are 21-digit decimal strings.
        sub: `1${Array.from(randomBytes(20), (byte) => byte % 10).join("")}`,
        email: `user-${id}@example.com`,
        email_verified: true,
        iat: now,
        exp: now + 3600,
        ...claims,
      };
      const signingInput = `${base64url(JSON.stringify({ alg: "RS256", kid, typ: "JWT" }))}.${base64url(JSON.stringify(payload))}`;
      const signature = sign("sha256", Buffer.from(signingInput), opts.foreignKey ? foreignKey : servedKey);
      return `${signingInput}.${base64url(signature)}`;
    },
    close: () => {
      closing ??= new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        // Keep-alive sockets would hold close() open, and let a cached connection keep answering.
        server.closeAllConnections();
      });
      return closing;
    },
  };
};

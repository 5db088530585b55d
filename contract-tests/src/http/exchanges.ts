/**
 * The exchanges (request and response) the suites have with the hosts under test, kept so that a
 * check can hold each against the OpenAPI document. Suites fetch through the client, `sendTo`
 * and `fetch` itself (a player's walk), so recording wraps the global `fetch`; only requests to a
 * host under test count (`hostUnderTest`), not those to the stand-ins (Google, SMTP, webhook
 * receivers) or the host's own outbound calls.
 */

export interface Exchange {
  readonly method: string;
  /** The path and query, as sent. */
  readonly target: string;
  readonly requestHeaders: Readonly<Record<string, string>>;
  /** The request's body, when it was sent as text or bytes. */
  readonly requestBody: Uint8Array | undefined;
  readonly status: number;
  /** Names in lower case. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Uint8Array;
}

export interface Recording {
  /** Every exchange recorded so far, with its body read whole. */
  exchanges(): Promise<ReadonlyArray<Exchange>>;
  /** Puts the global `fetch` back. */
  stop(): void;
}

const origins = new Set<string>();
let active: Array<Promise<Exchange | undefined>> | undefined;

/**
 * Marks a host's base URL as one whose exchanges are recorded, under any name of the loopback:
 * the URLs a host gives out (media, DRM) say `localhost` where its base URL says `127.0.0.1`.
 */
export const hostUnderTest = (baseUrl: string): void => {
  const url = new URL(baseUrl);
  origins.add(url.origin);
  if (["127.0.0.1", "localhost", "[::1]"].includes(url.hostname))
    for (const name of ["127.0.0.1", "localhost", "[::1]"])
      origins.add(`${url.protocol}//${name}:${url.port}`);
};

const headersOf = (init: ConstructorParameters<typeof Headers>[0]): Record<string, string> =>
  Object.fromEntries([...new Headers(init).entries()]);

/**
 * Records every exchange with a host under test from now on, in this test file's process. The
 * bodies are read from a clone, so what a test reads (or leaves unread) is untouched.
 */
export const recordExchanges = (): Recording => {
  const recorded: Array<Promise<Exchange | undefined>> = [];
  active = recorded;
  const original = globalThis.fetch;
  globalThis.fetch = async (input, init) => {
    // Read without building a Request, which would take the body.
    const asRequest = input instanceof Request ? input : undefined;
    const url = new URL(asRequest?.url ?? String(input));
    const method = (init?.method ?? asRequest?.method ?? "GET").toUpperCase();
    const requestHeaders = headersOf(init?.headers ?? asRequest?.headers);
    const sent = init?.body;
    const requestBody =
      typeof sent === "string"
        ? new TextEncoder().encode(sent)
        : sent instanceof Uint8Array
          ? sent
          : undefined;
    const response = await original(input, init);
    if (active === recorded && origins.has(url.origin)) {
      const copy = response.clone();
      recorded.push(
        copy.arrayBuffer().then(
          (bytes) => ({
            method,
            target: `${url.pathname}${url.search}`,
            requestHeaders,
            requestBody,
            status: response.status,
            headers: headersOf(response.headers),
            body: new Uint8Array(bytes),
          }),
          // A body cut off (the test or the host closed the connection) tells nothing.
          () => undefined,
        ),
      );
    }
    return response;
  };
  return {
    exchanges: async () =>
      (await Promise.all(recorded)).filter((exchange): exchange is Exchange => exchange !== undefined),
    stop: () => {
      globalThis.fetch = original;
      if (active === recorded) active = undefined;
    },
  };
};

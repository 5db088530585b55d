import { createHash } from "node:crypto";
import type { Agent } from "node:http";
import { operations } from "@vod/http";
import { FastCheck as fc } from "effect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, type MakeHttpSubject, sharedSubject } from "../http/client.js";
import { type FuzzContext, hostileClasses } from "./hostile.js";
import { isolationProbes, probeProblems, probesByCredential, storedState } from "./isolation.js";
import { catalogRuleProblems, problemsOf } from "./oracle.js";
import { allRoutes, fieldsOf, idFieldsOf } from "./routes.js";
import {
  describeReply,
  describeRequest,
  sendWire,
  type WireReply,
  type WireRequest,
  wireAgent,
} from "./wire.js";
import { buildWorlds, reviveCredentials, secretsOf, type TenantWorld } from "./world.js";

export { fakeMediaProcessor } from "../fake-media-processor.js";
export { sendRawBytes } from "./wire.js";

/** The fuzz's one seed: each (route, class) batch derives its own from it and the names. */
export const FUZZ_SEED = 20_260_112;

const seedOf = (...names: string[]) =>
  (FUZZ_SEED ^ createHash("sha256").update(names.join("/")).digest().readInt32BE(0)) | 0;

/**
 * Limits high enough that the fuzz reaches the routes rather than the rate limiter (the rate limit
 * suites test the limiter), and a worker to process the fixture uploads.
 */
export const HOSTILE_ENV: Record<string, string> = {
  VOD_RATE_LIMIT_AUTH_PER_MINUTE: "1000000",
  VOD_RATE_LIMIT_LOGIN_PER_EMAIL: "1000000",
  VOD_RATE_LIMIT_API_PER_MINUTE: "1000000",
  VOD_RATE_LIMIT_TELEMETRY_PER_MINUTE: "1000000",
  VOD_WORKER_CONCURRENCY: "1",
  // The worlds' webhooks point at a closed port on 127.0.0.1; generated ones at hosts under .invalid.
  VOD_WEBHOOKS_ALLOW_PRIVATE: "true",
};

interface Figures {
  requests: number;
  byClass: Record<string, number>;
  failures: number;
}

const classOf = (status: number) => `${Math.floor(status / 100)}xx`;

export interface HostileInputOptions {
  /** Requests per (route, hostile class) batch. */
  readonly runs: number;
}

/**
 * Hostile input over HTTP against a host whose job queue processes uploads with a fake media
 * processor (so that ready assets and playback sessions exist): tenant isolation probes on every
 * route that names a resource, then a property-based fuzz of every route with every hostile class.
 * Both are generated from the operation catalog.
 */
export const describeHostileInput = (
  name: string,
  makeSubject: MakeHttpSubject,
  options: HostileInputOptions,
) => {
  describe(`hostile input [${name}]`, () => {
    const subject = sharedSubject(makeSubject, HOSTILE_ENV);
    let worlds: { a: TenantWorld; b: TenantWorld };
    let agent: Agent;
    let h: Harness;
    beforeAll(async () => {
      h = subject();
      agent = wireAgent();
      const [a, b] = await buildWorlds(h, ["A", "B"]);
      if (!a || !b) throw new Error("unreachable");
      worlds = { a, b };
    }, 60_000);
    afterAll(() => agent?.destroy());

    const send = (req: WireRequest) => sendWire(h.baseUrl, agent, req);

    it("generates for every route of the catalog, and for nothing else", () => {
      const generated = new Set(allRoutes.map((r) => `${r.method} ${r.path}`));
      const catalog = new Set(operations.map((op) => `${op.method} ${op.path}`));
      expect([...catalog].filter((r) => !generated.has(r))).toEqual([]);
      // HEAD of a file is its GET, as players send it.
      expect([...generated].filter((r) => !catalog.has(r.replace(/^HEAD /, "GET ")))).toEqual([]);
    });

    describe("tenant isolation", () => {
      const figures = { probes: 0, leaks: 0, wrong: 0 };
      afterAll(() => {
        console.log(
          `[hostile input ${name}] isolation: ${figures.probes} probes, ${figures.leaks} leaks, ${figures.wrong} other failures`,
        );
      });

      it("probes every catalog route that names a resource", () => {
        const probed = new Set(isolationProbes(worlds.a, worlds.b).map((p) => p.route));
        // A route taking API credentials names a resource by an id or by listing; one taking a
        // token of its own, through that token (unless its credential kind names nothing).
        const naming = allRoutes
          .filter((r) =>
            r.credential.kind === "api"
              ? idFieldsOf(r).length > 0 || r.method === "GET"
              : probesByCredential[r.credential.kind] !== null,
          )
          .map((r) => r.id);
        expect(naming.filter((id) => !probed.has(id))).toEqual([]);
      });

      for (const [callerName, victimName] of [
        ["B", "A"],
        ["A", "B"],
      ] as const) {
        it(`${callerName} reaches nothing of ${victimName}'s, with ${victimName}'s ids on every route`, async () => {
          const caller = callerName === "A" ? worlds.a : worlds.b;
          const victim = callerName === "A" ? worlds.b : worlds.a;
          const before = await storedState(h.backdoor, victim);
          const secrets = secretsOf(victim);
          const failures: string[] = [];
          const probes = isolationProbes(caller, victim);
          for (const probe of probes) {
            const reply = await send(probe.request);
            figures.probes++;
            const problems = probeProblems(probe, reply, secrets);
            if (problems.some((p) => p.startsWith("LEAK"))) figures.leaks++;
            else if (problems.length > 0) figures.wrong++;
            if (problems.length > 0)
              failures.push(
                `${probe.route}: ${problems.join("; ")}\n    ${describeRequest(probe.request)}\n    → ${describeReply(reply)}`,
              );
          }
          expect(failures).toEqual([]);
          expect(await storedState(h.backdoor, victim)).toEqual(before);
          // The victim's credentials all still work.
          for (const key of Object.values(victim.keys))
            expect((await h.api.get("/v1/auth/me", { apiKey: key.key })).status).toBe(200);
          expect((await h.api.get("/v1/auth/me", { bearer: victim.bearer })).status).toBe(200);
          for (const token of [victim.play.clear.token, victim.play.drm.token])
            expect(
              (await send({ method: "GET", path: `/v1/play/${token}/master.m3u8`, headers: {} })).status,
            ).toBe(200);
          expect((await h.api.post("/v1/drm/entitlement", { bearer: victim.play.drm.token })).status).toBe(
            200,
          );
        });
      }
    });

    describe("fuzz", () => {
      const figures: Figures = { requests: 0, byClass: {}, failures: 0 };
      const perRoute = new Map<string, number>();
      afterAll(() => {
        const classes = Object.entries(figures.byClass)
          .sort()
          .map(([k, v]) => `${k} ${v}`)
          .join(", ");
        console.log(
          `[hostile input ${name}] fuzz: ${figures.requests} requests (${classes}); 5xx ${figures.byClass["5xx"] ?? 0}; failing answers ${figures.failures}`,
        );
      });

      // Batches run a few at a time: the oracle never expects a success, so one batch ending a
      // credential another is using changes answers, not verdicts.
      for (const route of allRoutes)
        describe.concurrent(`${route.method} ${route.path}`, () => {
          for (const hostile of hostileClasses)
            it(hostile.name, async () => {
              await reviveCredentials(h.api, worlds.a);
              const ctx: FuzzContext = { world: worlds.a, other: worlds.b };
              const fields = fieldsOf(route);
              const bodyFields = fields.some((f) => f.location === "body")
                ? fields.filter((f) => f.location === "body").map((f) => f.name)
                : undefined;
              const requests = hostile
                .arbitrary(route, ctx)
                .map((req) => Object.assign(req, { [fc.toStringMethod]: () => describeRequest(req) }));
              await fc.assert(
                fc.asyncProperty(requests, async (req) => {
                  let reply: WireReply;
                  try {
                    reply = await send(req);
                  } catch (error) {
                    figures.requests++;
                    figures.failures++;
                    throw new Error(`no answer: ${(error as Error).message}`);
                  }
                  figures.requests++;
                  figures.byClass[classOf(reply.status)] = (figures.byClass[classOf(reply.status)] ?? 0) + 1;
                  perRoute.set(route.id, (perRoute.get(route.id) ?? 0) + 1);
                  const problems = [
                    ...problemsOf(req, reply),
                    ...catalogRuleProblems(req, reply, {
                      bodyFields,
                      nulInPath: !route.lenient.nul,
                      nulInBody: !route.lenient.nul && route.readsBody,
                    }),
                  ];
                  if (problems.length > 0) {
                    figures.failures++;
                    throw new Error(`${problems.join("; ")}\n  → ${describeReply(reply)}`);
                  }
                }),
                { seed: seedOf(route.id, hostile.name), numRuns: options.runs, endOnFailure: true },
              );
            });
        });

      it("sent requests on every route", () => {
        expect(allRoutes.filter((r) => (perRoute.get(r.id) ?? 0) === 0).map((r) => r.id)).toEqual([]);
      });
    });
  });
};

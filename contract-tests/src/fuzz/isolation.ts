import { Arbitrary, FastCheck as fc } from "effect";
import type { StorageBackdoor } from "../backdoor.js";
import { toWire } from "./hostile.js";
import { problemsOf } from "./oracle.js";
import {
  allRoutes,
  type CredentialSlot,
  encodeInput,
  type FuzzRoute,
  fieldsOf,
  idFieldsOf,
} from "./routes.js";
import type { WireReply, WireRequest } from "./wire.js";
import { idsOf, type TenantWorld } from "./world.js";

/** One request of a tenant that names another tenant's resources, and what must come back. */
export interface Probe {
  readonly route: string;
  readonly request: WireRequest;
  /** Statuses that are a correct refusal (or, for lists, a correct answer). */
  readonly statuses: ReadonlyArray<number>;
  /** Further checks of the answer; each returned string is a problem. */
  readonly check?: (reply: WireReply) => string[];
}

const SCOPE_RANK = { read: 0, write: 1, admin: 2 } as const;

/** Every credential of the caller, and whether the route accepts it. */
const callerCredentials = (route: FuzzRoute, w: TenantWorld) => {
  if (route.credential.kind !== "api") return [];
  const { scope, kinds } = route.credential.requirement;
  return [
    { headers: { authorization: `Bearer ${w.bearer}` }, ok: kinds === undefined || kinds.includes("user") },
    ...(["read", "write", "admin"] as const).map((s) => ({
      headers: { "x-api-key": w.keys[s].key },
      ok: (kinds === undefined || kinds.includes("api_key")) && SCOPE_RANK[s] >= SCOPE_RANK[scope],
    })),
  ];
};

/** A valid input of the route (fixed seed), encoded as it goes on the wire. */
const exampleInput = (route: FuzzRoute) => {
  const [value] = fc.sample(Arbitrary.make(route.input), { numRuns: 1, seed: 12 });
  return encodeInput(route)(value) as {
    params?: Record<string, string>;
    query?: Record<string, unknown>;
    body?: unknown;
  };
};

const withField = (container: unknown, name: string, value: unknown) => ({
  ...(typeof container === "object" && container !== null ? container : {}),
  [name]: value,
});

/**
 * Probes of a route taking API credentials, made from its inputs: every id-shaped field (path, query
 * or body) filled
 * with each of the victim's ids of its kind, every `*_token` body field with the victim's refresh
 * tokens, each with every credential of the caller. A GET without ids (lists, `me`) is called
 * with every credential and must show nothing of the victim's.
 */
const apiProbes = (route: FuzzRoute, caller: TenantWorld, victim: TenantWorld): Probe[] => {
  const credentials = callerCredentials(route, caller);
  const idFields = idFieldsOf(route);
  const tokenFields = fieldsOf(route).filter((f) => f.location === "body" && f.name.endsWith("_token"));
  const example = exampleInput(route);
  const draftOf = (
    headers: Record<string, string>,
    params: Record<string, string>,
    body: unknown,
    query: Record<string, unknown> = example.query ?? {},
  ) => toWire(route, { params, query, body, headers });
  if (idFields.length === 0 && tokenFields.length === 0)
    return route.method === "GET"
      ? credentials.map((c) => ({
          route: route.id,
          request: draftOf(c.headers, example.params ?? {}, example.body),
          statuses: c.ok ? [200] : [403],
        }))
      : [];
  const victimIds = idsOf(victim);
  const byId = idFields.flatMap((field) =>
    (victimIds[field.kind] ?? []).flatMap((id) =>
      credentials.map((c): Probe => {
        const params =
          field.location === "params" ? withField(example.params, field.name, id) : (example.params ?? {});
        const body = field.location === "body" ? withField(example.body, field.name, id) : example.body;
        const query = field.location === "query" ? withField(example.query, field.name, id) : example.query;
        return {
          route: route.id,
          request: draftOf(c.headers, params as Record<string, string>, body, query),
          statuses: c.ok ? [404] : [403],
        };
      }),
    ),
  );
  // A stranger's token in a body (logout's refresh_token) must change nothing of the victim's:
  // the stored state is compared afterwards; any non-5xx answer is the route's to choose.
  const byToken = tokenFields.flatMap((field) =>
    caller.victims.bearers.flatMap((bearer, i) => {
      const token = victim.victims.refreshTokens[i];
      return token === undefined
        ? []
        : [
            {
              route: route.id,
              request: draftOf(
                { authorization: `Bearer ${bearer}` },
                example.params ?? {},
                withField(example.body, field.name, token),
              ),
              statuses: [200, 201, 204, 400, 401, 403, 404],
            },
          ];
    }),
  );
  return [...byId, ...byToken];
};

const REFUSED = [401, 403, 404];

type ProbeMaker = (route: FuzzRoute, caller: TenantWorld, victim: TenantWorld) => Probe[];

/**
 * The probes of a route, by the credential it takes: its inputs with the victim's ids, or the
 * victim's resources reached through the caller's own token. `null`: such a route names no
 * resource (its only input of the tenant's is the credential itself).
 */
export const probesByCredential: Readonly<Record<CredentialSlot["kind"], ProbeMaker | null>> = {
  api: apiProbes,
  "signed-url": (route, caller, victim) => {
    const mine = new URL(caller.uploads.open.parts[0]?.url ?? "http://x/");
    const theirs = new URL(victim.uploads.open.parts[0]?.url ?? "http://x/");
    const part = (id: string, query: Record<string, string>): Probe => ({
      route: route.id,
      request: toWire(route, { params: { id, number: "1" }, query, body: "c".repeat(1_000), headers: {} }),
      statuses: REFUSED,
    });
    return [
      // The caller's own signature on the victim's upload id.
      part(victim.uploads.open.id, Object.fromEntries(mine.searchParams)),
      // The victim's URL, claimed for the caller's tenant.
      part(victim.uploads.open.id, {
        ...Object.fromEntries(theirs.searchParams),
        t: caller.account.tenant.id,
      }),
      part(caller.uploads.open.id, Object.fromEntries(theirs.searchParams)),
    ];
  },
  "playback-path": (route, caller, victim) => {
    const tenant = victim.account.tenant.id;
    const asset = victim.assets.ready.id;
    const paths = [
      `../${asset}/master.m3u8`,
      `..%2F${asset}%2Fmaster.m3u8`,
      `%2e%2e/%2e%2e/${tenant}/${asset}/master.m3u8`,
      `../../${tenant}/${asset}/360p/playlist.m3u8`,
      `renditions/${tenant}/${asset}/master.m3u8`,
      `${asset}/master.m3u8`,
    ];
    // A route whose file is its own name (`thumbnail.jpg`) names nothing but the token's asset:
    // only the victim's ids as the token are probes of it.
    const hasPath = route.path.includes("*path");
    const viaToken = (hasPath ? [caller.play.clear.token, caller.play.drm.token] : []).flatMap((token) =>
      paths.map(
        (path): Probe => ({
          route: route.id,
          request: toWire(route, {
            params: {},
            rawParams: { token, path },
            query: {},
            body: undefined,
            headers: {},
          }),
          statuses: [404],
        }),
      ),
    );
    // The victim's ids where the token goes.
    const asToken = [asset, victim.play.clear.id, tenant].map(
      (token): Probe => ({
        route: route.id,
        request: toWire(route, {
          params: { token, path: "master.m3u8" },
          query: {},
          body: undefined,
          headers: {},
        }),
        statuses: [401],
      }),
    );
    return [...viaToken, ...asToken];
  },
  "license-header": (route, caller, victim) => {
    return [[victim.play.drm.kid], [caller.play.drm.kid, victim.play.drm.kid]].map(
      (kids): Probe => ({
        route: route.id,
        request: toWire(route, {
          params: {},
          query: {},
          body: { kids, type: "temporary" },
          headers: { "x-vod-license-token": caller.play.drm.license },
        }),
        statuses: [200, ...REFUSED],
        check: (reply) => {
          if (reply.status !== 200) return [];
          const keys = (JSON.parse(reply.text) as { keys?: Array<{ kid?: string }> }).keys ?? [];
          return keys.some((k) => k.kid === victim.play.drm.kid)
            ? ["licence holds the other tenant's key id"]
            : [];
        },
      }),
    );
  },
  "playback-body": null,
  "playback-bearer": null,
  // The process's own series: no tenant's resource to reach.
  "metrics-bearer": null,
  none: null,
};

/** Every isolation probe of `caller` against `victim`, on every route of the catalog. */
export const isolationProbes = (caller: TenantWorld, victim: TenantWorld): Probe[] =>
  allRoutes.flatMap((route) => probesByCredential[route.credential.kind]?.(route, caller, victim) ?? []);

/** The problems of one probe's answer: a wrong status, a non-spec error, anything of the victim's. */
export const probeProblems = (probe: Probe, reply: WireReply, victim: ReadonlyArray<string>): string[] => {
  const problems = problemsOf(probe.request, reply);
  if (!probe.statuses.includes(reply.status))
    problems.push(`status ${reply.status}, expected ${probe.statuses.join(" or ")}`);
  problems.push(...(probe.check?.(reply) ?? []));
  // What the caller sent may come back (an echoed id is no leak); nothing else of the victim's may.
  const sent = `${probe.request.path} ${JSON.stringify(probe.request.headers)} ${String(probe.request.body ?? "")}`;
  const leaked = victim.filter(
    (secret) => secret.length > 0 && reply.text.includes(secret) && !sent.includes(secret),
  );
  if (leaked.length > 0)
    problems.push(`LEAK of the other tenant's ${leaked.map((s) => JSON.stringify(s)).join(", ")}`);
  return problems;
};

/** What the storage holds of a tenant, to compare before and after the probes. */
export const storedState = async (backdoor: StorageBackdoor, w: TenantWorld) => {
  const ids = idsOf(w);
  const strip = <T extends object | undefined>(record: T) => {
    if (record === undefined) return record;
    const { last_used_at: _, ...rest } = record as T & { last_used_at?: unknown };
    return rest;
  };
  return {
    tenant: await backdoor.tenant(w.account.tenant.id),
    user: await backdoor.user(w.account.user.id),
    assets: await Promise.all((ids.asset ?? []).map((id) => backdoor.asset(id))),
    uploads: await Promise.all((ids.upload ?? []).map((id) => backdoor.upload(id))),
    keys: await Promise.all((ids["api-key"] ?? []).map(async (id) => strip(await backdoor.apiKey(id)))),
    refreshSessions: await Promise.all(w.victims.refreshSessionIds.map((id) => backdoor.refreshSession(id))),
  };
};

import type { Queryable, QueryResult, SessionScope, SqlDatabase, Statement } from "./sql.js";

/**
 * Row-level security, the adapter's half (the policies are migration 4, `row-level-security.ts`).
 * Every statement on a tenant-owned table runs in a session or transaction that has switched to
 * the schema's app role, which the policies bind, and set the settings they read: the tenant, or
 * for the few lookups that discover the tenant, the one key being looked up.
 */

/** The settings the policies read. Every scope sets all of them, the unused ones to ''. */
const SETTINGS = [
  "vod.tenant_id",
  "vod.api_key_hash",
  "vod.refresh_token_hash",
  "vod.email_token_hash",
  "vod.email",
  "vod.identity_provider",
  "vod.identity_subject",
  "vod.expired_before",
  "vod.telemetry",
] as const;

export type Setting = (typeof SETTINGS)[number];

export interface Scope {
  /** `app`: the role the policies bind; `login`: the connection's own (pg-boss's statements). */
  readonly role: "app" | "login";
  readonly settings: Partial<Record<Setting, string>>;
}

/** The role's name, derived in SQL so that the adapter need not be told it. */
export const APP_ROLE_SQL = "'vod_app_' || current_database() || '_' || current_schema()";

/** The app role of `schema` in `database`, as migration 4 names it. */
export const appRoleName = (database: string, schema: string) => `vod_app_${database}_${schema}`;

export const tenantScope = (tenantId: string): Scope => ({
  role: "app",
  settings: { "vod.tenant_id": tenantId },
});

/** A lookup that discovers the tenant: the policies show it only the rows matching `settings`. */
export const lookupScope = (settings: Partial<Record<Setting, string>>): Scope => ({ role: "app", settings });

/** Telemetry batches span tenants: this scope may insert telemetry events and do nothing else. */
export const telemetryScope: Scope = { role: "app", settings: { "vod.telemetry": "ingest" } };

/** pg-boss's statements: its schema is not tenant-owned, and the app role has no rights there. */
export const loginScope: Scope = { role: "login", settings: {} };

const roleOf = (scope: Scope) => (scope.role === "app" ? APP_ROLE_SQL : "'none'");

/**
 * The statement that switches to the scope's role and sets every setting: transaction-local
 * (`local`), or for the rest of the session.
 */
const scopeText = (role: Scope["role"], local: boolean) =>
  `SELECT set_config('role', ${roleOf({ role, settings: {} })}, ${local}), ${SETTINGS.map(
    (s, i) => `set_config('${s}', $${i + 1}, ${local})`,
  ).join(", ")}`;
// Built once: every call of a request's hot path sets its scope.
const SCOPE_TEXTS = {
  app: { local: scopeText("app", true), session: scopeText("app", false) },
  login: { local: scopeText("login", true), session: scopeText("login", false) },
};

const scopeStatement = (scope: Scope, local: boolean): Statement => ({
  text: SCOPE_TEXTS[scope.role][local ? "local" : "session"],
  params: SETTINGS.map((s) => scope.settings[s] ?? ""),
});

/** Equal keys, equal statements: the role and every setting's value (JSON: no two alike). */
const keyOf = (scope: Scope) => JSON.stringify([scope.role, ...SETTINGS.map((s) => scope.settings[s] ?? "")]);

/** The scope as a connection's session keeps it between statements (`SqlDatabase.queryIn`). */
const sessionScope = (scope: Scope): SessionScope => ({
  key: keyOf(scope),
  set: scopeStatement(scope, false),
});

/**
 * The session a connection starts in and that every statement outside a scope needs: the login
 * role, every setting empty (as unset, the policies match no row). Its statement has no
 * parameters, so it also goes in front of a text of several statements.
 */
export const neutralSession: SessionScope = {
  key: keyOf(loginScope),
  set: {
    text: `SELECT set_config('role', 'none', false), ${SETTINGS.map((s) => `set_config('${s}', '', false)`).join(", ")}`,
    params: [],
  },
};

/** The neutral scope for the rest of one transaction only. */
export const neutralInTransaction = neutralSession.set.text.replaceAll(", false)", ", true)");

/** Statements, each run in a scope. */
export interface ScopedSql {
  query<R = Record<string, unknown>>(
    scope: Scope,
    text: string,
    params?: ReadonlyArray<unknown>,
  ): Promise<QueryResult<R>>;
}

/**
 * Each statement on a connection whose session is in the statement's scope
 * (`SqlDatabase.queryIn`): the statement alone when the session already is, else the scope set
 * for the session and the statement in one transaction (one round trip on a server).
 */
export const standaloneScoped = (db: SqlDatabase): ScopedSql => {
  // A request's statements are nearly all in its tenant's scope: its session form (a key and a
  // statement of nine parameters) is made once per tenant, not per statement. Bounded: past the
  // bound, the oldest half goes.
  const tenants = new Map<string, SessionScope>();
  const sessionOf = (scope: Scope): SessionScope => {
    const tenantId = scope.settings["vod.tenant_id"];
    if (scope.role !== "app" || tenantId === undefined || Object.keys(scope.settings).length !== 1)
      return sessionScope(scope);
    let session = tenants.get(tenantId);
    if (session === undefined) {
      if (tenants.size >= 10_000) for (const key of [...tenants.keys()].slice(0, 5_000)) tenants.delete(key);
      session = sessionScope(scope);
      tenants.set(tenantId, session);
    }
    return session;
  };
  return { query: (scope, text, params) => db.queryIn(sessionOf(scope), text, params) };
};

/**
 * The statements of one open transaction. The scope is set again only when a statement's differs
 * from the last one's, sent with the statement without waiting between (one round trip on a
 * server). Statements run one at a time, so none runs in another's scope.
 */
export const transactionScoped = (tx: Queryable): ScopedSql => {
  let current: string | undefined;
  let tail: Promise<unknown> = Promise.resolve();
  return {
    query: <R>(scope: Scope, text: string, params?: ReadonlyArray<unknown>) => {
      const run = tail.then(async () => {
        const key = keyOf(scope);
        if (key === current) return tx.query<R>(text, params);
        const set = scopeStatement(scope, true);
        const [setting, result] = await Promise.allSettled([
          tx.query(set.text, set.params),
          tx.query<R>(text, params),
        ]);
        if (setting.status === "rejected") throw setting.reason;
        current = key;
        if (result.status === "rejected") throw result.reason;
        return result.value;
      });
      tail = run.catch(() => undefined);
      return run;
    },
  };
};

/** A plain Queryable whose every statement runs in `scope` (what pg-boss is handed). */
export const inScope = (sql: ScopedSql, scope: Scope): Queryable => ({
  query: (text, params) => sql.query(scope, text, params),
  exec: async (text) => {
    await sql.query(scope, text);
  },
});

import type { Queryable, QueryResult, SqlDatabase } from "./sql.js";

/**
 * Row-level security, the adapter's half (the policies are migration 4, `row-level-security.ts`).
 * Every statement on a tenant-owned table runs in a transaction that has switched to the schema's
 * app role, which the policies bind, and set the settings they read: the tenant, or for the few
 * lookups that discover the tenant, the one key being looked up.
 */

/** The settings the policies read. Every scope sets all of them, the unused ones to ''. */
const SETTINGS = [
  "vod.tenant_id",
  "vod.api_key_hash",
  "vod.refresh_token_hash",
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

const settingsSql = (scope: Scope, value: (setting: Setting, index: number) => string) =>
  `SELECT set_config('role', ${scope.role === "app" ? APP_ROLE_SQL : "'none'"}, true), ${SETTINGS.map(
    (s, i) => `set_config('${s}', ${value(s, i)}, true)`,
  ).join(", ")}`;

const scopeStatement = (scope: Scope) => ({
  text: settingsSql(scope, (_, i) => `$${i + 1}`),
  params: SETTINGS.map((s) => scope.settings[s] ?? ""),
});

/**
 * Characters that can stand inside a quoted literal without escaping. IDs and hex hashes are
 * made of them; a value with any other character (an email with a quote) goes as a parameter.
 */
const PLAIN = /^[A-Za-z0-9_.@+:-]{0,256}$/;

/** The scope as one statement without parameters, when its values allow: it rides with BEGIN. */
const scopeInline = (scope: Scope) =>
  SETTINGS.every((s) => PLAIN.test(scope.settings[s] ?? ""))
    ? settingsSql(scope, (s) => `'${scope.settings[s] ?? ""}'`)
    : undefined;

/** Statements, each run in a scope. */
export interface ScopedSql {
  query<R = Record<string, unknown>>(
    scope: Scope,
    text: string,
    params?: ReadonlyArray<unknown>,
  ): Promise<QueryResult<R>>;
}

/**
 * Each statement in a transaction of its own, opened in the statement's scope: on a server,
 * three round trips (BEGIN with the scope, the statement, COMMIT) where it was one.
 */
export const standaloneScoped = (db: SqlDatabase): ScopedSql => ({
  query: <R>(scope: Scope, text: string, params?: ReadonlyArray<unknown>) => {
    const inline = scopeInline(scope);
    if (inline !== undefined) return db.transaction((tx) => tx.query<R>(text, params), inline);
    const set = scopeStatement(scope);
    return db.transaction(async (tx) => {
      await tx.query(set.text, set.params);
      return tx.query<R>(text, params);
    });
  },
});

/**
 * The statements of one open transaction. The scope is set again only when a statement's differs
 * from the last one's; statements are run one at a time, so none runs in another's scope.
 */
export const transactionScoped = (tx: Queryable): ScopedSql => {
  let current: string | undefined;
  let tail: Promise<unknown> = Promise.resolve();
  return {
    query: <R>(scope: Scope, text: string, params?: ReadonlyArray<unknown>) => {
      const run = tail.then(async () => {
        const key = JSON.stringify(scope);
        if (key !== current) {
          const set = scopeStatement(scope);
          await tx.query(set.text, set.params);
          current = key;
        }
        return tx.query<R>(text, params);
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

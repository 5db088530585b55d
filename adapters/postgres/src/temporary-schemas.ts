import { randomBytes } from "node:crypto";
import { connectPostgres } from "./pg-pool.js";
import { appRoleName } from "./tenancy.js";

/**
 * Schemas of their own for tests on a shared PostgreSQL server: `fresh()` names a new one (the
 * migrations create it), `dropAll()` removes every one handed out, with the role its migrations
 * made for row-level security (roles belong to the cluster, so they would otherwise pile up).
 */
export const temporarySchemas = (databaseUrl: string, prefix = "vod_test") => {
  const names: string[] = [];
  return {
    fresh: () => {
      const name = `${prefix}_${randomBytes(6).toString("hex")}`;
      names.push(name);
      return name;
    },
    dropAll: async () => {
      const admin = connectPostgres({ connectionString: databaseUrl, poolSize: 1 });
      try {
        const { rows } = await admin.query<{ db: string }>("SELECT current_database() AS db");
        const database = rows[0]?.db ?? "";
        // The job queue keeps its tables in a schema named after ours (adapters/postgres jobs.ts).
        for (const name of names.splice(0))
          await admin.exec(
            `DROP SCHEMA IF EXISTS ${name} CASCADE; DROP SCHEMA IF EXISTS ${name}_jobs CASCADE;
             DROP ROLE IF EXISTS "${appRoleName(database, name)}"`,
          );
      } finally {
        await admin.close();
      }
    },
  };
};

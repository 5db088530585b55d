import { normalizeEmail, type Tenant } from "@vod/core";
import { type MemoryObjectStore, memoryObjects } from "./object-store.js";
import type { MemoryState } from "./state.js";
import { type MemoryStorage, memoryState } from "./storage.js";

/** Direct reads of a `memoryStorage`'s records, in the shape of `@vod/contract-tests`' StorageBackdoor. */
export const memoryBackdoor = (storage: MemoryStorage) => {
  const s = storage[memoryState];
  return {
    tenant: async (id: string) => s.tenants.get(id),
    user: async (id: string) => s.users.get(id),
    identity: async (provider: "google", subject: string) => s.identities.get(`${provider}:${subject}`),
    refreshSession: async (id: string) => s.refreshSessions.get(id),
    refreshTokensOfSession: async (sessionId: string) =>
      [...s.refreshTokens.values()].filter((t) => t.session_id === sessionId),
    emailTokensOfUser: async (userId: string) =>
      [...s.emailTokens.values()]
        .filter((t) => t.user_id === userId)
        .sort((a, b) => a.created_at - b.created_at),
    apiKey: async (id: string) => s.apiKeys.get(id),
    asset: async (id: string) => s.assets.get(id),
    upload: async (id: string) => s.uploads.get(id),
    playbackSession: async (id: string) => s.playbackSessions.get(id),
    contentKey: async (assetId: string) => [...s.contentKeys.values()].find((k) => k.asset_id === assetId),
    webhook: async (id: string) => s.webhooks.get(id),
    textTrack: async (id: string) => s.textTracks.get(id),
    idempotencyRecords: async (tenantId: string) =>
      [...s.idempotencyKeys.values()]
        .filter((r) => r.tenantId === tenantId)
        .map((r): Record<string, unknown> => ({ ...r })),
    rowsOfTenant: async (tenantId: string) => {
      const counts: Record<string, number> = {};
      for (const [name, map] of Object.entries(s)) {
        if (name === "jobs" || !(map instanceof Map)) continue;
        let n = 0;
        for (const [key, record] of map) {
          const owned =
            name === "tenants"
              ? key === tenantId
              : typeof record === "object" &&
                record !== null &&
                ((record as { tenant_id?: unknown }).tenant_id === tenantId ||
                  (record as { tenantId?: unknown }).tenantId === tenantId);
          if (owned) n += 1;
        }
        if (n > 0) counts[name] = n;
      }
      return counts;
    },
    jobs: async () => [...s.jobs.values()].map(({ name, data, state }) => ({ name, data, state })),
    insertUser: async (user: Parameters<MemoryState["users"]["set"]>[1]) => {
      s.users.set(user.id, user);
      s.usersByEmail.set(normalizeEmail(user.email), user.id);
    },
    insertApiKeys: async (keys: ReadonlyArray<Parameters<MemoryState["apiKeys"]["set"]>[1]>) => {
      for (const key of keys) {
        s.apiKeys.set(key.id, key);
        s.apiKeysByHash.set(key.key_hash, key.id);
      }
    },
    setTenantStatus: async (id: string, status: Tenant["status"]) => {
      const tenant = s.tenants.get(id);
      if (tenant) s.tenants.set(id, { ...tenant, status });
    },
  };
};

/** What a `memoryObjectStore` holds, in the shape of `@vod/contract-tests`' ObjectStoreBackdoor. */
export const memoryObjectStoreBackdoor = (store: MemoryObjectStore) => {
  const { objects, uploads } = store[memoryObjects];
  return {
    read: async (key: string) => objects.get(key)?.bytes.slice(),
    exists: async (key: string) => objects.has(key),
    keysUnder: async (prefix: string) => [...objects.keys()].filter((key) => key.startsWith(prefix)).sort(),
    storedParts: async (uploadId: string) =>
      [...(uploads.get(uploadId) ?? new Map()).entries()]
        .sort(([a], [b]) => a - b)
        .map(([number, p]) => ({ number, bytes: p.bytes.slice() })),
  };
};

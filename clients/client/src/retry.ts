/** Retries: what is worth another attempt, and how long to wait before it. */

export interface RetryPolicy {
  /** Attempts after the first. */
  readonly retries: number;
  /** The first wait; each next one doubles, up to `maxDelayMs`, with jitter. */
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
}

export const defaultRetry: RetryPolicy = { retries: 4, baseDelayMs: 300, maxDelayMs: 10_000 };

/** Statuses that say "later": rate limited, a timeout, a gateway or a storage error that passes. */
export const transientStatus = (status: number) =>
  status === 408 || status === 429 || status === 500 || status === 502 || status === 503 || status === 504;

/** Full-jitter exponential backoff; a Retry-After (seconds) the server sent wins when longer. */
export const backoffMs = (policy: RetryPolicy, attempt: number, retryAfter?: string | null) => {
  const exp = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** attempt);
  const jittered = exp / 2 + Math.random() * (exp / 2);
  const after = retryAfter ? Number(retryAfter) * 1000 : Number.NaN;
  return Number.isFinite(after) && after > jittered ? Math.min(after, 60_000) : jittered;
};

export const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });

import type { AccountMailResult, ImageKind, Metrics, ProcessingEnd, WebhookDeliveryResult } from "@vod/core";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/** What the Redis adapter has seen of Redis (`RedisAdapters.health()`), read at each scrape. */
export interface RedisHealthSource {
  readonly connected: boolean;
  readonly outages: number;
  readonly fallbackHits: number;
}

export interface PrometheusOptions {
  /** Redis's health, when Redis is configured: its gauges and counters then appear. */
  readonly redis?: () => RedisHealthSource;
  /** The process's own metrics (CPU, memory, event loop, GC): on unless false. */
  readonly defaultMetrics?: boolean;
}

/** One finished HTTP exchange, as the host labels it. */
export interface RequestLabels {
  /** The route's template (`/v1/assets/:id`), never the raw path; `unmatched` for no route. */
  readonly route: string;
  readonly method: string;
  readonly status: number;
}

export interface PrometheusMetrics extends Metrics {
  requestEnded(labels: RequestLabels, seconds: number): void;
  /** The Content-Type of `render()`'s text. */
  readonly contentType: string;
  /** Every series, in the Prometheus text exposition format. */
  render(): Promise<string>;
}

/** Methods a client may send are unbounded; the label keeps the ones HTTP defines. */
const METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

const PROCESSING_ENDS: ReadonlyArray<ProcessingEnd> = [
  "ready",
  "failed",
  "skipped",
  "chunked",
  "encoded",
  "deferred",
  "retry",
  "released",
];
const WEBHOOK_RESULTS: ReadonlyArray<WebhookDeliveryResult> = ["succeeded", "retrying", "failed"];
const MAIL_RESULTS: ReadonlyArray<AccountMailResult> = ["sent", "skipped", "retrying", "failed"];
const IMAGE_KINDS: ReadonlyArray<ImageKind> = ["thumbnail", "animated", "storyboard"];

/**
 * The platform's metrics on a registry of their own (not prom-client's global one), so that
 * several hosts in one process (tests, an embedder) each expose only what they counted.
 */
export const prometheusMetrics = (options: PrometheusOptions = {}): PrometheusMetrics => {
  const registry = new Registry();
  const registers = [registry];
  if (options.defaultMetrics !== false) collectDefaultMetrics({ register: registry });

  // The plain series, one line each: the registry and the label names are all that varies.
  const counter = <L extends string>(name: string, help: string, labelNames: ReadonlyArray<L> = []) =>
    new Counter({ name, help, labelNames, registers });
  const histogram = <L extends string>(
    name: string,
    help: string,
    labelNames: ReadonlyArray<L>,
    buckets?: number[],
  ) => new Histogram({ name, help, labelNames, registers, ...(buckets ? { buckets } : {}) });

  const requests = histogram(
    "vod_http_request_duration_seconds",
    "HTTP requests answered, by route template, method and status, and how long they took",
    ["route", "method", "status"],
  );
  const jobs = counter(
    "vod_processing_jobs_total",
    "Processing runs by state: started, or how they ended (ready, failed, skipped, retry, released)",
    ["state"],
  );
  const running = new Gauge({
    name: "vod_processing_jobs_running",
    help: "Processing runs in progress in this process",
    registers,
  });
  // Transcodes run from seconds to hours.
  const jobSeconds = histogram(
    "vod_processing_job_duration_seconds",
    "How long processing runs took, by how they ended",
    ["state"],
    [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400],
  );
  const telemetry = counter("vod_telemetry_events_stored_total", "Player telemetry events stored");
  const webhooks = counter(
    "vod_webhook_deliveries_total",
    "Webhook delivery attempts by result (succeeded, retrying, failed)",
    ["result"],
  );
  const mails = counter(
    "vod_account_mails_total",
    "Runs of account mail jobs by result (sent, skipped, retrying, failed)",
    ["result"],
  );
  const images = counter(
    "vod_images_made_total",
    "Images made for playback on request (thumbnail, animated, storyboard); one served from the store is not counted",
    ["kind"],
  );
  const imageSeconds = histogram(
    "vod_image_make_duration_seconds",
    "How long making one image took (fetching its segments, decoding, encoding, storing)",
    ["kind"],
    [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
  );
  const redis = options.redis;
  // The Redis adapter keeps the counts; these read them at each scrape.
  new Counter({
    name: "vod_rate_limit_fallback_hits_total",
    help: "Rate-limit hits counted by this node's own memory because Redis could not be reached",
    registers,
    collect() {
      this.reset();
      this.inc(redis?.().fallbackHits ?? 0);
    },
  });
  if (redis) {
    new Gauge({
      name: "vod_redis_up",
      help: "1 while Redis answers (rate limits shared by every node), else 0",
      registers,
      collect() {
        this.set(redis().connected ? 1 : 0);
      },
    });
    new Counter({
      name: "vod_redis_outages_total",
      help: "Redis outages seen since this process started (a start without Redis counts as one)",
      registers,
      collect() {
        this.reset();
        this.inc(redis().outages);
      },
    });
  }
  // Every state's series from the start, at 0: a rate over a series that appears late misses its first increase.
  jobs.inc({ state: "started" }, 0);
  for (const state of PROCESSING_ENDS) jobs.inc({ state }, 0);
  for (const result of WEBHOOK_RESULTS) webhooks.inc({ result }, 0);
  for (const result of MAIL_RESULTS) mails.inc({ result }, 0);
  for (const kind of IMAGE_KINDS) images.inc({ kind }, 0);

  const requestChildren = new Map<string, { observe(value: number): void }>();
  return {
    processingStarted: () => {
      jobs.inc({ state: "started" });
      running.inc();
    },
    processingEnded: (end, seconds) => {
      jobs.inc({ state: end });
      jobSeconds.observe({ state: end }, seconds);
      running.dec();
    },
    telemetryStored: (count) => telemetry.inc(count),
    webhookDelivered: (result) => webhooks.inc({ result }),
    accountMailSent: (result) => mails.inc({ result }),
    imageMade: (kind, seconds) => {
      images.inc({ kind });
      imageSeconds.observe({ kind }, seconds);
    },
    requestEnded: ({ route, method, status }, seconds) => {
      // prom-client hashes the label object on every observe; each route's child is kept instead
      // (routes are templates and methods a fixed set, so the map stays small).
      const known = METHODS.has(method) ? method : "other";
      const key = `${known} ${status} ${route}`;
      let child = requestChildren.get(key);
      if (child === undefined) {
        child = requests.labels({ route, method: known, status: String(status) });
        requestChildren.set(key, child);
      }
      child.observe(seconds);
    },
    contentType: registry.contentType,
    render: () => registry.metrics(),
  };
};

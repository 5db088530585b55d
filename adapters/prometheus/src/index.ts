export {
  type PrometheusMetrics,
  type PrometheusOptions,
  prometheusMetrics,
  type RedisHealthSource,
  type RequestLabels,
} from "./prometheus.js";

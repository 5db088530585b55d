// The parser ships no types; this is the shape its README documents (prom2json's).
declare module "parse-prometheus-text-format" {
  export interface Sample {
    readonly labels?: Readonly<Record<string, string>>;
    /** Counters, gauges and untyped samples. */
    readonly value?: string;
    /** Histograms: cumulative counts by upper bound (`le`), and the totals. */
    readonly buckets?: Readonly<Record<string, string>>;
    readonly count?: string;
    readonly sum?: string;
  }
  export interface Family {
    readonly name: string;
    readonly help: string;
    readonly type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED";
    readonly metrics: ReadonlyArray<Sample>;
  }
  export default function parsePrometheusTextFormat(text: string): Family[];
}

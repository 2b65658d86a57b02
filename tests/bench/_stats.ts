/** Latency histogram, percentiles and the table the bench prints. */

const BUCKET_MS = 0.01;
const BUCKETS = 500_000; // 10 µs buckets up to 5 s; slower samples go to `over`.

/** A latency histogram with 10 µs resolution; cheap enough to record every delivery. */
export class Histogram {
  readonly #counts = new Uint32Array(BUCKETS);
  readonly #over: number[] = [];
  count = 0;
  #sum = 0;
  #max = 0;

  record(ms: number): void {
    this.count++;
    this.#sum += ms;
    if (ms > this.#max) this.#max = ms;
    const b = Math.floor(ms / BUCKET_MS);
    if (b < 0) this.#counts[0]!++;
    else if (b < BUCKETS) this.#counts[b]!++;
    else this.#over.push(ms);
  }

  /** Records `n` samples of the same value (a frame of n events received at once). */
  recordMany(ms: number, n: number): void {
    for (let i = 0; i < n; i++) this.record(ms);
  }

  get mean(): number {
    return this.count ? this.#sum / this.count : 0;
  }

  get max(): number {
    return this.#max;
  }

  /** The value at percentile `p` (0–100), in ms. */
  percentile(p: number): number {
    if (this.count === 0) return NaN;
    const rank = Math.max(1, Math.ceil((p / 100) * this.count));
    let seen = 0;
    for (let b = 0; b < BUCKETS; b++) {
      seen += this.#counts[b]!;
      if (seen >= rank) return (b + 0.5) * BUCKET_MS;
    }
    const over = [...this.#over].sort((a, b) => a - b);
    return over[rank - seen - 1] ?? this.#max;
  }

  summary(): LatencySummary {
    return {
      n: this.count,
      p50: round(this.percentile(50)),
      p90: round(this.percentile(90)),
      p99: round(this.percentile(99)),
      max: round(this.max),
      mean: round(this.mean),
    };
  }
}

/** Percentiles of one latency distribution, in ms. */
export interface LatencySummary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

/** Percentile of a small sample (spawn times), nearest-rank. */
export function percentileOf(samples: number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[
    Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  ]!;
}

export function round(x: number, digits = 2): number {
  if (!Number.isFinite(x)) return x;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** 12345.6 → "12.3k", 1234567 → "1.23M". */
export function si(x: number): string {
  if (!Number.isFinite(x)) return "-";
  const a = Math.abs(x);
  if (a >= 1e6) return `${(x / 1e6).toFixed(a >= 1e7 ? 1 : 2)}M`;
  if (a >= 1e4) return `${(x / 1e3).toFixed(a >= 1e5 ? 0 : 1)}k`;
  if (a >= 100) return x.toFixed(0);
  return x.toFixed(a >= 10 ? 1 : 2);
}

export function mb(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

export function ms(x: number): string {
  if (!Number.isFinite(x)) return "-";
  return x >= 100 ? `${x.toFixed(0)} ms` : `${x.toFixed(x >= 10 ? 1 : 2)} ms`;
}

/** Renders rows as a Markdown table (also readable in a terminal). */
export function markdownTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`;
  return [
    line(header),
    `| ${widths.map((w) => "-".repeat(w)).join(" | ")} |`,
    ...rows.map(line),
  ].join("\n");
}

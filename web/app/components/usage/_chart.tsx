/**
 * Cost per day as a bar chart drawn in SVG: a chart library (uPlot) would be
 * a second bundle to lazy-load, and `deno bundle` here makes one file; bars
 * of at most a few hundred days need no more than this.
 *
 * @module
 */
import { useEffect, useRef, useState } from "preact/hooks";
import type { UsageResponse } from "../../../../shared/usage_api.ts";
import { cost } from "../../format.ts";

/** One bar: a day (or a month, for long ranges) and its cost. */
export interface Bar {
  label: string;
  /** Shown under the chart at a few bars only. */
  short: string;
  costUsd: number;
  tokens: number;
}

const MAX_DAY_BARS = 120;

/**
 * The bars of `days` from `from` (a `YYYY-MM-DD`, or the first day with
 * activity) to `today`, a zero bar for each quiet day; by month beyond
 * {@linkcode MAX_DAY_BARS} days.
 */
export function bars(days: UsageResponse["days"], from: string | null, today: string): Bar[] {
  const byDay = new Map(days.map((d) => [d.date, d]));
  const first = from ?? days[0]?.date ?? today;
  const list: Bar[] = [];
  for (let t = Date.parse(first); t <= Date.parse(today); t += 86_400_000) {
    const date = new Date(t).toISOString().slice(0, 10);
    const d = byDay.get(date);
    list.push({
      label: date,
      short: date.slice(5),
      costUsd: d?.costUsd ?? 0,
      tokens: d ? d.inputTokens + d.outputTokens : 0,
    });
  }
  if (list.length <= MAX_DAY_BARS) return list;
  const months = new Map<string, Bar>();
  for (const b of list) {
    const key = b.label.slice(0, 7);
    const m = months.get(key) ?? { label: key, short: key, costUsd: 0, tokens: 0 };
    m.costUsd += b.costUsd;
    m.tokens += b.tokens;
    months.set(key, m);
  }
  return [...months.values()];
}

/** The chart; each bar has a tooltip, and the figure a text summary for screen readers. */
export function CostChart({ data }: { data: Bar[] }) {
  // Drawn at the figure's own width, so the labels keep their size on a phone.
  const ref = useRef<HTMLElement>(null);
  const [W, setW] = useState(720);
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    const ro = new ResizeObserver(() => setW(Math.max(240, Math.round(el.clientWidth))));
    ro.observe(el);
    return () => ro.disconnect();
  }, []);
  const H = 200;
  const top = 12;
  const bottom = 22;
  const left = 48;
  const max = Math.max(...data.map((b) => b.costUsd), 0);
  const scale = niceMax(max);
  const step = (W - left) / Math.max(data.length, 1);
  const bw = Math.max(1, step * 0.72);
  const y = (v: number) => H - bottom - (scale ? v / scale : 0) * (H - top - bottom);
  const every = Math.ceil(data.length / Math.max(2, Math.floor(W / 110)));
  const total = data.reduce((n, b) => n + b.costUsd, 0);
  const peak = data.reduce((p, b) => b.costUsd > p.costUsd ? b : p, data[0]!);
  return (
    <figure class="chart" ref={ref}>
      <svg
        width={W}
        height={H}
        viewBox={`0 0 ${W} ${H}`}
        role="img"
        aria-label={`Cost per ${data[0]?.label.length === 7 ? "month" : "day"}: ${
          cost(total)
        } in all${
          peak && peak.costUsd > 0 ? `, highest ${cost(peak.costUsd)} on ${peak.label}` : ""
        }`}
      >
        {[0, 0.5, 1].map((f) => (
          <g key={f}>
            <line class="grid" x1={left} x2={W} y1={y(scale * f)} y2={y(scale * f)} />
            <text class="axis" x={left - 6} y={y(scale * f) + 4} text-anchor="end">
              {cost(scale * f)}
            </text>
          </g>
        ))}
        {data.map((b, i) => (
          <g key={b.label}>
            <rect
              class="bar"
              x={left + i * step + (step - bw) / 2}
              y={y(b.costUsd)}
              width={bw}
              height={Math.max(0, H - bottom - y(b.costUsd))}
            >
              <title>{`${b.label}: ${cost(b.costUsd)}`}</title>
            </rect>
            {i % every === 0 && (
              <text class="axis" x={left + i * step + step / 2} y={H - 6} text-anchor="middle">
                {b.short}
              </text>
            )}
          </g>
        ))}
      </svg>
    </figure>
  );
}

/** A round top for the axis: 1, 2 or 5 times a power of ten, at least `v`. */
function niceMax(v: number): number {
  if (v <= 0) return 0;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/**
 * Rows of the results table: as a scenario measures them in one round, and
 * merged over the rounds (the median round's figures, with the spread of
 * all of them), and how they print.
 *
 * @module
 */
import type { Pinning } from "./_pinning.ts";
import { markdownTable } from "./_stats.ts";

/** A value measured for one server. */
export interface Measured {
  /** Who: `baton`, `bare` (baseline a), `socket.io` (baseline b), ... */
  name: string;
  /** The figure the row is judged by (its spread and ratios are of this one). */
  value: number;
  /** How the value prints in the table, e.g. `141k/s`. */
  text: string;
}

/** A ratio of baton to one of its baselines, computed from their values in each round. */
export interface RatioSpec {
  /** Index of the baseline in `baselines`. */
  of: number;
  /** The baseline's value over baton's instead (lower is better: "times faster", "times less"). */
  inverse?: boolean;
  /** The word after the figure: `a`, `faster`, `less`. */
  label?: string;
  /** Baton's value counts as at least this in the ratio (differences below it are noise). */
  floor?: number;
}

/** The figures a goal is judged on: one round's, or the medians of all rounds. */
export interface GoalFigures {
  baton: number;
  /** The baselines' values, in their order. */
  baselines: readonly number[];
  /** The row's ratios, in the order of its `ratios`. */
  ratios: readonly number[];
}

/** A goal of a row, judged on its figures. */
export interface Goal {
  text: string;
  /** Whether the figures meet it. */
  test: (figures: GoalFigures) => boolean;
  /** False when a round's result does not count whatever its figures (events lost, rate not held). */
  sound?: boolean;
}

/** One row as a scenario measures it in one round: baton, its baselines, ratios, goal. */
export interface ResultRow {
  scenario: string;
  case: string;
  metric: string;
  baton: Measured;
  baselines: Measured[];
  ratios?: RatioSpec[];
  goal?: Goal;
  note?: string;
  /** Raw measurements, kept in the results file. */
  detail?: unknown;
}

/** Settings every scenario gets. */
export interface BenchContext {
  quick: boolean;
  /** Where servers under test run (`startServer` uses it; so must any other server). */
  pinning: Pinning;
  /** Progress lines (stderr). */
  log: (line: string) => void;
  /** Adds a row to this round's results (printed as soon as it is known). */
  row: (row: ResultRow) => void;
}

/** A figure over the rounds. */
export interface Figure {
  name: string;
  /** The median round's value and text. */
  value: number;
  text: string;
  /** Each round's value, in round order. */
  values: number[];
  /** (max − min) / median of the values: 0 with one round. */
  spread: number;
}

/** A ratio over the rounds: median and range of each round's ratio. */
export interface RatioFigure {
  label: string;
  median: number;
  min: number;
  max: number;
  values: number[];
}

/** What one round measured for a row, as the results file keeps it. */
export interface RoundRecord {
  round: number;
  baton: Measured;
  baselines: Measured[];
  ratios: number[];
  goalMet?: boolean;
  note?: string;
  detail?: unknown;
}

/** One row of the table, merged over the rounds that measured it. */
export interface TableRow {
  scenario: string;
  case: string;
  metric: string;
  /** How many rounds measured it (fewer than were run if a scenario broke in one). */
  rounds: number;
  baton: Figure;
  baselines: Figure[];
  ratios: RatioFigure[];
  /** Judged on the median figures, and missed if any round was not sound. */
  goal?: { text: string; met: boolean };
  /** The note of baton's median round. */
  note?: string;
  perRound: RoundRecord[];
}

/** The index of the median of `values` (for an even count, the lower of the two middle ones). */
export function medianIndex(values: readonly number[]): number {
  const order = values.map((v, i) => [v, i] as const)
    .sort((a, b) => (Number.isNaN(a[0]) ? 1 : 0) - (Number.isNaN(b[0]) ? 1 : 0) || a[0] - b[0]);
  const finite = order.filter(([v]) => !Number.isNaN(v)).length;
  return order[Math.max(0, Math.floor((finite - 1) / 2))]![1];
}

/** (max − min) / |median| of the values that are numbers; 0 for one value. */
export function spreadOf(values: readonly number[], median: number): number {
  const xs = values.filter((v) => Number.isFinite(v));
  if (xs.length < 2) return 0;
  const range = Math.max(...xs) - Math.min(...xs);
  if (range === 0) return 0;
  return median === 0 ? Infinity : range / Math.abs(median);
}

function figure(measured: readonly Measured[]): Figure {
  const values = measured.map((m) => m.value);
  const mid = measured[medianIndex(values)]!;
  return {
    name: mid.name,
    value: mid.value,
    text: mid.text,
    values,
    spread: spreadOf(values, mid.value),
  };
}

/** `spec`'s ratio for one round's figures. */
export function ratioOf(spec: RatioSpec, baton: number, baseline: number): number {
  const b = Math.max(baton, spec.floor ?? -Infinity);
  const r = spec.inverse ? baseline / b : b / baseline;
  return Number.isFinite(r) ? r : NaN;
}

const key = (r: { scenario: string; case: string; metric: string }) =>
  `${r.scenario}\n${r.case}\n${r.metric}`;

/**
 * Merges each round's rows into the table: per row, the median round's
 * figure for baton and for each baseline, with their spreads; the median
 * and range of each ratio; the goal judged on the median figures.
 */
export function mergeRounds(rounds: readonly (readonly ResultRow[])[]): TableRow[] {
  const byKey = new Map<string, { round: number; row: ResultRow }[]>();
  rounds.forEach((rows, i) => {
    for (const row of rows) {
      const list = byKey.get(key(row));
      if (list) list.push({ round: i + 1, row });
      else byKey.set(key(row), [{ round: i + 1, row }]);
    }
  });
  return [...byKey.values()].map((seen) => {
    const first = seen[0]!.row;
    const baton = figure(seen.map(({ row }) => row.baton));
    const baselines = first.baselines.map((b, i) =>
      figure(
        seen.map(({ row }) => row.baselines.find((x) => x.name === b.name) ?? row.baselines[i]!),
      )
    );
    const roundRatios = seen.map(({ row }) =>
      (row.ratios ?? []).map((spec) =>
        ratioOf(spec, row.baton.value, row.baselines[spec.of]?.value ?? NaN)
      )
    );
    const ratios = (first.ratios ?? []).map((spec, i): RatioFigure => {
      const values = roundRatios.map((rs) => rs[i] ?? NaN);
      const xs = values.filter((v) => Number.isFinite(v));
      return {
        label: spec.label ?? "",
        median: values[medianIndex(values)]!,
        min: xs.length ? Math.min(...xs) : NaN,
        max: xs.length ? Math.max(...xs) : NaN,
        values,
      };
    });
    const batonRound = seen[medianIndex(baton.values)]!.row;
    // Judged on what the table shows: the median figures and the median ratios.
    const goal = first.goal && {
      text: first.goal.text,
      met: first.goal.test({
        baton: baton.value,
        baselines: baselines.map((b) => b.value),
        ratios: ratios.map((r) => r.median),
      }) && seen.every(({ row }) => row.goal?.sound ?? true),
    };
    return {
      scenario: first.scenario,
      case: first.case,
      metric: first.metric,
      rounds: seen.length,
      baton,
      baselines,
      ratios,
      ...(goal ? { goal } : {}),
      ...(batonRound.note ? { note: batonRound.note } : {}),
      perRound: seen.map(({ round, row }, i) => ({
        round,
        baton: row.baton,
        baselines: row.baselines,
        ratios: roundRatios[i]!,
        ...(row.goal
          ? {
            goalMet: row.goal.test({
              baton: row.baton.value,
              baselines: row.baselines.map((b) => b.value),
              ratios: roundRatios[i]!,
            }) && (row.goal.sound ?? true),
          }
          : {}),
        ...(row.note ? { note: row.note } : {}),
        ...(row.detail !== undefined ? { detail: row.detail } : {}),
      })),
    };
  });
}

function ratioNumber(r: number): string {
  return r >= 10 ? r.toFixed(0) : r.toFixed(2);
}

/** A spread as the table prints it: `±12%` for a range of 12% of the median. */
export function spreadText(spread: number): string {
  if (!Number.isFinite(spread)) return "±∞";
  const pct = spread * 100;
  return `±${pct < 1 && pct > 0 ? pct.toFixed(1) : pct.toFixed(0)}%`;
}

function figureCell(f: Figure, rounds: number): string {
  return rounds > 1 ? `${f.text} ${spreadText(f.spread)}` : f.text;
}

function ratioCell(r: RatioFigure, rounds: number): string {
  const label = r.label ? ` ${r.label}` : "";
  if (!Number.isFinite(r.median)) return `-${label}`;
  const range = rounds > 1 && Number.isFinite(r.min)
    ? ` (${ratioNumber(r.min)}–${ratioNumber(r.max)})`
    : "";
  return `${ratioNumber(r.median)}×${label}${range}`;
}

function goalCell(goal: TableRow["goal"]): string {
  return goal ? `${goal.met ? "met" : "**missed**"}: ${goal.text}` : "";
}

/** The whole table in Markdown; `rounds` is how many rounds the run made. */
export function renderTable(rows: readonly TableRow[], rounds = 1): string {
  return markdownTable(
    ["Scenario", "Case", "Metric", "baton", "Baselines", "Ratio", "Goal"],
    rows.map((r) => {
      const notes = [
        r.note,
        r.rounds < rounds ? `measured in ${r.rounds} of ${rounds} rounds` : undefined,
      ].filter(Boolean).join("; ");
      return [
        r.scenario,
        r.case,
        r.metric,
        figureCell(r.baton, r.rounds),
        r.baselines.map((b) => `${b.name} ${figureCell(b, r.rounds)}`).join("; "),
        r.ratios.map((x) => ratioCell(x, r.rounds)).join(", "),
        goalCell(r.goal) + (notes ? (r.goal ? " — " : "") + notes : ""),
      ];
    }),
  );
}

/** Rows of the results table and how they print. */
import type { Pinning } from "./_pinning.ts";
import { markdownTable } from "./_stats.ts";

/** A value measured for one server. */
export interface Measured {
  /** Who: `baton`, `bare` (baseline a), `socket.io` (baseline b), ... */
  name: string;
  value: number;
  /** How the value prints in the table, e.g. `141k/s`. */
  text: string;
}

/** One row of the table: baton, its baselines, the ratio and the goal. */
export interface ResultRow {
  scenario: string;
  case: string;
  metric: string;
  baton: Measured;
  baselines: Measured[];
  /** Printed ratio(s) of baton to its baselines. */
  ratio: string;
  goal?: { text: string; met: boolean };
  note?: string;
  /** Raw measurements, kept in latest.json. */
  detail?: unknown;
}

/** Settings every scenario gets. */
export interface BenchContext {
  quick: boolean;
  /** Where servers under test run (`startServer` uses it; so must any other server). */
  pinning: Pinning;
  /** Progress lines (stderr). */
  log: (line: string) => void;
  /** Adds a row to the table (printed as soon as it is known). */
  row: (row: ResultRow) => void;
}

/** `baton / other` as `0.62×`. */
export function ratioText(baton: number, other: number): string {
  if (!Number.isFinite(baton) || !Number.isFinite(other) || other === 0) return "-";
  const r = baton / other;
  return `${r >= 10 ? r.toFixed(0) : r.toFixed(2)}×`;
}

export function goalCell(goal: ResultRow["goal"]): string {
  return goal ? `${goal.met ? "met" : "**missed**"}: ${goal.text}` : "";
}

/** The whole table in Markdown. */
export function renderTable(rows: ResultRow[]): string {
  return markdownTable(
    ["Scenario", "Case", "Metric", "baton", "Baselines", "Ratio", "Goal"],
    rows.map((r) => [
      r.scenario,
      r.case,
      r.metric,
      r.baton.text,
      r.baselines.map((b) => `${b.name} ${b.text}`).join("; "),
      r.ratio,
      goalCell(r.goal) + (r.note ? (r.goal ? " — " : "") + r.note : ""),
    ]),
  );
}

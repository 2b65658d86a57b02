import assert from "node:assert/strict";
import { medianIndex, mergeRounds, renderTable, type ResultRow, spreadOf } from "./_report.ts";

/** A fan-out-like row: deliveries/s of baton against (a) and (b). */
function row(baton: number, a: number, b: number, extra: Partial<ResultRow> = {}): ResultRow {
  return {
    scenario: "1 fan-out",
    case: "1 viewer",
    metric: "deliveries/s",
    baton: { name: "baton", value: baton, text: `${baton}k` },
    baselines: [
      { name: "(a)", value: a, text: `${a}k` },
      { name: "(b)", value: b, text: `${b}k` },
    ],
    ratios: [{ of: 0, label: "a" }, { of: 1, label: "b" }],
    goal: { text: "≥ 0.5× a and > b", test: ({ ratios: [a, b] }) => a! >= 0.5 && b! > 1 },
    note: `baton ${baton}`,
    ...extra,
  };
}

Deno.test("the median of an even count is the lower middle, NaN last", () => {
  assert.equal(medianIndex([3, 1, 2]), 2);
  assert.equal(medianIndex([4, 1, 3, 2]), 3);
  assert.equal(medianIndex([NaN, 5, 1]), 2);
  assert.equal(spreadOf([90, 100, 110], 100), 0.2);
  assert.equal(spreadOf([100], 100), 0);
});

Deno.test("merged rows show each figure's median round with the spread of all rounds", () => {
  const [merged] = mergeRounds([[row(110, 100, 50)], [row(90, 120, 40)], [row(100, 80, 60)]]);
  assert.equal(merged!.rounds, 3);
  assert.equal(merged!.baton.value, 100);
  assert.equal(merged!.baton.text, "100k");
  assert.equal(merged!.baton.spread, 0.2);
  // Each baseline's median comes from its own rounds.
  assert.deepEqual(merged!.baselines.map((b) => b.value), [100, 50]);
  // Ratios per round: 1.1, 0.75, 1.25 against (a).
  assert.equal(merged!.ratios[0]!.median, 1.1);
  assert.equal(merged!.ratios[0]!.min, 0.75);
  assert.equal(merged!.ratios[0]!.max, 1.25);
  assert.equal(merged!.note, "baton 100");
  assert.deepEqual(merged!.perRound.map((r) => r.goalMet), [true, true, true]);
  const table = renderTable([merged!], 3);
  assert.match(table, /\| 100k ±20% \| \(a\) 100k ±40%; \(b\) 50k ±40% \|/);
  assert.match(table, /1\.10× a \(0\.75–1\.25\), 2\.20× b \(1\.67–2\.25\)/);
});

Deno.test("the goal is judged on the median figures, and missed if a round was unsound", () => {
  // Round 2 misses (90 < 100), but the median ratios meet it.
  const rounds = [[row(110, 100, 50)], [row(90, 200, 100)], [row(100, 80, 60)]];
  const [met] = mergeRounds(rounds);
  assert.equal(met!.goal!.met, true);
  assert.deepEqual(met!.perRound.map((r) => r.goalMet), [true, false, true]);
  const unsound = row(100, 80, 60, {});
  unsound.goal = { ...unsound.goal!, sound: false };
  const [missed] = mergeRounds([[row(110, 100, 50)], [row(90, 200, 100)], [unsound]]);
  assert.equal(missed!.goal!.met, false);
});

Deno.test("one round prints as before: no spreads, no ranges", () => {
  const table = renderTable(mergeRounds([[row(110, 100, 50)]]));
  assert.match(table, /\| 110k +\| \(a\) 100k; \(b\) 50k \| 1\.10× a, 2\.20× b \| met: /);
});

Deno.test("a row missing from a round is merged from the rounds that have it", () => {
  const other = { ...row(1, 1, 1), case: "100 viewers" };
  const merged = mergeRounds([[row(110, 100, 50), other], [row(90, 120, 40)]]);
  assert.deepEqual(merged.map((r) => r.rounds), [2, 1]);
  assert.match(renderTable(merged, 2), /measured in 1 of 2 rounds/);
});

Deno.test("inverse ratios and floors", () => {
  const r: ResultRow = {
    scenario: "9 sleep",
    case: "x",
    metric: "memory",
    baton: { name: "baton", value: 0, text: "0 MB" },
    baselines: [{ name: "awake", value: 1000, text: "1 MB" }],
    ratios: [{ of: 0, inverse: true, label: "less", floor: 100 }],
  };
  assert.equal(mergeRounds([[r]])[0]!.ratios[0]!.median, 10);
});

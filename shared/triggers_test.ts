import assert from "node:assert/strict";
import {
  filtersMatch,
  invalidParams,
  invalidTriggerDef,
  looseEqual,
  paramsMatch,
  type TriggerDef,
  valueAt,
} from "./triggers.ts";

const pr = {
  action: "opened",
  number: 42,
  pull_request: { base: { ref: "main" }, title: "Fix the parser", draft: false },
  labels: ["bug", "parser"],
  commits: [{ id: "a1", author: { name: "Ada" } }],
};

Deno.test("dot-paths reach nested objects and array items, and nothing else", () => {
  assert.equal(valueAt(pr, "pull_request.base.ref"), "main");
  assert.equal(valueAt(pr, "commits.0.author.name"), "Ada");
  assert.equal(valueAt(pr, "pull_request.nope.ref"), undefined);
  assert.equal(valueAt(pr, "constructor"), undefined, "inherited properties are not fields");
  assert.equal(valueAt(pr, "__proto__.constructor"), undefined);
});

Deno.test("filters: eq, contains, arrays as OR, array payload fields, and/or modes", async (t) => {
  const f = (field: string, value: unknown, op?: "eq" | "contains") =>
    ({ field, value, ...(op ? { op } : {}) }) as never;
  await t.step("eq on a nested field", () => {
    assert.equal(filtersMatch(pr, [f("pull_request.base.ref", "main")]), true);
    assert.equal(filtersMatch(pr, [f("pull_request.base.ref", "dev")]), false);
  });
  await t.step("an array value means any of them", () => {
    assert.equal(filtersMatch(pr, [f("action", ["closed", "opened"])]), true);
    assert.equal(filtersMatch(pr, [f("action", ["closed", "merged"])]), false);
  });
  await t.step("an array payload field matches when it contains the value", () => {
    assert.equal(filtersMatch(pr, [f("labels", "bug")]), true);
    assert.equal(filtersMatch(pr, [f("labels", "docs")]), false);
  });
  await t.step("contains is a substring of a string field", () => {
    assert.equal(filtersMatch(pr, [f("pull_request.title", "parser", "contains")]), true);
    assert.equal(filtersMatch(pr, [f("pull_request.title", "Parser!", "contains")]), false);
    assert.equal(filtersMatch(pr, [f("number", "4", "contains")]), false, "not on numbers");
  });
  await t.step("numbers and booleans compare loosely", () => {
    assert.equal(filtersMatch(pr, [f("number", "42")]), true);
    assert.equal(filtersMatch(pr, [f("pull_request.draft", "false")]), true);
  });
  await t.step("a missing field never matches", () => {
    assert.equal(filtersMatch(pr, [f("missing.field", "x")]), false);
  });
  await t.step("and needs all, or needs one; no filters match everything", () => {
    const both = [f("action", "opened"), f("labels", "docs")];
    assert.equal(filtersMatch(pr, both, "and"), false);
    assert.equal(filtersMatch(pr, both, "or"), true);
    assert.equal(filtersMatch(pr, []), true);
  });
});

Deno.test("params follow the spec's matching rules", () => {
  assert.equal(paramsMatch(pr, { action: "opened" }), true);
  assert.equal(paramsMatch(pr, { number: "42" }), true, "loose equality");
  assert.equal(paramsMatch(pr, { labels: "parser" }), true, "array payload contains");
  assert.equal(paramsMatch(pr, { labels: "docs" }), false);
  assert.equal(paramsMatch({ title: "Fix the parser" }, { titleContains: "parser" }), true);
  assert.equal(paramsMatch({ title: "Fix the parser" }, { titleContains: "lexer" }), false);
  assert.equal(paramsMatch(pr, { action: "opened", number: 7 }), false, "every param must match");
  assert.equal(paramsMatch(pr, {}), true);
});

Deno.test("loose equality stays between scalars", () => {
  assert.equal(looseEqual("4.0", 4), true);
  assert.equal(looseEqual("", 0), false);
  assert.equal(looseEqual(true, 1), false);
  assert.equal(looseEqual({}, "[object Object]"), false);
});

Deno.test("params are checked against the definition", () => {
  const def: TriggerDef = {
    type: "github:pull_request",
    label: "PR",
    params: [{ name: "repo", type: "string" }, { name: "number", type: "number" }],
  };
  assert.equal(invalidParams(def, { repo: "a/b", number: 3, repoContains: "a/" }), null);
  assert.match(invalidParams(def, { branch: "main" })!, /Unknown param .*'branch'.*repo, number/);
  assert.match(invalidParams(def, { number: "three" })!, /must be a number/);
  assert.match(invalidParams(def, { repo: { nested: true } })!, /must be a string/);
});

Deno.test("trigger definitions need a namespaced type", () => {
  assert.equal(invalidTriggerDef({ type: "ci:build_failed", label: "CI", params: [] }), null);
  assert.match(invalidTriggerDef({ type: "nocolon" })!, /<service>:<event_name>/);
  assert.match(invalidTriggerDef({ type: "a:b", params: [{ name: 1 }] })!, /name and a type/);
});

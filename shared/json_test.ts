import assert from "node:assert/strict";
import { jsonTooDeep, JsonTooDeepError, MAX_JSON_DEPTH, parseJson } from "./json.ts";

const nested = (levels: number, open = "[", close = "]") =>
  open.repeat(levels) + close.repeat(levels);

Deno.test("jsonTooDeep counts arrays and objects opened inside one another", () => {
  assert.equal(jsonTooDeep(nested(MAX_JSON_DEPTH)), false);
  assert.equal(jsonTooDeep(nested(MAX_JSON_DEPTH + 1)), true);
  assert.equal(jsonTooDeep('{"a":'.repeat(65) + "1" + "}".repeat(65)), true);
  assert.equal(jsonTooDeep("[[],[],[[]]]", 3), false);
  assert.equal(jsonTooDeep("[[],[],[[]]]", 2), true);
  // 200,000 levels, as in the finding: answered without a deep stack.
  assert.equal(jsonTooDeep("[".repeat(200_000)), true);
});

Deno.test("jsonTooDeep ignores brackets inside strings, escaped quotes included", () => {
  assert.equal(jsonTooDeep(JSON.stringify({ a: "[".repeat(500) + "{".repeat(500) })), false);
  assert.equal(jsonTooDeep(JSON.stringify(['"[[[[', "\\", '\\"{{{{"'])), false, "escapes");
  // A string ending in an escaped backslash closes; what follows counts.
  assert.equal(jsonTooDeep('["\\\\",' + nested(70) + "]"), true);
  // An escaped quote does not close the string.
  assert.equal(jsonTooDeep('["\\"' + "[".repeat(70) + '"]'), false);
  assert.equal(jsonTooDeep('"unterminated [[[['), false, "left to JSON.parse");
});

Deno.test("parseJson parses what is shallow enough and names what is not", () => {
  assert.deepEqual(parseJson('{"a":[1,{"b":"[["}]}'), { a: [1, { b: "[[" }] });
  assert.throws(() => parseJson(nested(65)), JsonTooDeepError);
  assert.throws(() => parseJson(nested(3), 2), /deeper than 2 levels/);
  assert.throws(() => parseJson("{'a':1}"), SyntaxError);
});

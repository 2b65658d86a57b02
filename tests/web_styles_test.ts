/**
 * The web client's stylesheet is one hand-written file that merges touch:
 * a block left open nests every later rule inside it (CSS nesting), and
 * those rules then apply nowhere, silently.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { ROOT } from "./harness/procs.ts";

Deno.test("every block of the stylesheet is closed, and each page's rules sit at the top level", async () => {
  const css = (await Deno.readTextFile(join(ROOT, "web", "app", "styles.css")))
    .replace(/\/\*[\s\S]*?\*\//g, "");
  let depth = 0;
  const topLevel = new Set<string>();
  let selector = "";
  for (const ch of css) {
    if (ch === "{") {
      if (depth === 0) topLevel.add(selector.trim());
      depth++;
      selector = "";
    } else if (ch === "}") {
      depth--;
      assert.ok(depth >= 0, "a '}' closes nothing");
      selector = "";
    } else if (ch === ";") selector = "";
    else selector += ch;
  }
  assert.equal(depth, 0, "blocks left open at the end of styles.css");
  for (const rule of [".usage-head", ".push-kinds", ".chart .axis"]) {
    assert.ok(topLevel.has(rule), `${rule} is not a top-level rule`);
  }
});

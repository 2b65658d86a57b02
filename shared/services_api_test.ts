import assert from "node:assert/strict";
import { checkSigilDef, findSigils, invalidSigilParams, sigilDefFor } from "./services_api.ts";

Deno.test("findSigils reads [[type:id key=val]] tokens and their params", () => {
  const got = findSigils('See [[note:abc12]] and [[ticket:T-9 mode=short title="two words"]].');
  assert.equal(got.length, 2);
  assert.deepEqual(got[0], {
    raw: "[[note:abc12]]",
    type: "note",
    id: "abc12",
    params: {},
    index: 4,
  });
  assert.equal(got[1]!.type, "ticket");
  assert.equal(got[1]!.id, "T-9");
  assert.deepEqual(got[1]!.params, { mode: "short", title: "two words" });
});

Deno.test("findSigils leaves what is not a token alone", () => {
  assert.deepEqual(findSigils("no tokens [here] [[also not]] [[:x]] [[a:]] [[a:b c]]"), []);
  assert.deepEqual(findSigils("plain text"), []);
});

Deno.test("sigilDefFor honours aliases; params are checked against the schema", () => {
  const def = checkSigilDef({
    type: "note",
    label: "Note",
    aliases: ["n"],
    schema: {
      properties: { mode: { type: "string", enum: ["short", "full"] }, n: { type: "integer" } },
      required: [],
      additionalProperties: false,
    },
  });
  assert.ok(typeof def !== "string");
  assert.equal(sigilDefFor([def], "n"), def);
  assert.equal(sigilDefFor([def], "other"), undefined);
  assert.equal(invalidSigilParams(def, { mode: "short" }), null);
  assert.match(invalidSigilParams(def, { mode: "long" })!, /one of: short, full/);
  assert.match(invalidSigilParams(def, { n: "1.5" })!, /integer/);
  assert.match(invalidSigilParams(def, { x: "1" })!, /Unknown param 'x'/);
});

Deno.test("checkSigilDef refuses definitions a client could not use", () => {
  assert.match(checkSigilDef({ label: "x" }) as string, /type/);
  assert.match(checkSigilDef({ type: "a" }) as string, /label/);
  assert.match(
    checkSigilDef({ type: "a", label: "A", resolve: "http://evil/{id}" }) as string,
    /resolve/,
  );
  assert.match(
    checkSigilDef({ type: "a", label: "A", resolve: "//evil/{id}" }) as string,
    /resolve/,
  );
  assert.match(checkSigilDef({ type: "a", label: "A", resolve: "/api/x" }) as string, /resolve/);
  assert.match(checkSigilDef({ type: "a", label: "A", aliases: ["b c"] }) as string, /aliases/);
});

Deno.test("a sigil's resolve path cannot climb out of its service's tunnel prefix", () => {
  // The web client fetches `/api/tunnel/runner/{runnerId}/{port}` + resolve, with the cookie:
  // a `..` would send that GET to the relay's own API as the person.
  for (
    const resolve of [
      "/../../../../api/keys/{id}",
      "/x/%2e%2E/%2e%2e/%2e%2e/%2e%2e/api/keys?{id}",
      "/./{id}",
      "/.{id}",
      "/{id}/{id}/{id}/{id}/api/keys",
      "/a\\..\\..\\{id}",
    ]
  ) {
    const got = checkSigilDef({ type: "note", label: "Note", resolve });
    assert.equal(typeof got, "string", `accepted ${resolve}`);
    assert.match(got as string, /resolve/);
  }
  const ok = checkSigilDef({ type: "note", label: "Note", resolve: "/api/notes/{id}?v=1.2" });
  assert.ok(typeof ok !== "string");
  assert.equal(ok.resolve, "/api/notes/{id}?v=1.2");
  const dotted = checkSigilDef({ type: "n", label: "N", resolve: "/notes/{id}.json" });
  assert.ok(typeof dotted !== "string", "a dot inside a segment is fine");
});

Deno.test("a sigil's schema is refused past MAX_SIGIL_SCHEMA_BYTES, so a runner cannot park megabytes on the relay", () => {
  const big = { properties: { x: { type: "string", description: "a".repeat(1024 * 1024) } } };
  const got = checkSigilDef({ type: "note", label: "Note", schema: big });
  assert.equal(typeof got, "string");
  assert.match(got as string, /schema .*too large/);
  const small = { properties: { mode: { type: "string", enum: ["short", "full"] } } };
  assert.ok(typeof checkSigilDef({ type: "note", label: "Note", schema: small }) !== "string");
});

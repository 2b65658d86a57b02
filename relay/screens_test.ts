import assert from "node:assert/strict";
import { SCREEN_REFRESH_MS, SCREEN_TTL_MS, type ScreenNotice, Screens } from "./screens.ts";
import { FakeClock } from "./testdata/fakes.ts";

/** One node's Screens over a set of sessions its viewers have on screen, and what it published. */
function node(clock: FakeClock) {
  const local = new Set<string>();
  const said: ScreenNotice[] = [];
  const screens = new Screens({
    local: (id) => local.has(id),
    publish: (n) => said.push(n),
    clock,
  });
  return { local, said, screens };
}

Deno.test("a session on screen here is said once when it comes on and once when it goes off", () => {
  const clock = new FakeClock();
  const { local, said, screens } = node(clock);
  screens.changed("s1", "u1");
  assert.deepEqual(said, [], "nothing changed: not on screen");
  local.add("s1");
  screens.changed("s1", "u1");
  screens.changed("s1", "u1");
  assert.deepEqual(said, [{ t: "screen", userId: "u1", sessionId: "s1", on: true }]);
  assert.equal(screens.onScreen("s1"), true);
  // Off: the user is remembered from when it came on (an unsubscribe does not name it).
  local.delete("s1");
  screens.changed("s1");
  assert.deepEqual(said[1], { t: "screen", userId: "u1", sessionId: "s1", on: false });
  assert.equal(screens.onScreen("s1"), false);
  screens.close();
});

Deno.test("while a session stays on screen the node says so again, and stops once it is off", () => {
  const clock = new FakeClock();
  const { local, said, screens } = node(clock);
  local.add("s1");
  screens.changed("s1", "u1");
  clock.advance(SCREEN_REFRESH_MS);
  clock.advance(SCREEN_REFRESH_MS);
  assert.equal(said.filter((n) => n.on).length, 3);
  local.delete("s1");
  screens.changed("s1");
  clock.advance(5 * SCREEN_REFRESH_MS);
  assert.equal(said.length, 4, "no refresh once nothing is on screen");
  assert.equal(clock.pendingTimers, 0);
});

Deno.test("another node's word counts until it says off, or until it stops repeating it", () => {
  const clock = new FakeClock();
  const { screens } = node(clock);
  const on = { t: "screen", userId: "u1", sessionId: "s1", on: true } as const;
  screens.heard("B", on);
  screens.heard("C", on);
  assert.equal(screens.onScreen("s1"), true);
  screens.heard("B", { ...on, on: false });
  assert.equal(screens.onScreen("s1"), true, "C still has it on screen");
  // C dies: it stops saying so, and its word lapses.
  clock.advance(SCREEN_TTL_MS - 1);
  assert.equal(screens.onScreen("s1"), true);
  clock.advance(1);
  assert.equal(screens.onScreen("s1"), false);
  // A deleted session is forgotten at once.
  screens.heard("B", on);
  screens.forget("s1");
  assert.equal(screens.onScreen("s1"), false);
});

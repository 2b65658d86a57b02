import assert from "node:assert/strict";
import {
  compileMatcher,
  DEFAULT_HOOK_TIMEOUT_MS,
  type Hook,
  matches,
  parseHooks,
} from "./config.ts";
import { blockReason, type HookRun } from "./session_hooks.ts";

Deno.test("compileMatcher: all, exact names, globs and regular expressions, ignoring case", () => {
  assert.equal(compileMatcher(""), null);
  assert.equal(compileMatcher("*"), null);
  const test = (m: string, name: string) => compileMatcher(m)!.test(name);
  assert.equal(test("Bash", "bash"), true);
  assert.equal(test("bash", "bash_extra"), false);
  assert.equal(test("mcp__github__*", "mcp__github__create_issue"), true);
  assert.equal(test("mcp__github__*", "mcp__gitlab__x"), false);
  assert.equal(test("edit|write", "write"), true);
  assert.equal(test("edit|write", "read"), false);
  assert.equal(test("mcp__.*", "mcp__a__b"), true);
  assert.throws(() => compileMatcher("(unclosed"), /Invalid hook matcher/);
});

Deno.test("parseHooks reads Claude Code's shape, its event names and flat entries", () => {
  const problems: string[] = [];
  const hooks = parseHooks(
    {
      PreToolUse: [{ matcher: "Bash", hooks: [{ type: "command", command: "a", timeout: 5 }] }],
      postToolUse: [{ command: "b", timeout: "500ms" }],
      stop: [{ hooks: [{ command: "c" }] }],
    },
    "global",
    problems,
  );
  assert.deepEqual(problems, []);
  assert.deepEqual(
    hooks.map((h) => [h.event, h.command, h.matcherText, h.timeoutMs]),
    [
      ["preToolUse", "a", "Bash", 5000],
      ["postToolUse", "b", "*", 500],
      ["stop", "c", "*", DEFAULT_HOOK_TIMEOUT_MS],
    ],
  );
  assert.equal(matches(hooks[0]!, "bash"), true);
  assert.equal(matches(hooks[0]!, "read"), false);
});

Deno.test("parseHooks skips bad entries with a reason and keeps the rest", () => {
  const problems: string[] = [];
  const hooks = parseHooks(
    {
      onSomething: [{ command: "x" }],
      preToolUse: [
        { matcher: "(", hooks: [{ command: "x" }] },
        { hooks: [{ type: "prompt", command: "x" }] },
        { hooks: [{ command: "" }] },
        { hooks: [{ command: "x", timeout: 3600 }] },
        { hooks: [{ command: "kept" }] },
      ],
      stop: "nope",
    },
    "project",
    problems,
  );
  assert.deepEqual(hooks.map((h) => h.command), ["kept"]);
  const p = problems.join("\n");
  for (
    const re of [
      /onSomething.*unknown event/,
      /Invalid hook matcher/,
      /type 'prompt'/,
      /command must be/,
      /timeout must be between/,
      /hooks.stop \(project\) must be an array/,
    ]
  ) {
    assert.match(p, re);
  }
  assert.deepEqual(parseHooks("x", "global", problems), []);
});

Deno.test("blockReason: exit code 2 with stderr, a JSON decision, or nothing", () => {
  const hook: Hook = {
    event: "preToolUse",
    command: "check",
    matcher: null,
    matcherText: "*",
    timeoutMs: 1000,
    from: "global",
  };
  const run = (r: Partial<HookRun>): HookRun => ({
    hook,
    code: 0,
    stdout: "",
    stderr: "",
    timedOut: false,
    ...r,
  });
  assert.equal(blockReason(run({ code: 2, stderr: "No rm -rf\n" })), "No rm -rf");
  assert.equal(blockReason(run({ code: 2 })), "Blocked by the preToolUse hook 'check'");
  assert.equal(blockReason(run({ stdout: '{"decision":"block","reason":"Nope"}' })), "Nope");
  assert.equal(
    blockReason(run({
      stdout: '{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"X"}}',
    })),
    "X",
  );
  assert.equal(blockReason(run({ stdout: '{"decision":"approve"}' })), null);
  assert.equal(blockReason(run({ code: 1, stderr: "oops" })), null);
  assert.equal(blockReason(run({ code: null, timedOut: true })), null);
});

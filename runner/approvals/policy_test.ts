import assert from "node:assert/strict";
import {
  ApprovalPolicyError,
  callSummary,
  commandMatches,
  needsApproval,
  parsePolicy,
} from "./policy.ts";

Deno.test("command patterns match the whole command or any simple command in it", () => {
  assert.ok(commandMatches("git push*", "git push origin main"));
  assert.ok(commandMatches("git push*", "cd repo && git push"));
  assert.ok(commandMatches("rm -rf *", "ls; rm -rf /tmp/x"));
  assert.ok(commandMatches("curl *", "echo hi | curl -d @- https://x"));
  assert.ok(!commandMatches("git push*", "git status"));
  // Regular-expression characters in a pattern are literal.
  assert.ok(commandMatches("echo (a).b", "echo (a).b"));
  assert.ok(!commandMatches("echo (a).b", "echo (a)xb"));
  assert.ok(commandMatches("rm ?", "rm x"));
});

Deno.test("needsApproval: auto never asks, ask holds listed tools and matching commands", () => {
  const ask = (tools: string[], commands: string[] = []) =>
    parsePolicy({ mode: "ask", tools, commands });
  assert.ok(!needsApproval(parsePolicy(undefined), "bash", { command: "rm -rf /" }));
  assert.ok(needsApproval(ask([]), "read", { path: "x" }), "ask with empty lists holds everything");
  assert.ok(needsApproval(ask(["write"]), "write", {}));
  assert.ok(!needsApproval(ask(["write"]), "read", {}));
  assert.ok(needsApproval(ask(["*"]), "anything", {}));
  assert.ok(needsApproval(ask([], ["npm publish*"]), "bash", { command: "npm publish --tag x" }));
  assert.ok(!needsApproval(ask([], ["npm publish*"]), "bash", { command: "npm test" }));
  assert.ok(!needsApproval(ask(["*"]), "ask_user", {}), "asking the user is never held");
});

Deno.test("parsePolicy refuses a bad mode, non-string entries and too many", () => {
  assert.throws(() => parsePolicy({ mode: "sometimes" }), ApprovalPolicyError);
  assert.throws(() => parsePolicy({ mode: "ask", tools: [1] }), ApprovalPolicyError);
  assert.throws(() => parsePolicy({ mode: "ask", tools: "bash" }), ApprovalPolicyError);
  assert.throws(
    () => parsePolicy({ mode: "ask", commands: Array(101).fill("x") }),
    ApprovalPolicyError,
  );
  assert.deepEqual(parsePolicy({ mode: "ask" }), { mode: "ask", tools: [], commands: [] });
});

Deno.test("callSummary shows a command, a lone path, or the arguments, cut at 2000", () => {
  assert.equal(callSummary("bash", { command: "ls -la" }), "ls -la");
  assert.equal(callSummary("read", { path: "/etc/hosts" }), "/etc/hosts");
  assert.equal(callSummary("write", { path: "a", content: "b" }), '{"path":"a","content":"b"}');
  assert.equal(callSummary("bash", { command: "x".repeat(5000) }).length, 2000);
});

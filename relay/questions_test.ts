import assert from "node:assert/strict";
import { needsInput, questionState } from "./questions.ts";

const ev = (seq: number, e: Record<string, unknown>) => ({
  seq,
  json: JSON.stringify({ seq, ts: 0, e }),
});

Deno.test("questionState: pending until answered, cancelled or the worker starts again", () => {
  const asked = ev(1, { type: "question", toolCallId: "c1", kind: "approval" });
  assert.deepEqual(questionState([asked], "c1"), { state: "pending", kind: "approval" });
  assert.equal(questionState([asked], "c2").state, "unknown");
  const answered = ev(2, { type: "question_answered", toolCallId: "c1" });
  assert.equal(questionState([asked, answered], "c1").state, "closed");
  assert.equal(
    questionState([asked, ev(2, { type: "question_cancelled", toolCallId: "c1" })], "c1").state,
    "closed",
  );
  for (const type of ["session_start", "session_sleep", "session_end"]) {
    assert.equal(questionState([asked, ev(2, { type })], "c1").state, "closed", type);
  }
  // Another call's answer, or an id that only appears inside text, changes nothing.
  const other = ev(2, { type: "question_answered", toolCallId: "c10", answer: '"c1"' });
  assert.equal(questionState([asked, other], "c1").state, "pending");
});

Deno.test("needsInput: buttons only in collab mode, two options of a single question, Approve and Deny", () => {
  const q = {
    type: "question",
    toolCallId: "c1",
    kind: "question",
    questions: [{ question: "Which?", options: [{ label: "A" }, { label: "B" }, { label: "C" }] }],
  };
  assert.deepEqual(needsInput(q, false), { detail: "Which?", toolCallId: "c1", actions: [] });
  assert.deepEqual(needsInput(q, true)?.actions.map((a) => a.action), [
    "option0",
    "option1",
    "reply",
  ]);
  const multi = { ...q, questions: [{ ...q.questions[0], multiSelect: true }] };
  assert.deepEqual(needsInput(multi, true)?.actions.map((a) => a.action), ["reply"]);
  const two = { ...q, questions: [q.questions[0], { question: "And?", options: [] }] };
  assert.equal(needsInput(two, true)?.detail, "Which? (+1 more)");
  const approval = {
    type: "question",
    toolCallId: "c2",
    kind: "approval",
    toolName: "bash",
    summary: "ls",
  };
  const n = needsInput(approval, true);
  assert.equal(n?.detail, "approve bash: ls");
  assert.deepEqual(n?.actions.map((a) => a.answer), ["approve", "deny"]);
  assert.equal(needsInput({ type: "question" }, true), null);
  // A runner's event cannot make the payload outgrow what push services take.
  assert.equal(needsInput({ ...q, toolCallId: "x".repeat(201) }, true), null);
  const long = { ...q, questions: [{ question: "Which?", options: [{ label: "y".repeat(201) }] }] };
  assert.deepEqual(needsInput(long, true)?.actions.map((a) => a.action), ["reply"]);
});

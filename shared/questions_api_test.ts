import assert from "node:assert/strict";
import { approvalDecision, type PendingQuestion, reduceQuestions } from "./questions_api.ts";

Deno.test("approvalDecision: only a clear yes approves; anything else denies, with its reason", () => {
  for (const yes of ["approve", "Approve", " yes ", "ok", "allow"]) {
    assert.deepEqual(approvalDecision(yes), { approved: true }, yes);
  }
  assert.deepEqual(approvalDecision("deny"), { approved: false });
  assert.deepEqual(approvalDecision("No"), { approved: false });
  assert.deepEqual(approvalDecision("deny: not on a Friday"), {
    approved: false,
    reason: "not on a Friday",
  });
  assert.deepEqual(approvalDecision("sure, go ahead"), {
    approved: false,
    reason: "sure, go ahead",
  });
});

Deno.test("reduceQuestions: a question waits until answered, cancelled, or its worker restarts", () => {
  const q = (id: string) => ({
    type: "question",
    toolCallId: id,
    kind: "question",
    questions: [{ question: "Which?", options: [{ label: "A" }, { label: 5 }] }],
  });
  let list: PendingQuestion[] = [];
  list = reduceQuestions(list, q("a"));
  list = reduceQuestions(list, q("b"));
  assert.deepEqual(list.map((p) => p.toolCallId), ["a", "b"]);
  assert.deepEqual(list[0]!.questions[0]!.options, [{ label: "A" }], "a bad option is dropped");
  const same = reduceQuestions(list, { type: "message_update" });
  assert.equal(same, list, "an unrelated event keeps the array");
  list = reduceQuestions(list, { type: "question_answered", toolCallId: "a" });
  assert.deepEqual(list.map((p) => p.toolCallId), ["b"]);
  assert.deepEqual(reduceQuestions(list, { type: "session_start" }), []);
  assert.deepEqual(reduceQuestions(list, { type: "question_cancelled", toolCallId: "b" }), []);
  assert.deepEqual(reduceQuestions([], { type: "question" }), [], "no toolCallId, no question");
});

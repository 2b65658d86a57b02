import assert from "node:assert/strict";
import { canCoalesce, capEvent, coalesce, MAX_EVENT_JSON, slimPiEvent } from "./events.ts";
import { MAX_EVENT_DEPTH } from "./json.ts";

Deno.test("slimming drops pi's repeated partial message from streaming updates", () => {
  const partial = { role: "assistant", content: [{ type: "text", text: "x".repeat(10_000) }] };
  const slim = slimPiEvent({
    type: "message_update",
    message: partial,
    assistantMessageEvent: { type: "text_delta", contentIndex: 0, delta: "x", partial },
  });
  assert.deepEqual(slim, {
    type: "message_update",
    role: "assistant",
    assistantMessageEvent: { type: "text_delta", contentIndex: 0, delta: "x" },
  });
  assert.deepEqual(slimPiEvent({ type: "agent_end", messages: [partial] }), { type: "agent_end" });
});

Deno.test("text deltas of one block concatenate; other blocks do not", () => {
  const d = (i: number, delta: string) => ({
    type: "message_update",
    assistantMessageEvent: { type: "text_delta", contentIndex: i, delta },
  });
  assert.equal(canCoalesce(d(0, "a"), d(0, "b")), true);
  assert.equal(canCoalesce(d(0, "a"), d(1, "b")), false);
  assert.deepEqual(coalesce(d(0, "a"), d(0, "b")), d(0, "ab"));
});

Deno.test("a newer partial tool output supersedes the older one of the same call only", () => {
  const u = (id: string, text: string) => ({
    type: "tool_execution_update",
    toolCallId: id,
    partialResult: text,
  });
  assert.equal(canCoalesce(u("1", "a"), u("1", "ab")), true);
  assert.equal(canCoalesce(u("1", "a"), u("2", "b")), false);
  assert.deepEqual(coalesce(u("1", "a"), u("1", "ab")), u("1", "ab"));
});

Deno.test("oversized events are replaced by a marker that keeps their type", () => {
  const big = {
    type: "tool_execution_end",
    toolCallId: "c1",
    result: "y".repeat(MAX_EVENT_JSON + 1),
  };
  assert.deepEqual(capEvent(big), {
    type: "tool_execution_end",
    truncated: true,
    bytes: JSON.stringify(big).length,
    toolCallId: "c1",
  });
  const small = { type: "x", a: 1 };
  assert.equal(capEvent(small), small);
});

Deno.test("events nested deeper than the relay takes are replaced by a marker", () => {
  let args: unknown = 1;
  for (let i = 0; i < MAX_EVENT_DEPTH; i++) args = [args];
  const deep = { type: "tool_execution_start", toolCallId: "c2", args };
  assert.deepEqual(capEvent(deep), {
    type: "tool_execution_start",
    truncated: true,
    tooDeep: true,
    toolCallId: "c2",
  });
  const fine = { type: "tool_execution_start", toolCallId: "c3", args: (args as unknown[])[0] };
  assert.equal(capEvent(fine), fine);
});

Deno.test("a streaming tool call keeps the tool's name and id from pi's partial message", () => {
  const partial = {
    role: "assistant",
    content: [{ type: "text", text: "hi" }, {
      type: "toolCall",
      id: "c9",
      name: "bash",
      arguments: {},
    }],
  };
  const slim = slimPiEvent({
    type: "message_update",
    message: partial,
    assistantMessageEvent: { type: "toolcall_delta", contentIndex: 1, delta: '{"comm', partial },
  });
  assert.deepEqual(slim.assistantMessageEvent, {
    type: "toolcall_delta",
    contentIndex: 1,
    delta: '{"comm',
    toolName: "bash",
    toolCallId: "c9",
  });
});

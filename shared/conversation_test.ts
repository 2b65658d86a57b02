import assert from "node:assert/strict";
import { applyEvents, emptyConversation } from "./conversation.ts";
import type { SessionEvent, SessionEventBody } from "./protocol.ts";

function log(...bodies: SessionEventBody[]): SessionEvent[] {
  return bodies.map((e, i) => ({ seq: i + 1, ts: 1000 + i, e }));
}

const usage = {
  input: 100,
  output: 20,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 120,
  cost: { total: 0.5 },
};
const delta = (type: string, contentIndex: number, extra: Record<string, unknown> = {}) => ({
  type: "message_update",
  role: "assistant",
  assistantMessageEvent: { type, contentIndex, ...extra },
});

const run = log(
  { type: "session_start", cwd: "/w", model: { provider: "mock", id: "m1" }, resumed: false },
  { type: "agent_start" },
  {
    type: "message_start",
    message: { role: "user", content: [{ type: "text", text: "list files" }] },
  },
  { type: "message_start", message: { role: "assistant", content: [], model: "m1" } },
  delta("thinking_start", 0),
  delta("thinking_delta", 0, { delta: "Let me " }),
  delta("thinking_delta", 0, { delta: "think." }),
  delta("text_start", 1),
  delta("text_delta", 1, { delta: "Running " }),
  delta("text_delta", 1, { delta: "**ls**." }),
  delta("toolcall_start", 2),
  delta("toolcall_delta", 2, { delta: '{"command":' }),
  delta("toolcall_end", 2, {
    toolCall: { type: "toolCall", id: "c1", name: "bash", arguments: { command: "ls" } },
  }),
  {
    type: "message_end",
    message: {
      role: "assistant",
      content: [
        { type: "thinking", thinking: "Let me think." },
        { type: "text", text: "Running **ls**." },
        { type: "toolCall", id: "c1", name: "bash", arguments: { command: "ls" } },
      ],
      usage,
      stopReason: "toolUse",
    },
  },
  { type: "tool_execution_start", toolCallId: "c1", toolName: "bash", args: { command: "ls" } },
  {
    type: "tool_execution_update",
    toolCallId: "c1",
    toolName: "bash",
    partialResult: { content: [{ type: "text", text: "a.txt\n" }] },
  },
  {
    type: "tool_execution_end",
    toolCallId: "c1",
    toolName: "bash",
    result: { content: [{ type: "text", text: "a.txt\nb.txt\n" }] },
    isError: false,
  },
  { type: "message_start", message: { role: "toolResult", toolCallId: "c1", content: [] } },
  { type: "message_start", message: { role: "assistant", content: [] } },
  delta("text_start", 0),
  delta("text_delta", 0, { delta: "Two files." }),
  {
    type: "message_end",
    message: {
      role: "assistant",
      content: [{ type: "text", text: "Two files." }],
      usage,
      stopReason: "stop",
    },
  },
  { type: "agent_end" },
);

Deno.test("a run of events folds into user prompt, answer blocks, tool run and usage", () => {
  const c = applyEvents(emptyConversation(), run);
  assert.equal(c.working, false);
  assert.deepEqual(c.model, { provider: "mock", id: "m1" });
  assert.deepEqual(c.items.map((i) => i.kind), ["user", "assistant", "assistant"]);
  const [user, first, second] = c.items;
  assert.equal(user?.kind === "user" && user.text, "list files");
  assert.ok(first?.kind === "assistant");
  assert.deepEqual(first.blocks.map((b) => b.type), ["thinking", "text", "toolCall"]);
  assert.equal(first.blocks[1]?.type === "text" && first.blocks[1].text, "Running **ls**.");
  assert.equal(first.streaming, false);
  assert.ok(second?.kind === "assistant" && second.blocks[0]?.type === "text");
  assert.deepEqual(c.tools.c1, {
    id: "c1",
    name: "bash",
    args: { command: "ls" },
    status: "done",
    output: "a.txt\nb.txt\n",
  });
  assert.deepEqual(c.usage, { input: 200, output: 40, cacheRead: 0, cacheWrite: 0, cost: 1 });
  assert.equal(c.lastSeq, run.length);
});

Deno.test("streaming state is visible mid-run and replaying events changes nothing", () => {
  const mid = applyEvents(emptyConversation(), run.slice(0, 10));
  assert.equal(mid.working, true);
  const a = mid.items[1];
  assert.ok(a?.kind === "assistant" && a.streaming);
  assert.equal(a.blocks[0]?.type === "thinking" && a.blocks[0].text, "Let me think.");
  assert.equal(a.blocks[1]?.type === "text" && a.blocks[1].text, "Running **ls**.");
  const full = applyEvents(mid, run);
  assert.deepEqual(applyEvents(full, run), full, "events at or below lastSeq are ignored");
  assert.deepEqual(full, applyEvents(emptyConversation(), run), "incremental equals one pass");
});

Deno.test("unchanged items keep their identity when a new event arrives", () => {
  const a = applyEvents(emptyConversation(), run.slice(0, 9));
  const b = applyEvents(a, run.slice(9, 10));
  assert.equal(b.items[0], a.items[0], "the user item is reused");
  assert.notEqual(b.items[1], a.items[1], "the streaming answer is a new object");
});

Deno.test("errors, aborts and the end of a session become notices", () => {
  const c = applyEvents(
    emptyConversation(),
    log(
      { type: "agent_start" },
      { type: "message_start", message: { role: "assistant", content: [] } },
      delta("text_delta", 0, { delta: "partial" }),
      {
        type: "message_end",
        message: {
          role: "assistant",
          content: [{ type: "text", text: "partial" }],
          stopReason: "error",
          errorMessage: "401 bad key",
        },
      },
      { type: "agent_end" },
      { type: "session_error", message: "No model is available" },
      { type: "session_end", reason: "crashed", message: "worker exited (signal SIGKILL)" },
    ),
  );
  const answer = c.items[0];
  assert.ok(answer?.kind === "assistant");
  assert.equal(answer.error, "401 bad key");
  assert.deepEqual(c.items.slice(1).map((i) => i.kind === "notice" && [i.level, i.text]), [
    ["error", "No model is available"],
    ["error", "worker exited (signal SIGKILL)"],
  ]);
  assert.deepEqual(c.ended, { reason: "crashed", message: "worker exited (signal SIGKILL)" });
});

Deno.test("a delivered trigger shows as one card, not also as the user message carrying it", () => {
  const trigger = {
    triggerId: "t-1",
    type: "ci:build_failed",
    source: "external:ci",
    summary: "main is red",
    payload: { branch: "main" },
    deliverAs: "steer",
    expectsResponse: false,
  };
  const c = applyEvents(
    emptyConversation(),
    log(
      { type: "trigger_delivered", trigger, instruction: "Fix it" },
      {
        type: "message_start",
        message: {
          role: "user",
          content: [{ type: "text", text: 'Fix it\n\n<trigger id="t-1" type="ci:build_failed">' }],
        },
      },
      {
        type: "message_start",
        message: { role: "user", content: [{ type: "text", text: "hello" }] },
      },
    ),
  );
  assert.deepEqual(c.items.map((i) => i.kind), ["trigger", "user"]);
  const card = c.items[0];
  assert.ok(card?.kind === "trigger");
  assert.equal(card.summary, "main is red");
  assert.equal(card.instruction, "Fix it");
  assert.deepEqual(card.payload, { branch: "main" });
});

Deno.test("a runner restart ends the turn in flight and marks the prompts the agent lost", async (t) => {
  const user = (text: string) => ({
    type: "message_start",
    message: { role: "user", content: [{ type: "text", text }] },
  });
  const answer = (text: string) => [
    { type: "message_start", message: { role: "assistant", content: [] } },
    delta("text_start", 0),
    delta("text_delta", 0, { delta: text }),
  ];
  const start = { type: "session_start", cwd: "/w", resumed: false };
  const before = [
    start,
    { type: "agent_start" },
    user("first"),
    ...answer("one"),
    { type: "message_end", message: { role: "assistant", content: [], usage } },
    { type: "agent_end" },
    { type: "agent_start" },
    user("second"),
    ...answer("half an ans"),
    { type: "tool_execution_start", toolCallId: "c9", toolName: "bash", args: {} },
    { type: "queue_update", steering: ["wait"], followUp: [] },
  ];

  await t.step("the agent kept every prompt: only the answer is cut", () => {
    const c = applyEvents(
      emptyConversation(),
      log(...before, {
        ...start,
        resumed: true,
        memory: { messages: 3, lastPrompt: "seco", lastPromptLength: 6 },
      }),
    );
    assert.equal(c.working, false);
    assert.equal(c.activity, "idle");
    assert.deepEqual(c.queue, { steering: [], followUp: [] });
    assert.equal(c.tools.c9?.status, "interrupted");
    const last = c.items.findLast((i) => i.kind === "assistant");
    assert.ok(last?.kind === "assistant" && last.interrupted && !last.streaming);
    assert.deepEqual(
      c.items.filter((i) => i.kind === "user").map((i) => i.kind === "user" && i.forgotten),
      [false, false],
    );
    const notices = c.items.filter((i) => i.kind === "notice").map((i) =>
      i.kind === "notice" && i.text
    );
    assert.deepEqual(notices, [
      "The runner restarted during this turn, so the agent stopped. Send a message to continue",
    ]);
  });

  await t.step("nothing was saved: every prompt is marked, in one notice", () => {
    const c = applyEvents(
      emptyConversation(),
      log(...before, {
        ...start,
        resumed: true,
        memory: { messages: 0, lastPrompt: null, lastPromptLength: 0 },
      }),
    );
    assert.deepEqual(
      c.items.filter((i) => i.kind === "user").map((i) => i.kind === "user" && i.forgotten),
      [true, true],
    );
    const notices = c.items.filter((i) => i.kind === "notice");
    assert.equal(notices.length, 1);
    assert.match(notices[0]!.kind === "notice" ? notices[0]!.text : "", /2 messages marked above/);
    assert.equal(new Set(c.items.map((i) => i.key)).size, c.items.length, "keys stay unique");
  });

  await t.step("a session that wakes from sleep shows nothing new", () => {
    const idle = before.slice(0, 8);
    assert.equal(idle.at(-1)?.type, "agent_end");
    const c = applyEvents(
      emptyConversation(),
      log(...idle, { type: "session_sleep" }, { type: "session_waking" }, {
        ...start,
        resumed: true,
        woke: true,
        memory: { messages: 2, lastPrompt: "first", lastPromptLength: 5 },
      }),
    );
    assert.equal(c.items.some((i) => i.kind === "notice"), false);
    assert.equal(c.activity, "idle");
    assert.equal(c.items.some((i) => i.kind === "user" && i.forgotten), false);
  });
});

Deno.test("sandbox violations and /sandbox answers show as their own items", () => {
  const c = applyEvents(
    emptyConversation(),
    log(
      {
        type: "sandbox:violation",
        timestamp: "2026-11-26T08:00:00.000Z",
        operation: "read",
        target: "/home/ada/.ssh",
        reason: "Sandbox: reading '/home/ada/.ssh' is denied",
      },
      { type: "sandbox:violation", operation: "write", target: "/etc/x", reason: "r" },
      { type: "sandbox:violation", operation: "network", target: "evil.com:443", reason: "r" },
      { type: "sandbox:info", command: "/sandbox", text: "Sandbox: mode basic, active" },
    ),
  );
  assert.deepEqual(c.items.map((i) => i.kind === "sandbox" && [i.variant, i.title, i.text]), [
    [
      "violation",
      "Sandbox blocked a read of /home/ada/.ssh",
      "Sandbox: reading '/home/ada/.ssh' is denied",
    ],
    ["violation", "Sandbox blocked a write to /etc/x", "r"],
    ["violation", "Sandbox blocked a connection to evil.com:443", "r"],
    ["info", "/sandbox", "Sandbox: mode basic, active"],
  ]);
});

Deno.test("MCP and hook notices show at their level", () => {
  const c = applyEvents(
    emptyConversation(),
    log(
      { type: "mcp:notice", level: "info", text: "MCP servers are slow to start" },
      { type: "mcp:notice", level: "error", server: "gh", text: "MCP server 'gh' skipped" },
      { type: "hook:notice", level: "error", text: "The stop hook failed" },
    ),
  );
  assert.deepEqual(c.items.map((i) => i.kind === "notice" && [i.level, i.text]), [
    ["info", "MCP servers are slow to start"],
    ["error", "MCP server 'gh' skipped"],
    ["error", "The stop hook failed"],
  ]);
});

Deno.test("preview_ports events set the session's listening ports; bad entries are dropped", () => {
  const c = applyEvents(
    emptyConversation(),
    log(
      { type: "preview_ports", ports: [{ port: 8000, process: "python3" }] },
      {
        type: "preview_ports",
        ports: [{ port: 5173, process: "node" }, { port: 0 }, { port: "x" }, null, { port: 3000 }],
      },
    ),
  );
  assert.deepEqual(c.previewPorts, [{ port: 5173, process: "node" }, { port: 3000 }]);
  const ended = applyEvents(c, [{ seq: 3, ts: 1, e: { type: "session_end", reason: "ended" } }]);
  assert.deepEqual(ended.previewPorts, []);
  assert.deepEqual(emptyConversation().previewPorts, []);
});

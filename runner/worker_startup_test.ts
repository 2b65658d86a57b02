import assert from "node:assert/strict";
import type { ExtensionAPI, ExtensionFactory } from "@mariozechner/pi-coding-agent";
import { deferredExtension, LateTools } from "./worker_startup.ts";

type Handler = (event: unknown, ctx: unknown) => unknown;

/** A stand-in for pi's extension API that keeps what is registered. */
function fakePi() {
  const handlers = new Map<string, Handler[]>();
  const tools: string[] = [];
  const pi = {
    on: (event: string, h: Handler) => handlers.set(event, [...(handlers.get(event) ?? []), h]),
    registerTool: (t: { name: string }) => tools.push(t.name),
    sendUserMessage: (text: string) => tools.push(`message: ${text}`),
  } as unknown as ExtensionAPI;
  const fire = async (event: string, e: unknown) => {
    let out: unknown;
    for (const h of handlers.get(event) ?? []) out = await h(e, {});
    return out;
  };
  return { pi, handlers, tools, fire };
}

Deno.test("a deferred extension forwards its events to handlers known only later", async () => {
  const { pi, handlers, tools, fire } = fakePi();
  let resolve!: (f: ExtensionFactory | null) => void;
  const ready = new Promise<ExtensionFactory | null>((r) => resolve = r);
  await deferredExtension(ready, ["tool_call", "agent_end"])(pi);
  assert.deepEqual([...handlers.keys()], ["tool_call", "agent_end"]);
  const blocked = fire("tool_call", { toolName: "bash" });
  resolve((api) => {
    api.on("tool_call", (e) => e.toolName === "bash" ? { block: true, reason: "no" } : undefined);
    api.on("agent_end", () => api.sendUserMessage("again"));
  });
  assert.deepEqual(await blocked, { block: true, reason: "no" });
  assert.equal(await fire("tool_call", { toolName: "read" }), undefined);
  await fire("agent_end", {});
  assert.deepEqual(tools, ["message: again"]);
});

Deno.test("a deferred extension without a factory lets every event through", async () => {
  const { pi, fire } = fakePi();
  await deferredExtension(Promise.resolve(null), ["tool_call"])(pi);
  assert.equal(await fire("tool_call", { toolName: "bash" }), undefined);
});

Deno.test("a deferred extension refuses an event it does not forward, and a failed load stays quiet", async () => {
  const { pi, fire } = fakePi();
  await deferredExtension(Promise.resolve((api: ExtensionAPI) => api.on("input", () => {})), [
    "tool_call",
  ])(pi);
  await assert.rejects(fire("tool_call", {}), /event not forwarded: 'input'/);
  const failing = fakePi();
  await deferredExtension(Promise.reject(new Error("Hooks failed")), ["tool_call"])(failing.pi);
  await assert.rejects(failing.fire("tool_call", {}), /Hooks failed/);
});

Deno.test("late tools register through the extension's handle, after it loaded only", () => {
  const late = new LateTools();
  late.add([]);
  assert.throws(() => late.add([{ name: "x" } as never]), /was not loaded/);
  const { pi, tools } = fakePi();
  late.extension()(pi);
  late.add([{ name: "mcp__a__b" } as never, { name: "mcp__a__c" } as never]);
  assert.deepEqual(tools, ["mcp__a__b", "mcp__a__c"]);
});

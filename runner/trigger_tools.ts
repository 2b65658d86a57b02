/**
 * What the agent in a worker sees of triggers: the injected message that
 * carries a trigger's payload and metadata, and the tools that let it
 * subscribe, unsubscribe and answer (each one a call to the relay through
 * the daemon, on behalf of this session only).
 *
 * @module
 */
import { defineTool } from "@mariozechner/pi-coding-agent";
import { Type } from "@mariozechner/pi-ai";
import type { DeliveredTrigger } from "../shared/protocol.ts";

/** Payloads longer than this are cut in the message (the history keeps them whole). */
const MAX_PAYLOAD_CHARS = 30_000;

function attr(v: string): string {
  return v.replace(
    /[&"<>]/g,
    (c) => ({ "&": "&amp;", '"': "&quot;", "<": "&lt;", ">": "&gt;" })[c]!,
  );
}

/**
 * JSON that cannot close the block it sits in: `<`, `>` and `&` become
 * `\u003c`, `\u003e`, `\u0026` (the same JSON for any parser).
 */
function inertJson(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(
    /[<>&]/g,
    (c) => `\\u00${c.charCodeAt(0).toString(16).padStart(2, "0")}`,
  );
}

/** One line of plain text from something a sender wrote. */
function oneLine(s: string): string {
  // deno-lint-ignore no-control-regex
  return s.replace(/[\u0000-\u001f\u007f\u2028\u2029]+/g, " ").replace(/[<>&]/g, (c) => attr(c))
    .slice(0, 500);
}

/**
 * The text the agent receives for a trigger (after the instruction, if any).
 * Everything that comes from the sender is escaped so that it cannot end
 * the <trigger> block and pass itself off as the user's words.
 */
export function triggerMessage(t: DeliveredTrigger, instruction?: string): string {
  let payload = inertJson(t.payload);
  if (payload.length > MAX_PAYLOAD_CHARS) {
    payload = payload.slice(0, MAX_PAYLOAD_CHARS) + `\n… (${payload.length} characters, cut)`;
  }
  const lines = [
    ...(instruction?.trim() ? [instruction.trim(), ""] : []),
    `<trigger id="${attr(t.triggerId)}" type="${attr(t.type)}" source="${attr(t.source)}">`,
    ...(t.summary ? [`Summary: ${oneLine(t.summary)}`] : []),
    "Payload:",
    payload,
    "</trigger>",
  ];
  if (t.expectsResponse) {
    lines.push(
      "",
      `The sender expects an answer: when you have one, call respond_to_trigger with triggerId "${t.triggerId}".`,
    );
  }
  return lines.join("\n");
}

/** Sends a request to the relay for this session and returns its answer. */
export type RelayCall = (op: string, data: Record<string, unknown>) => Promise<unknown>;

function result(data: unknown) {
  return {
    content: [{ type: "text" as const, text: JSON.stringify(data, null, 2) }],
    details: data,
  };
}

const Scalar = Type.Union([Type.String(), Type.Number(), Type.Boolean()]);
const Params = Type.Record(Type.String(), Scalar, {
  description: "Values the trigger's payload must have (see the trigger's params)",
});
const Filters = Type.Array(
  Type.Object({
    field: Type.String({ description: "Dot-path into the payload, e.g. 'pull_request.base.ref'" }),
    value: Type.Union([Scalar, Type.Array(Scalar)], {
      description: "Value to match; an array matches any of its values",
    }),
    op: Type.Optional(
      Type.Union([Type.Literal("eq"), Type.Literal("contains")], {
        description: "eq (default) or contains (substring of a string field)",
      }),
    ),
  }),
);
const FilterMode = Type.Union([Type.Literal("and"), Type.Literal("or")], {
  description: "How several filters combine (default and)",
});

/** The agent's trigger tools. */
export function triggerTools(call: RelayCall) {
  return [
    defineTool({
      name: "list_available_triggers",
      label: "List available triggers",
      description:
        "List the triggers (events from services, webhooks, other systems) this runner offers, with their params. Subscribe to one to be told when it happens. Also lists the sigils its services render: write [[type:id]] (or [[type:id key=val]]) in an answer to show that item as a link.",
      parameters: Type.Object({}),
      execute: async () => result(await call("triggers.available", {})),
    }),
    defineTool({
      name: "subscribe_trigger",
      label: "Subscribe to a trigger",
      description:
        "Subscribe this session to a trigger type: matching events arrive as messages. Narrow them with params (from the trigger's definition) and filters on payload fields.",
      parameters: Type.Object({
        triggerType: Type.String({ description: "The trigger type, '<service>:<event>'" }),
        params: Type.Optional(Params),
        filters: Type.Optional(Filters),
        filterMode: Type.Optional(FilterMode),
      }),
      execute: async (_id, p) => result(await call("triggers.subscribe", p)),
    }),
    defineTool({
      name: "unsubscribe_trigger",
      label: "Unsubscribe from a trigger",
      description:
        "Remove a subscription of this session, by subscriptionId (preferred) or, removing every subscription of that type, by triggerType.",
      parameters: Type.Object({
        subscriptionId: Type.Optional(Type.String()),
        triggerType: Type.Optional(Type.String()),
      }),
      execute: async (_id, p) => result(await call("triggers.unsubscribe", p)),
    }),
    defineTool({
      name: "list_trigger_subscriptions",
      label: "List trigger subscriptions",
      description: "List this session's trigger subscriptions.",
      parameters: Type.Object({}),
      execute: async () => result(await call("triggers.list", {})),
    }),
    defineTool({
      name: "update_trigger_subscription",
      label: "Update a trigger subscription",
      description:
        "Change the params, filters or filter mode of one of this session's subscriptions.",
      parameters: Type.Object({
        subscriptionId: Type.String(),
        params: Type.Optional(Params),
        filters: Type.Optional(Filters),
        filterMode: Type.Optional(FilterMode),
      }),
      execute: async (_id, p) => result(await call("triggers.update", p)),
    }),
    defineTool({
      name: "respond_to_trigger",
      label: "Respond to a trigger",
      description:
        "Answer a trigger this session received (its id is in the <trigger> message): an action taken and/or a text.",
      parameters: Type.Object({
        triggerId: Type.String(),
        action: Type.Optional(
          Type.String({ description: "What you did, e.g. 'fixed', 'ignored'" }),
        ),
        text: Type.Optional(Type.String({ description: "Your answer in words" })),
      }),
      execute: async (_id, p) => result(await call("triggers.respond", p)),
    }),
  ];
}

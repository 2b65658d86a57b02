/**
 * What lets a worker's session start sooner (stop 28, docs/performance.md
 * "Spawn latency"): work a spare worker does while it waits to be taken, an
 * extension whose handlers are known only later (hooks load while pi does),
 * and MCP tools that join the session once their servers answer.
 *
 * @module
 */
import type { ExtensionAPI, ExtensionFactory, ToolDefinition } from "@mariozechner/pi-coding-agent";
import { primeSandboxChecks } from "./sandbox/session.ts";

/**
 * Work a spare worker does after `ready`, before a session takes it: the
 * sandbox's dependency checks (about ten subprocesses: `which`, bubblewrap's
 * version and user-namespace probes), whose results the sandbox runtime
 * keeps for the process, and the MCP client's modules (loaded on first use:
 * they are half a second of a cold worker's start here, and most sessions
 * have no MCP server).
 */
export function prewarmSpare(): void {
  primeSandboxChecks();
  import("./mcp/servers.ts").then((m) => m.loadMcpClient()).catch(() => {});
}

type Handler = (event: unknown, ctx: unknown) => unknown;

/**
 * An extension whose real factory is known only once `ready` resolves (null:
 * none). pi takes extensions when the session is built; this one registers
 * a forwarder for each of `events` at once, and each forwarder waits for the
 * real handlers. The session's first turn starts only after `ready` is
 * awaited by the worker, so in practice nothing waits.
 */
export function deferredExtension(
  ready: Promise<ExtensionFactory | null>,
  events: readonly string[],
): ExtensionFactory {
  return (pi) => {
    const handlers = ready.then(async (factory) => {
      const byEvent = new Map<string, Handler[]>();
      if (!factory) return byEvent;
      const recorder = new Proxy(pi, {
        get(target, prop, receiver) {
          if (prop !== "on") return Reflect.get(target, prop, receiver);
          return (event: string, handler: Handler) => {
            if (!events.includes(event)) {
              throw new Error(`Deferred extension: event not forwarded: '${event}'`);
            }
            byEvent.set(event, [...(byEvent.get(event) ?? []), handler]);
          };
        },
      });
      await factory(recorder);
      return byEvent;
    });
    // Its failure is the worker's to report (it awaits `ready`), not an unhandled rejection.
    handlers.catch(() => {});
    const on = pi.on as unknown as (event: string, handler: Handler) => void;
    for (const event of events) {
      on(event, async (e, ctx) => {
        for (const h of (await handlers).get(event) ?? []) {
          const result = await h(e, ctx);
          if (result !== undefined) return result;
        }
        return undefined;
      });
    }
  };
}

/**
 * Tools that join a session after it was built (its MCP servers' tools):
 * the extension keeps pi's handle, {@linkcode LateTools.add} registers
 * through it, so they pass the same extension hooks (sandbox gate,
 * approvals, hooks) as tools given at creation.
 */
export class LateTools {
  #pi: ExtensionAPI | null = null;

  /** The extension to hand to pi's resource loader. */
  extension(): ExtensionFactory {
    return (pi) => {
      this.#pi = pi;
    };
  }

  /** Registers `tools` (after the session was created: they are active for the next turn). */
  add(tools: ToolDefinition[]): void {
    if (tools.length === 0) return;
    if (!this.#pi) throw new Error("Late tools: the extension was not loaded");
    for (const t of tools) this.#pi.registerTool(t);
  }
}

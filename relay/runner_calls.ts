/**
 * The runner's calls on behalf of its agents' trigger tools: checked here,
 * at the runner socket's edge, and served by the trigger service.
 *
 * @module
 */
import type { z } from "zod";
import { invalid, notFound } from "./errors.ts";
import type { RunnerCalls } from "./runner_socket.ts";
import type { RunnerServices } from "./runner_services.ts";
import type { AsyncStore } from "./store/mod.ts";
import type { Triggers } from "./triggers.ts";

/** Serves a runner's `call`s and `service_announce`s through the trigger service. */
export class TriggerCalls implements RunnerCalls {
  constructor(
    readonly triggers: Triggers,
    readonly store: Pick<AsyncStore, "sessions">,
    readonly services?: RunnerServices,
  ) {}

  announce(runnerId: string, defs: unknown): string[] | Promise<string[]> {
    return this.triggers.announce(runnerId, defs);
  }

  /** Keeps a runner's panels, sigils and service list, and tells its owner's viewers. */
  announceServices(
    link: { runnerId: string; userId: string },
    msg: Record<string, unknown>,
  ): string[] {
    return this.services?.announce(link, msg) ?? [];
  }

  /**
   * Serves a runner's call on behalf of one of its sessions' agents. The
   * schemas (zod) are loaded on the first call, as the HTTP API loads them.
   */
  async call(
    link: { runnerId: string; userId: string },
    op: string,
    data: Record<string, unknown>,
  ): Promise<unknown> {
    const { triggers } = this;
    const { RespondBody, SubscriptionBody, UnsubscribeCall, UpdateSubscriptionCall } = await import(
      "./routes/trigger_schemas.ts"
    );
    const sessionId = typeof data.sessionId === "string" ? data.sessionId : "";
    const s = await this.store.sessions.get(sessionId);
    if (!s || s.runnerId !== link.runnerId || s.userId !== link.userId) throw notFound("Session");
    const parse = <T extends z.ZodType>(schema: T): z.infer<T> => {
      const r = schema.safeParse(data);
      if (!r.success) {
        const i = r.error.issues[0];
        throw invalid(`Invalid arguments: ${i?.path.join(".") || ""} ${i?.message ?? ""}`.trim());
      }
      return r.data;
    };
    switch (op) {
      case "triggers.available":
        return {
          triggerDefs: await triggers.catalog(s.runnerId),
          // The sigils the runner's services render: the agent may write `[[type:id]]`.
          sigils: (this.services?.sigils(s.runnerId) ?? []).map((d) => ({
            type: d.type,
            label: d.label,
            ...(d.description ? { description: d.description } : {}),
            ...(d.aliases ? { aliases: d.aliases } : {}),
            ...(d.schema ? { schema: d.schema } : {}),
          })),
        };
      case "triggers.list":
        return { subscriptions: await triggers.subscriptions(s.userId, sessionId) };
      case "triggers.subscribe":
        return triggers.subscribe(s.userId, sessionId, parse(SubscriptionBody));
      case "triggers.update": {
        const { subscriptionId, ...patch } = parse(UpdateSubscriptionCall);
        return triggers.updateSubscription(s.userId, sessionId, subscriptionId, patch);
      }
      case "triggers.unsubscribe": {
        const { subscriptionId, triggerType } = parse(UnsubscribeCall);
        const target = subscriptionId ?? triggerType;
        if (!target) throw invalid("Give a subscriptionId (or a triggerType)");
        return triggers.unsubscribe(s.userId, sessionId, target);
      }
      case "triggers.respond":
        await triggers.respond(s, parse(RespondBody));
        return { ok: true };
      default:
        throw invalid(`Unknown call: '${op.slice(0, 60)}'`, "unknown_op");
    }
  }
}
